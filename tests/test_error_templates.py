"""Below the front ends an error names an option only as a ``{field}`` that each front end spells its own way.

The walk (tests/error_walk.py) reads the package's source, not a list, so a new raise is covered unedited: it
fails on a message that spells a flag, names a magic or a ``%config`` trait, whose fields and parameters
differ, whose parameter no option declares, or that it cannot read. Real refusals through the API then show
that each front end turns the parameters into its own flags.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kvmagic import KVMagicError, load_model, run_benchmark

from .conftest import PROMPT, said
from .error_walk import below_the_front_ends, front_end_flags, front_end_words, sites


def _api_name(param: str) -> str:
    from kvmagic.errors import _API_NAMES

    return _API_NAMES.get(param, param)


def _options() -> dict[str, Any]:
    from kvmagic.frontends.options import BENCH_OPTIONS, LOAD_OPTIONS

    return {option.dest: option for option in (*LOAD_OPTIONS, *BENCH_OPTIONS)}


# The walk over the package.


def test_the_walk_reads_every_refusal_below_the_front_ends() -> None:
    found, unreadable = sites(below_the_front_ends())
    assert unreadable == []
    modules = {site.where.rpartition(".")[0] for site in found}
    assert len(found) >= 60 and {"kvmagic.model", "kvmagic.core", "kvmagic.results", "kvmagic.runner"} <= modules
    forwarded = [s for s in found if s.via == "with_memory_advice"]  # read through the function
    assert len(forwarded) == 3 and all("memory" in s.text and s.params for s in forwarded)


def test_no_refusal_below_the_front_ends_speaks_a_front_end() -> None:
    flags = front_end_flags()
    assert {"-n", "-m", "--new-tokens", "--device-map", "--fail-on"} <= flags
    spoken = {s.where: words for s in sites(below_the_front_ends())[0] if (words := front_end_words(s.text, flags))}
    assert spoken == {}


def test_every_field_is_a_parameter_and_every_parameter_a_field() -> None:
    differ = {s.where: (sorted(s.fields), sorted(s.params)) for s in sites(below_the_front_ends())[0]}
    assert {where: pair for where, pair in differ.items() if pair[0] != pair[1]} == {}


def test_every_named_parameter_is_an_option_a_front_end_spells() -> None:
    """A parameter no option declares would reach the magic and the command as its bare name."""
    named = {p for s in sites(below_the_front_ends())[0] for p in s.params if f"{{{p}}}" in s.text}
    assert "device_map" in named and sorted(named - set(_options())) == []


SYNTHETIC = """
from kvmagic.errors import KVMagicError
HINT = "`%kvload tiny` works offline"

def forward(run, advice, *params):
    raise KVMagicError(advice, *params)

def refusals(name, value):
    raise KVMagicError(f"{value!r}: check --new-tokens")
    raise KVMagicError("lower -n or shorten the prompt")
    raise KVMagicError(f"cannot download: {HINT}")
    raise KVMagicError("set KVMagics.threads")
    raise KVMagicError("lower {new_tokens}")
    raise KVMagicError("lower it", "new_tokens")
    raise KVMagicError(f"{{{name}}} must be a whole number, got {value!r} in -n-1", name)
    advice = "out of memory: lower {dtype}" + " or use --device-map auto"
    forward(None, advice, "dtype")
    raise KVMagicError(message())
"""


def test_the_walk_refuses_what_it_should_and_nothing_else() -> None:
    """The checks can fail: planted mistakes are each found, through a constant, a sum and a forwarder."""
    found, unreadable = sites({"synthetic": SYNTHETIC})
    assert [s.via for s in found].count("forward") == 1
    assert [line.partition(": ")[2] for line in unreadable] == ["message()"]
    flags = {"-n", "-m", "--new-tokens"}
    spoken = sorted(word for s in found for word in front_end_words(s.text, flags))
    assert spoken == sorted(["--new-tokens", "-n", "%kvload", "KVMagics.", "--device-map"])
    assert sorted(s.text for s in found if s.fields != s.params) == ["lower it", "lower {new_tokens}"]
    (named,) = [s for s in found if "whole number" in s.text]
    assert named.fields == named.params == {"name"} and front_end_words(named.text, flags) == []


# Real refusals through the API, and what each front end makes of them.


def _refused(call: Any) -> KVMagicError:
    with pytest.raises(KVMagicError) as caught:
        call()
    return caught.value


def _spelled_by_each(error: KVMagicError, params: tuple[str, ...]) -> None:
    """The API's message has no front-end word and names each parameter; the magic's and the command's
    name each option as their flag."""
    from kvmagic.frontends.cli import error_line
    from kvmagic.frontends.magics import _usage_error
    from kvmagic.frontends.options import flag

    assert sorted(error.params) == sorted(params)
    assert front_end_words(str(error), front_end_flags()) == []
    assert all(_api_name(p) in str(error) for p in params)
    shown = {"magic": said(_usage_error(error)), "cli": said(error_line(error))}
    for host, message in shown.items():
        assert not re.search(r"\{\w+\}", message), message
        for param in params:
            if host in _options()[param].hosts:
                assert flag(param, host) in message, (host, message)


def _unreadable_baseline(tmp_path: Path) -> Any:
    from kvmagic.results.result import BenchmarkResult

    (tmp_path / "other.json").write_text('{"rows": []}')
    return BenchmarkResult.read_json(tmp_path / "other.json")


REFUSALS = {
    "new_tokens": (lambda tiny, tmp: run_benchmark(tiny, PROMPT, new_tokens=0), ("new_tokens",)),
    "strategy": (lambda tiny, tmp: run_benchmark(tiny, PROMPT, cache="off,bogus"), ()),
    "kv_bits alone": (lambda tiny, tmp: run_benchmark(tiny, PROMPT, kv_bits=4), ("kv_bits", "cache")),
    "kv_bits width": (
        lambda tiny, tmp: run_benchmark(tiny, PROMPT, cache="off,quantized:quanto", kv_bits=3),
        ("kv_bits",),
    ),
    "no such directory": (lambda tiny, tmp: load_model(str(tmp / "no-such-model")), ()),
    "directory without config": (lambda tiny, tmp: load_model(str(tmp)), ()),
    "device_map": (lambda tiny, tmp: load_model("tiny", device_map="disk"), ("device_map",)),
    "attn_implementation": (
        lambda tiny, tmp: load_model("tiny", attn_implementation="sdpaa"),
        ("attn_implementation",),
    ),
    "gguf_file": (lambda tiny, tmp: load_model(str(tmp), gguf_file="nope.gguf"), ("gguf_file",)),
    "fail_on": (lambda tiny, tmp: _parse_fail_on("bogus"), ("fail_on",)),
    "save": (lambda tiny, tmp: _unreadable_baseline(tmp), ("save",)),
}


def _parse_fail_on(text: str) -> Any:
    from kvmagic.addons.baseline.gate import parse_fail_on

    return parse_fail_on(text)


@pytest.mark.parametrize("case", REFUSALS)
def test_a_refusal_names_parameters_and_the_front_ends_name_flags(tiny, tmp_path, case) -> None:
    call, params = REFUSALS[case]
    _spelled_by_each(_refused(lambda: call(tiny, tmp_path)), params)


def test_a_budget_refusal_too(tiny) -> None:
    error = _refused(lambda: run_benchmark(tiny, PROMPT, new_tokens=1500, max_seconds=1e-6))
    _spelled_by_each(error, ("max_seconds", "new_tokens", "prompt_tokens", "repeat"))
