"""Any argument line and any cell body either runs or raises a UsageError with a message; nothing else.

Examples are bounded so the file stays fast on two cores: tiny, at most 4 new tokens, at most two
repeats, cell bodies up to 200 characters (the megabyte body lives in test_loading_errors).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError

from .conftest import PROMPT
from .model_state import snapshot

FUZZ = settings(
    max_examples=40,
    deadline=None,
    database=None,
    # One shell serves every example on purpose: a session must survive a run of them.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Every code point, lone surrogates, controls, private use and unassigned ones included.
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=200)

JUNK = st.sampled_from(["", "-", "--", "'", '"', "1e3", "0x10", "nan", "-0", "٣", "２", "\x00", "\ud800", "\u202e"])  # noqa: RUF001 - digits of other scripts on purpose
HUGE = st.sampled_from(["99999999999999999999", str(2**63), "2049"])


def _flag(names: list[str], values: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(st.sampled_from(names), values).map(" ".join)


# -n may be huge (tiny's 2048 positions stop it before any generation); -r and -w stay small so
# that a valid line finishes quickly.
KVBENCH_LINES = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=40),
    st.lists(
        st.one_of(
            _flag(["-n", "--new-tokens"], st.one_of(st.integers(-2, 4).map(str), HUGE, JUNK)),
            _flag(["-w", "--warmup-tokens"], st.one_of(st.integers(-2, 2).map(str), JUNK)),
            _flag(["-r", "--repeat"], st.one_of(st.integers(-1, 2).map(str), JUNK)),
            _flag(["-v", "--var"], st.one_of(st.from_regex(r"\A[a-z]{1,6}\Z"), JUNK)),
            # Lists that repeat an entry, and counts past what the machine has: refused in one line.
            _flag(
                ["--cache"],
                st.lists(st.sampled_from(["off", "dynamic", "static", "press:knorm:0"]), min_size=1, max_size=3).map(
                    ",".join
                ),
            ),
            _flag(["--threads"], st.sampled_from(["1", "4096", "0"])),
            _flag(["-n"], st.sampled_from(["2,2", "1-2+1,2", "2,1-2+1,1-2+1"])),
            st.sampled_from(["--chat", "-o", "-q", "--quiet", "-h", "--help", "-x", "--", "extra"]),
            JUNK,
        ),
        max_size=5,
    ).map(" ".join),
)

KVLOAD_LINES = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=30),
    st.tuples(
        st.one_of(st.sampled_from(["tiny", "", ".", "/", "someone/model", "tiny/x", "-"]), JUNK),
        st.lists(
            st.one_of(
                _flag(["--dtype"], st.one_of(st.sampled_from(["auto", "float16", "float32", "int8", "fp16"]), JUNK)),
                _flag(["--device-map"], st.one_of(st.sampled_from(["auto", "cpu", "cuda:7", "meta", "mps"]), JUNK)),
                _flag(["--revision", "--gguf-file"], st.one_of(st.sampled_from(["main", "x.gguf"]), JUNK)),
                _flag(
                    ["--attn-implementation"], st.one_of(st.sampled_from(["eager", "sdpa", "flash_attention_2"]), JUNK)
                ),
                st.sampled_from(["--trust-remote-code", "-h", "--bogus"]),
            ),
            max_size=3,
        ),
    ).map(lambda parts: " ".join([parts[0], *parts[1]])),
)


@pytest.fixture
def quick(shell) -> Iterator[Any]:
    """The shell with defaults that keep a valid line cheap: 2 new tokens, no warm-up."""
    magics = shell.magics_manager.registry["KVMagics"]
    defaults = magics.new_tokens, magics.warmup_tokens
    magics.new_tokens, magics.warmup_tokens = 2, 0
    yield shell
    magics.new_tokens, magics.warmup_tokens = defaults


def _runs_or_usage_error(run: Any) -> None:
    try:
        run()
    except UsageError as error:
        assert str(error).strip(), "a UsageError without a message"


@FUZZ
@given(line=KVBENCH_LINES)
@example(line="-n 99999999999999999999")
@example(line="-n 2 -w 0 -r 1 --chat -o -v kept")
@example(line="\ud800 \x00 \u202e")
@example(line="-n 2,2 --cache dynamic,dynamic --threads 4096")
def test_any_kvbench_line(quick, tiny, line: str) -> None:
    before = snapshot(tiny.model)
    _runs_or_usage_error(lambda: quick.run_cell_magic("kvbench", line, PROMPT))
    assert snapshot(tiny.model) == before


@FUZZ
@given(body=ANY_TEXT)
@example(body="")
@example(body=" \t\r\n\x0b\x0c\u3000")
@example(body="\x00\x00\x00")
@example(body="a\ud800b")
@example(body="\udfff")
@example(body="\u202eRTL override\u202c and \u200f marks \u200e")
@example(body="\x1b[31mred\x1b[0m\x07\x7f")
@example(body="\ufeff\u200b\u2060")
def test_any_cell_body(quick, tiny, body: str) -> None:
    before = snapshot(tiny.model)
    _runs_or_usage_error(lambda: quick.run_cell_magic("kvbench", "-n 2 -w 0 -q", body))
    assert snapshot(tiny.model) == before


@settings(FUZZ, max_examples=25)
@given(line=KVLOAD_LINES)
@example(line="tiny --device-map cuda:7")
@example(line="tiny --dtype float16 --attn-implementation eager")
@example(line="\x00")
@example(line="\ud800")
def test_any_kvload_line(shell, line: str) -> None:
    _runs_or_usage_error(lambda: shell.run_line_magic("kvload", line))


BODIES = [
    "{__import__('pathlib').Path(MARKER).touch()}",
    "$(touch MARKER) and ${MARKER}",
    "!touch MARKER",
    "%time open(MARKER, 'w')",
    "import pathlib; pathlib.Path(MARKER).touch()",
    "{{MARKER}} {0} %s %(x)s",
]


@pytest.mark.parametrize("template", BODIES)
def test_the_cell_body_is_only_tokenized(shell, tmp_path: Path, template: str) -> None:
    """Through IPython's own input handling, the prompt that reaches the API is the body, byte for byte."""
    marker = tmp_path / "ran"
    body = template.replace("MARKER", repr(str(marker)))
    shell.user_ns["MARKER"] = str(marker)
    outcome = shell.run_cell(f"%%kvbench -n 2 -w 0 -q -v measured\n{body}\n")
    assert outcome.error_in_exec is None and outcome.error_before_exec is None
    result = shell.user_ns.pop("measured")
    assert result.facts.prompt_sha256 == hashlib.sha256(body.encode()).hexdigest()
    assert not marker.exists()
