"""Inputs that are legal but say nothing, or something absurd, are refused in one line that says the fix; the
notebook's variables and the loaded model stay as they were."""

from __future__ import annotations

import os
import re

import pytest

from kvmagic.core.spec import BenchSpec
from kvmagic.errors import KVMagicError

from .conftest import PROMPT, raises_usage, said
from .model_state import snapshot

CORES = os.cpu_count() or 1


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("-n 2,2", r"'2,2' lists 2 twice: give each length once"),
        ("-n 2 -p 8-16+8,8-16+8", r"lists 8-16\+8 twice"),
        ("-n 2 --cache dynamic,static,dynamic", r"--cache names dynamic twice: name each strategy once"),
        (f"-n 2 --threads {CORES + 1}", rf"--threads {CORES + 1} is more than the {CORES} cores here: use at most"),
    ],
)
def test_a_repeated_or_absurd_value_is_refused_in_one_line(shell, tiny, line: str, message: str) -> None:
    shell.user_ns["kept"] = 41
    before = snapshot(tiny.model)
    with raises_usage(message):
        shell.run_cell_magic("kvbench", line, PROMPT)
    assert shell.user_ns["kept"] == 41 and snapshot(tiny.model) == before


@pytest.mark.parametrize(("flag", "value"), [("--ci-target", "0.1"), ("--auto-cap", "5")])
def test_a_target_of_r_auto_without_it_is_refused_before_loading(shell, tiny, capsys, flag: str, value: str) -> None:
    from kvmagic.frontends.cli import main

    message = f"{flag} is for -r auto: add -r auto, or drop it"
    with raises_usage(f"^{message}$"):
        shell.run_cell_magic("kvbench", f"-n 2 {flag} {value}", PROMPT)
    assert main(["-m", "no/such-model", "-n", "2", flag, value, PROMPT]) == 2
    assert capsys.readouterr().err.strip() == f"kvbench: error: {message}"
    result = shell.run_cell_magic("kvbench", f"-n 2 -w 0 -r auto {flag} {value} --auto-cap 1 -o", PROMPT)
    assert result.spec.repeat == "auto"


def test_a_range_that_holds_a_listed_length_keeps_it_once() -> None:
    assert BenchSpec(new_tokens="1-4+1,2").new_tokens == (1, 2, 3, 4)


@pytest.mark.parametrize(("body", "shown"), [("\ufeff", "U+FEFF"), ("\u200b \u200d\n", "U+200B, U+200D")])
def test_a_prompt_nothing_of_which_shows_is_called_empty(shell, body: str, shown: str) -> None:
    with raises_usage(rf"the prompt is empty \(only {re.escape(shown)}\): write the text to generate from"):
        shell.run_cell_magic("kvbench", "-n 2 -w 0", body)


def test_the_command_calls_an_invisible_prompt_empty_before_loading_a_model(capsys) -> None:
    from kvmagic.frontends.cli import main

    assert main(["-m", "no/such-model", "-n", "2", "\u200b\ufeff"]) == 2
    assert "the prompt is empty: give the text to generate from" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "prompt", "message"),
    [
        (["--cache", "off,dynamc"], PROMPT, "unknown cache strategy 'dynamc': did you mean dynamic? use off, "),
        (["--cache", "off,dynamic", "--kv-bits", "3"], PROMPT, "--kv-bits is the width of a quanto or hqq cache"),
        (["--cache", "off,dynamic", "--compile"], PROMPT, "--compile compiles a static cache: add static to --cache"),
        (["--prefix", "marked"], "no line of three dashes", "--prefix marked needs a line --- between the shared"),
    ],
)
def test_what_the_request_alone_refuses_is_refused_before_a_model_loads(
    shell, capsys, options: list[str], prompt: str, message: str
) -> None:
    from kvmagic.frontends.cli import main

    assert main(["-m", "no/such-model", "-n", "2", *options, prompt]) == 2  # a load would say the Hub is unreachable
    assert said(capsys.readouterr().err).startswith(f"kvbench: error: {message}")
    with raises_usage("^" + re.escape(message)):
        shell.run_cell_magic("kvbench", f"-m no/such-model -n 2 {' '.join(options)}", prompt)


class _Raising:
    @property
    def title(self) -> str:
        raise RuntimeError("no title yet")

    def __format__(self, spec: str) -> str:
        raise ValueError("cannot be written")

    def __str__(self) -> str:
        raise LookupError("nothing to show")


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("{doc.title}", r"--expand: cannot look up \{doc.title\}: RuntimeError: no title yet"),
        ("{doc!s}", r"--expand: a value could not be written into the prompt: LookupError: nothing to show"),
    ],
)
def test_a_users_object_that_raises_under_expand_is_one_line(shell, cell: str, message: str) -> None:
    shell.user_ns["doc"] = document = _Raising()
    with raises_usage(message):
        shell.run_cell_magic("kvbench", "-n 2 -w 0 --expand", cell)
    assert shell.user_ns["doc"] is document


def test_the_same_press_written_two_ways_is_refused() -> None:
    with pytest.raises(KVMagicError, match="names press:knorm:0 twice"):
        BenchSpec(cache="press:knorm:0,press:knorm:0.0")
