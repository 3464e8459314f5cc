"""Statistics and the result object against hand-computed numbers."""

from __future__ import annotations

import dataclasses
import math

import pytest

from kvmagic.results.records import Mismatch, first_mismatch
from kvmagic.results.report import COLUMNS
from kvmagic.results.result import BenchmarkResult, Measurement
from kvmagic.results.shown import wrapped_notes


def measurement(seconds, mismatch=None) -> Measurement:
    runs = tuple(("uncached", "cached")[i % 2] for i in range(len(seconds)))
    return Measurement(16, 64, runs, tuple(seconds), (5, 6), "ab", mismatch)


def test_medians_and_ratio_of_medians():
    m = measurement([8.0, 5.0, 7.0, 4.0, 9.0, 6.0])
    assert m.times("uncached") == [8.0, 7.0, 9.0]
    assert (m.uncached_s, m.cached_s) == (8.0, 5.0)
    assert m.speedup == 1.6
    assert m.identical


def test_first_mismatch():
    assert first_mismatch([1, 2, 3], [[1, 2, 3], [1, 2, 3]]) is None
    assert first_mismatch([1, 2, 3], [[1, 2, 3], [1, 9, 3]]) == (1, 1)
    assert first_mismatch([1, 2, 3], [[1, 2]]) == (0, 2)


def test_result_table_and_notes():
    flip = Mismatch(run=1, position=3, expected_id=5, actual_id=6, expected_token="a", actual_token="b")
    result = BenchmarkResult("tiny", [measurement([2.0, 1.0]), measurement([3.0, 1.5], flip)])
    frame = result.to_dataframe()
    assert list(frame.columns) == list(COLUMNS)
    assert frame.speedup.tolist() == [2.0, 2.0]
    assert frame.identical.tolist() == [True, False]
    assert not result.identical
    assert result.notes() == [
        (
            "16+64 tokens: generated tokens differ from position 3: 'a' (id 5, first uncached run) "
            "vs 'b' (id 6, cached run)"
        )
    ]
    assert "differ from position 3" in result._repr_html_()
    assert str(result).endswith("\n" + "\n".join(wrapped_notes(result.notes())))
    with pytest.raises(AttributeError, match=r"has 2; use \.measurements"):
        _ = result.speedup


def test_single_measurement_reads_through():
    result = BenchmarkResult("tiny", [measurement([3.0, 1.0])])
    assert result.speedup == 3.0 and result.new_tokens == 64
    assert repr(result) == "<BenchmarkResult tiny: 16+64 tokens: 3.00x; identical=True>"
    with pytest.raises(AttributeError):
        _ = result.no_such_field


def test_a_hooked_run_fills_what_the_timed_runs_left_empty() -> None:
    from kvmagic.results import report
    from kvmagic.results.records import StepProfile

    profile = StepProfile(step_s=(0.5, 0.1), margins=(), generated_ids=(), peak_bytes=2**21, kv_bytes=2**20)
    m = Measurement(8, 2, ("uncached", "cached"), (2.0, 1.0), (1, 2), "ab", profiles={"cached": profile})
    summary = report.condition_summary(m, "cached")
    assert (summary["ttft_s"], summary["kv_cache_mib"], summary["peak_mib"]) == (0.5, 1.0, 2.0)
    timed = Measurement(8, 2, ("uncached", "cached"), (2.0, 1.0), (1, 2), "ab", profiles={"cached": profile},
                        ttft_s={"cached": 0.25}, kv_bytes={"cached": 2**19}, peak_bytes={"cached": 2**22})  # fmt: skip
    summary = report.condition_summary(timed, "cached")
    assert (summary["ttft_s"], summary["kv_cache_mib"], summary["peak_mib"]) == (0.25, 0.5, 4.0)


def test_decode_speed_is_the_tokens_after_the_first_over_the_time_after_it() -> None:
    m = Measurement(8, 5, ("uncached", "cached") * 3, (2.0, 1.0, 2.2, 0.9, 2.1, 1.1), (1,), "a",
                    ttft_s={"uncached": 0.5, "cached": 0.2})  # fmt: skip
    assert m.decode_tok_s("uncached") == pytest.approx(4 / (2.1 - 0.5))
    assert m.decode_tok_s("cached") == pytest.approx(4 / (1.0 - 0.2))
    assert math.isnan(dataclasses.replace(m, ttft_s={"cached": 1.5}).decode_tok_s("cached"))  # noise ate the decoding
    assert math.isnan(dataclasses.replace(m, new_tokens=1).decode_tok_s("cached"))  # nothing after the first
