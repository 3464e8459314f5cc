"""--limits through the runner: the bound of each row beside what was measured, stored and read back."""

from __future__ import annotations

import json
import math

import pytest

from kvmagic import run_benchmark
from kvmagic.results.report import added
from kvmagic.results.result import BenchmarkResult

from .conftest import PROMPT

LIMIT_COLUMNS, STRATEGY_LIMIT_COLUMNS = added("--limits").pair, added("--limits").rows


def test_limits_add_their_columns_note_and_records_only_when_asked(tiny) -> None:
    plain = run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0)
    assert not set(LIMIT_COLUMNS) & set(plain.to_dataframe().columns) and plain.limits == []
    result = run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0, batch=(1, 2), limits=True)
    frame = result.to_dataframe()
    assert list(frame.columns[-len(LIMIT_COLUMNS) :]) == list(LIMIT_COLUMNS)
    assert [(lim.new_tokens, lim.batch) for lim in result.limits] == [(3, 1), (3, 2)]
    cached, limits = result.measurement("dynamic", result.configs[0]), result.limits[0]
    assert frame["cached_of_limit"][0] == pytest.approx(limits.cached.seconds / cached.median_s)
    assert frame["limit_speedup"][0] == pytest.approx(limits.uncached.seconds / limits.cached.seconds)
    assert frame["cached_limit_tok_s"][1] == pytest.approx(2 * result.limits[1].cached.decode_tok_s)
    (note,) = [n for n in result.notes() if n.startswith("limits (cpu")]
    assert "x 2 sequences: cached decode is" in note and "with each at its limit, the speed-up would be" in note
    text = result.to_json()
    assert "NaN" not in text and json.loads(text)["hardware"]["device"] == "cpu"
    back = BenchmarkResult.from_json(text)
    assert back.hardware == result.hardware and back.limits == result.limits


def test_saved_limits_with_missing_numbers_load_as_nan(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, limits=True)
    data = result.to_dict()
    data["limits"][0]["weights_share"] = None
    data["limits"][0]["cached"]["seconds"] = None
    back = BenchmarkResult.from_dict(data)
    assert math.isnan(back.limits[0].weights_share) and math.isnan(back.limits[0].cached.seconds)
    assert BenchmarkResult.from_dict({k: v for k, v in data.items() if k not in ("hardware", "limits")}).limits == []


def test_the_magic_takes_limits(shell) -> None:
    frame = shell.run_cell_magic("kvbench", "-n 2 -w 0 --limits --wide", PROMPT)
    assert "limit_speedup" in frame.columns


def test_each_strategy_of_a_cache_comparison_gets_its_own_bound(tiny) -> None:
    """off is bound as the uncached strategy, a full-precision cache as the cached one; a quantized cache,
    which moves fewer bytes than the bound counts, has none."""
    result = run_benchmark(
        tiny, PROMPT, new_tokens=3, warmup_tokens=0, cache="off,dynamic,static,quantized:fp8", limits=True
    )
    frame = result.to_dataframe().set_index("strategy")
    assert list(frame.columns[-len(STRATEGY_LIMIT_COLUMNS) :]) == list(STRATEGY_LIMIT_COLUMNS)
    (limits,) = result.limits
    for name, bound in (("off", limits.uncached), ("dynamic", limits.cached), ("static", limits.cached)):
        assert frame.loc[name, "limit_tok_s"] == pytest.approx(bound.decode_tok_s)
        assert frame.loc[name, "of_limit"] == pytest.approx(bound.seconds / result.measurement(name).median_s)
    assert math.isnan(frame.loc["quantized:fp8", "limit_tok_s"]) and math.isnan(frame.loc["quantized:fp8", "of_limit"])
    (note,) = [n for n in result.notes() if n.startswith("limits (cpu")]
    assert (
        "runs at" not in note and "with each at its limit, the speed-up would be" in note
    )  # the rows say each one's share
    assert str(result).count("\n") >= 4  # the shown table and its notes render
    assert BenchmarkResult.from_json(result.to_json()).to_dataframe().equals(result.to_dataframe())


def test_a_cache_comparison_without_limits_has_no_limit_columns(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, cache="off,dynamic")
    assert not set(STRATEGY_LIMIT_COLUMNS) & set(result.to_dataframe().columns)
