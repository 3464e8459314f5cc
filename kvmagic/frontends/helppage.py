"""The help pages of ``%kvload``, ``%%kvbench`` and the ``kvbench`` command, laid out alike, and the messages
a front end prints, at the same width.

A page opens with its usage and what it does, then the options by purpose on a few lines, so that its first
screen answers "what can I change"; every option follows with its meaning, in the same groups. It is wrapped
at 100 columns between words only: an option's name (``--ci-target``) or a model's stays whole. So is a
mistake or a stop: a terminal would wrap a long line wherever the edge falls, mid-word, and IPython prints
``UsageError: `` and the command ``kvbench: error: `` before the message, so the width counts them too.
"""

from __future__ import annotations

import argparse
import functools
import textwrap

from kvmagic.frontends.options import BENCH_OPTIONS, Host, Option, add_arguments

__all__ = ["BENCH_GROUPS", "WIDTH", "Formatter", "add_grouped", "describe", "fitted", "magic_page"]

WIDTH = 100  # the columns of the terminal a page or a message is made to fit

# The centre's benchmark options by purpose, as parameter names, each in one group (tests/test_help.py checks); an
# add-on's option names its group (``Option.purpose``).
BENCH_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "what to measure",
        ("new_tokens", "prompt_tokens", "batch", "chat", "expand"),
    ),
    ("how long", ("repeat", "ci_target", "auto_cap", "warmup_tokens", "max_seconds", "threads")),
    ("what to show", ("output", "var", "quiet", "wide", "steps", "save")),
    ("strategies", ("cache", "quality", "quality_text", "kv_bits", "compile")),
    ("scale", ()),
)
_INDENT = 22  # where the overview's flags start
_wrap = functools.partial(textwrap.wrap, break_long_words=False, break_on_hyphens=False)  # between words only


class Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's layout at 100 columns, the text above the options kept as written, and each option's help
    wrapped between words only (argparse would break ``--ci-target`` after its hyphen)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=WIDTH, max_help_position=30)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return _wrap(" ".join(text.split()), width)


def add_grouped(parser: argparse.ArgumentParser, host: Host) -> None:
    """The benchmark options ``host`` has, one argument group per purpose."""
    ours = {option.dest: option for option in BENCH_OPTIONS if host in option.hosts}
    for title, names in BENCH_GROUPS:
        grouped = [*(ours[name] for name in names if name in ours), *(o for o in ours.values() if o.purpose == title)]
        add_arguments(parser.add_argument_group(title), grouped, host)


def describe(parser: argparse.ArgumentParser, about: str, examples: str) -> None:
    """Set ``parser``'s text above its options: ``about``, its titled groups' flags by purpose, ``examples``."""
    lines = []
    for group in parser._action_groups:
        actions = [action for action in group._group_actions if action.option_strings]
        if group in (parser._positionals, parser._optionals) or not actions:
            continue
        flags = ", ".join(next((f for f in a.option_strings if f.startswith("--")), "") for a in actions)
        title = f"  {group.title:<{_INDENT - 3}} "
        lines += _wrap(flags, WIDTH, initial_indent=title, subsequent_indent=" " * _INDENT)
    purposes = "\n\noptions by purpose (each explained below):\n" + "\n".join(lines) if lines else ""
    paragraphs = ("\n".join(_wrap(" ".join(p.split()), WIDTH)) for p in about.strip().split("\n\n"))
    wrapped = "\n\n".join(paragraphs)
    parser.description = f"{wrapped}{purposes}\n\nexamples:\n{textwrap.indent(examples, '  ')}"


def magic_page(prog: str, usage: str, about: str, examples: str, options: tuple[Option, ...]) -> str:
    """A magic's help page (its docstring, what ``%kvbench?`` shows), the benchmark's options by purpose;
    ``usage`` as argparse takes it (``%(prog)s`` is ``prog``)."""
    page = argparse.ArgumentParser(prog, usage=usage, formatter_class=Formatter, add_help=False)
    if options is BENCH_OPTIONS:
        add_grouped(page, "magic")
    else:
        add_arguments(page, options, "magic")
    describe(page, about, examples)
    return page.format_help()


def fitted(message: str, prefix: str) -> str:
    """``message`` with line breaks such that ``prefix + message`` fits 100 columns; later lines indented by two."""
    lines = _wrap(prefix + message, WIDTH, subsequent_indent="  ")
    return "\n".join(lines)[len(prefix) :]
