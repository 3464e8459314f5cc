"""Any argument line, as typed: the magic's parser reads it or raises one UsageError line; the command's reads
it or exits 2 with one ``kvbench: error:`` line. Flags come from the option table, values from its examples
and from junk, in every spelling (``--flag value``, ``--flag=value``, ``-n2``), quoted by shlex, in quotes
left open, repeated. Parsing includes the request's own checks (``BenchSpec``): nothing runs, so examples
are cheap and many.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError

from kvmagic.addons.baseline.baseline_request import fail_on
from kvmagic.errors import KVMagicError
from kvmagic.frontends.cli import error_line, main, parser
from kvmagic.frontends.magics import KVMagics, _usage_error, parse_line
from kvmagic.frontends.options import BENCH_OPTIONS, LOAD_OPTIONS, Host, Option, bench_spec, defaults, word_optional
from kvmagic.frontends.values import prompt_apart
from kvmagic.frontends.variables import check_name

from .conftest import said

PARSE = settings(max_examples=300, deadline=None, database=None)

JUNK = st.sampled_from(
    ["", "-", "--", "=", "'", '"', "0", "-1", "1e3", "nan", "inf", "auto", "check", "a,b", "2-", "16-256*0", "x y",
     "\x00", "\ud800", "\u202e", "٣", "--frontier", "-n"]
)  # fmt: skip
# Mostly as a user quotes (not at all, or as shlex would), sometimes a quote left open or closed too soon.
QUOTES = st.sampled_from(
    [lambda v: v, shlex.quote, lambda v: v, shlex.quote, lambda v: '"' + v, lambda v: "'" + v + "'", lambda v: v + '"']
)


def _flags(option: Option, host: Host) -> list[str]:
    flags = list(option.spelling(host))
    if option.action is argparse.BooleanOptionalAction:
        flags += [f"--no-{f[2:]}" for f in flags if f.startswith("--")]
    return flags


def _token(option: Option, host: Host) -> st.SearchStrategy[str]:
    """One option as typed: the flag alone, or with a value spelled apart, after ``=`` or joined to a short flag."""
    examples = st.sampled_from(option.examples or ("",))
    values = st.one_of(examples, examples, JUNK, st.text(max_size=8))

    def spell(parts: tuple[str, str | None, Any, str]) -> str:
        flag, value, quote, form = parts
        if value is None:
            return flag
        quoted = quote(value)
        if form == "=" and flag.startswith("--"):
            return f"{flag}={quoted}"
        if form == "joined" and not flag.startswith("--"):
            return flag + quoted
        return f"{flag} {quoted}"

    form = st.sampled_from([" ", "=", "joined"])
    return st.tuples(st.sampled_from(_flags(option, host)), st.none() | values, QUOTES, form).map(spell)


def _lines(host: Host) -> st.SearchStrategy[str]:
    table = (*LOAD_OPTIONS, *BENCH_OPTIONS) if host == "cli" else BENCH_OPTIONS
    tokens = st.one_of(*(_token(option, host) for option in table if host in option.hosts), JUNK)
    return st.lists(tokens, max_size=6).map(" ".join)


def _one_line(message: str) -> None:
    """One message: a line, or a line wrapped onto indented ones to fit the terminal; never a traceback."""
    assert len(said(message).splitlines()) == 1 and message.strip() and "Traceback" not in message, repr(message)


@PARSE
@given(line=_lines("magic"))
def test_the_magic_parses_any_line_or_refuses_it_in_one_line(line: str) -> None:
    try:
        args = parse_line(KVMagics.kvbench, line)
    except UsageError as error:
        _one_line(str(error))
        return
    try:
        check_name(args.var)
        bench_spec(args, defaults())
    except KVMagicError as error:
        _one_line(str(_usage_error(error)))


def _command(argv: list[str]) -> None:
    """Parse ``argv`` as the command does, up to the request: parsed, or exit 2 with one error line."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser().parse_args(prompt_apart(argv, word_optional("cli"), one_word=True))
    except SystemExit as exit_:
        assert exit_.code == 2, (argv, exit_.code, err.getvalue())
        assert err.getvalue().startswith("kvbench: error: ") and len(said(err.getvalue()).splitlines()) == 1, (
            err.getvalue()
        )
        return
    try:
        fail_on(args)
        bench_spec(args, defaults())
    except KVMagicError as error:
        _one_line(error_line(error))


@PARSE
@given(line=_lines("cli"))
def test_the_command_parses_any_line_or_exits_2_in_one_line(line: str) -> None:
    try:
        argv = shlex.split(line)
    except ValueError:  # a quote left open: the shell refuses it before kvbench runs
        return
    _command(argv)


@PARSE
@given(argv=st.lists(st.one_of(*(_token(o, "cli") for o in (*LOAD_OPTIONS, *BENCH_OPTIONS) if "cli" in o.hosts),
                               JUNK, st.text(max_size=8)), max_size=6))  # fmt: skip
@example(argv=["--device-map cpu", "--dtype \n"])  # argparse echoed the line break: two lines
@example(argv=["--quality-text", "a\x00b"])  # a path open() refuses with a ValueError
def test_the_command_takes_any_argument_list(argv: list[str]) -> None:
    """Arguments as a program passes them (no shell): a space or a quote inside one is part of it."""
    _command(argv)


@pytest.mark.parametrize(
    ("argv", "prompt", "frontier"),
    [
        (["--frontier", "The KV cache"], "The KV cache", "predict"),
        (["--frontier", "check", "The KV cache"], "The KV cache", "check"),
        (["The KV cache", "--frontier"], "The KV cache", "predict"),
        (["--frontier", "check"], None, "check"),
        (["--frontier", "--", "check"], "check", "predict"),
    ],
)
def test_a_flag_whose_word_is_optional_leaves_the_prompt_alone(argv: list[str], prompt: str, frontier: str) -> None:
    args = parser().parse_args(prompt_apart(argv, word_optional("cli"), one_word=True))
    assert (args.prompt, args.frontier) == (prompt, frontier)


def test_a_typo_of_the_optional_word_is_refused_not_measured(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(prompt_apart(["--frontier", "chek"], word_optional("cli"), one_word=True))
    assert capsys.readouterr().err == (
        "kvbench: error: argument --frontier: expected nothing or 'check', got 'chek' (see kvbench --help)\n"
    )


@pytest.mark.parametrize("flag", ["--quality-text", "--save", "--compare", "--cache", "-n"])
def test_a_value_of_two_dashes_is_refused_in_one_line(flag: str) -> None:
    """``--save=--``: Python 3.11's argparse reads ``--`` as the end of the options and leaves the option an empty
    list, which once reached the file reader as a traceback."""
    with pytest.raises(UsageError) as caught:
        parse_line(KVMagics.kvbench, f"{flag}=-- the prompt")
    assert (
        str(caught.value)
        == f"%kvbench: {flag if flag != '-n' else '--new-tokens'} needs a value, and -- is none: give it one"
    )
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        main([f"{flag}=--", "the prompt"])
    assert said(err.getvalue()).startswith(f"kvbench: error: {flag if flag != '-n' else '--new-tokens'} needs a value")
