"""``kvbench``: the ``%kvload`` + ``%%kvbench`` pair as one command, for terminals, scripts and CI.

It takes the same options (declared once in :mod:`kvmagic.frontends.options`) and calls the same
:func:`load_model` and :func:`run_benchmark`. The table goes to stdout; the model summary, notes
and progress go to stderr, so ``--format csv`` or ``json`` can be piped.

Exit status: 0 on success; 1 when ``--fail-on`` finds a significant regression against ``--compare``
(so that CI steps and ``git bisect run`` can use it); 2 on bad input (an unknown flag, a bad value, an
empty prompt, a model that cannot be loaded) or when ``--fail-on`` cannot judge, with one line
``kvbench: error: ...`` on stderr; 130 on Ctrl-C before any row was measured.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TextIO

from kvmagic.core.addon import addons
from kvmagic.errors import KVMagicError, one_line
from kvmagic.frontends.around import exit_status, finish, read_ahead, saved_request, taker
from kvmagic.frontends.helppage import Formatter, add_grouped, describe, fitted
from kvmagic.frontends.options import (
    BENCH_OPTIONS,
    LOAD_OPTIONS,
    add_arguments,
    bench_spec,
    check_before_loading,
    defaults,
    emptied,
    flag,
    load_kwargs,
    meant,
    typed,
    word_optional,
)
from kvmagic.frontends.values import prompt_apart, read_text

if TYPE_CHECKING:
    import pandas as pd

    from kvmagic.measure.loaded import LoadedModel

__all__ = ["FORMATS", "error_line", "main", "parser"]

FORMATS = ("table", "markdown", "csv", "json")
PROG = "kvbench"
_SAID = f"{PROG}: error: "  # what a mistake's one message follows on stderr


class _Parser(argparse.ArgumentParser):
    """argparse, but a mistake is one line on stderr rather than the usage block."""

    def error(self, message: str) -> NoReturn:
        said = f"{one_line(message)} ({meant(message, self)}see {self.prog} --help)"
        self.exit(2, f"{_SAID}{fitted(said, _SAID)}\n")


_ABOUT = """Time greedy generation of a prompt with the KV cache off and on, as %%kvbench does in a notebook, and
check that both generate the same tokens. The model loads as %kvload loads it: -m names a Hugging Face Hub
id, a local directory, or tiny (built in, works offline).

The table and its notes go to stdout, the model's summary and the progress to stderr; with --format csv or
json the notes go to stderr too, so the output can be piped. Exit status: 0; 1 when --fail-on finds a
regression; 2 on a mistake, said in one line."""
_EXAMPLES = """kvbench -m tiny -n 16 'The KV cache'
echo 'The KV cache' | kvbench -m tiny -n 16,64 --format csv
kvbench -m tiny -r 3 --save before.json 'The KV cache'
kvbench -m tiny -r 3 --compare before.json 'The KV cache'
kvbench -m tiny,google/gemma-3-270m --random-weights -n 8 -p 32,128 'The KV cache'"""


def parser() -> argparse.ArgumentParser:
    usage = "%(prog)s [options] PROMPT\n       %(prog)s [options] --prompt-file FILE\n       ... | %(prog)s [options]"
    cli = _Parser(prog=PROG, usage=usage, formatter_class=Formatter)
    given = cli.add_argument_group("prompt and output")
    given.add_argument("prompt", nargs="?", help="The prompt; without it, --prompt-file or stdin.")
    given.add_argument("--prompt-file", metavar="FILE", help="Read the prompt from FILE ('-': stdin).")
    given.add_argument("--format", choices=FORMATS, default="table", help="How to print the result (default: table).")
    add_arguments(cli.add_argument_group("model (as %kvload)"), LOAD_OPTIONS, "cli")
    add_grouped(cli, "cli")
    describe(cli, _ABOUT, _EXAMPLES)
    return cli


def read_prompt(args: argparse.Namespace, stdin: TextIO) -> str:
    """The prompt from exactly one place: the argument, the file, or piped stdin."""
    if args.prompt is not None and args.prompt_file is not None:
        raise KVMagicError("give the prompt once: as an argument or with --prompt-file, not both")
    if args.prompt is not None:
        prompt: str = args.prompt
    elif args.prompt_file not in (None, "-"):
        prompt = read_text(args.prompt_file, "the prompt")
    elif args.prompt_file is None and stdin.isatty():
        raise KVMagicError("no prompt: give it as an argument, with --prompt-file FILE, or on stdin")
    else:
        prompt = stdin.read()
    from kvmagic.runner.prompt import visible

    if not visible(prompt):  # found before a model loads for nothing
        raise KVMagicError("the prompt is empty: give the text to generate from")
    return prompt


def _given_prompt(args: argparse.Namespace, stdin: TextIO) -> str | None:
    """The prompt given as an argument or with --prompt-file, where one is (stdin only where ``-`` names it)."""
    if args.prompt is None and args.prompt_file is None:
        return None
    return read_prompt(args, stdin)


class Shown(Protocol):
    """What the command prints: a result, or what an add-on shows of it (a comparison with a baseline, say)."""

    def to_dict(self) -> dict[str, Any]: ...
    def to_dataframe(self) -> pd.DataFrame: ...
    def notes(self) -> list[str]: ...


def render(shown: Shown, kind: str, wide: bool = False) -> str:
    """The result (or what an add-on shows of it) as text of one of :data:`FORMATS`; table and markdown end with the
    notes.

    ``table`` is for reading in a terminal: the shown columns, fitting 100 columns (every column if
    ``wide``, in blocks of columns that each fit). ``markdown``, like ``csv`` and ``json``, is a format for
    files and pages, and keeps every column, as ``--save run.md`` does.
    """
    if kind == "json":
        from kvmagic.results.serialize import json_text

        return json_text(shown.to_dict()) + "\n"
    frame = shown.to_dataframe()
    if kind == "csv":
        return str(frame.to_csv(index=False))
    if kind == "markdown":
        from kvmagic.results.serialize import markdown_table

        return markdown_table(frame, shown.notes())
    from kvmagic.results.shown import shown_text, wide_text

    return (wide_text if wide else shown_text)(frame, shown.notes()) + "\n"


def main(argv: Sequence[str] | None = None, *, stdin: TextIO | None = None) -> int:
    """Run the command; returns the exit status."""
    cli = parser()
    words = list(sys.argv[1:] if argv is None else argv)
    for addon in addons():  # another front end's spelling of an add-on's option, typed here
        misread = addon.misread(words)
        if misread:
            cli.error(misread)
    notebook = _notebook_only(words)
    if notebook:
        cli.error(notebook)
    apart = prompt_apart(words, word_optional("cli"), one_word=True)
    args = cli.parse_args(apart)
    if emptied(cli, args):
        cli.error(f"{emptied(cli, args)} needs a value, and -- is none: give it one")
    try:
        return _run(args, words, sys.stdin if stdin is None else stdin, typed(cli, apart))
    except KVMagicError as error:
        for addon in addons():
            addon.refusing(args, error)
        print(error_line(error), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


def _notebook_only(words: Sequence[str]) -> str:
    """What to do instead, where ``words`` hold a flag of the notebook's %%kvbench that the command lacks (argparse
    would call it unrecognized, or take it for the prompt's); empty otherwise."""
    ours = {f for o in (*LOAD_OPTIONS, *BENCH_OPTIONS) if "cli" in o.hosts for f in o.spelling("cli")}
    for option in BENCH_OPTIONS:
        if "cli" in option.hosts:
            continue
        negated = [f"--no-{f[2:]}" for f in option.flags if option.action is argparse.BooleanOptionalAction]
        for word in words[: words.index("--") if "--" in words else len(words)]:
            spelled = word.partition("=")[0]
            if spelled in {*option.flags, *negated} - ours:
                return f"{spelled} is the notebook's (%%kvbench), not the command's: {option.offered()}"
    return ""


def error_line(error: KVMagicError) -> str:
    """The one message a refusal prints, options named as the command's flags, wrapped to 100 columns."""
    return _SAID + fitted(one_line(error.spelled(lambda name: flag(name, "cli"))), _SAID)


def _run(args: argparse.Namespace, argv: Sequence[str], stdin: TextIO, given: frozenset[str]) -> int:
    from kvmagic.model.loading import load_model
    from kvmagic.runner.benchmark import run_benchmark

    saved = saved_request(args, given, "cli", lambda: _given_prompt(args, stdin))
    configured = defaults()
    kwargs = load_kwargs(args, configured)
    taken = taker(args, configured, "cli")
    if taken is not None:  # before anything of the request is read: the process may be one of several
        taken.begin(args, argv)
    prompt = read_prompt(args, stdin) if saved is None else saved.prompt
    ahead = read_ahead(args, saved)
    spec = bench_spec(args, configured, saved.fields if saved is not None else None)
    check_before_loading(spec, prompt)
    for line in () if saved is None else saved.said:
        _say(fitted(line, ""), args)

    def said(loaded: LoadedModel) -> None:
        _say(fitted(loaded.summary(), ""), args)

    if taken is not None:  # an add-on runs it, saying each model's summary as it loads
        result: Any = taken.run(args, configured, "cli", prompt.strip(), spec, said)
    else:
        loaded = load_model(**kwargs)
        said(loaded)
        result = run_benchmark(loaded, prompt.strip(), spec, progress=not args.quiet)
    shown, unsaved = finish(args, result, ahead, say=lambda line: _say(line, args))
    if not args.quiet:
        sys.stdout.write(render(shown, args.format, wide=bool(args.wide)))
    if args.format in ("csv", "json"):  # keep machine-read output clean: the notes go beside it, wrapped as the table's
        from kvmagic.results.shown import wrapped_notes

        for note in wrapped_notes(shown.notes()):
            _say(note, args)
    status = exit_status(args, shown, ahead)
    if unsaved:  # the table is out; the one line says what did not happen
        print(error_line(KVMagicError(unsaved)), file=sys.stderr)
        status = status or 2
    if taken is not None:
        taken.end(status)
    return status


def _say(text: str, args: argparse.Namespace) -> None:
    if not args.quiet:
        print(text, file=sys.stderr)
