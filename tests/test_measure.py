"""What the measurement adds beyond the headline times: per-step timings, memory, spread, mismatches."""

from __future__ import annotations

import hashlib
import math

import pytest
import torch
import transformers

import kvmagic
from kvmagic import run_benchmark
from kvmagic.core.stop import FixedRounds
from kvmagic.results import report
from kvmagic.results.records import Mismatch, first_mismatch
from kvmagic.results.report import COLUMNS
from kvmagic.results.result import BenchmarkResult, Measurement
from kvmagic.runner.prompt import encode_prompt
from kvmagic.runner.rounds import measure_rounds

from .conftest import PROMPT
from .forcing import FlipCachedStep


def _measurement(uncached: list[float], cached: list[float], **fields: object) -> Measurement:
    runs, seconds = [], []
    for u, c in zip(uncached, cached):
        runs += ["uncached", "cached"]
        seconds += [u, c]
    return Measurement(
        prompt_tokens=3, new_tokens=2, runs=tuple(runs), seconds=tuple(seconds),
        generated_ids=(5, 6), generated_text="ab", **fields,
    )  # fmt: skip


def test_every_figure_comes_from_the_runs_made_anyway(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=5, warmup_tokens=1)
    m = result.measurements[0]
    assert m.profiles == {} and m.steps().empty  # no hooked runs by default
    assert m.kv_bytes == {"uncached": 0, "cached": m.kv_predicted_bytes}  # counted from the timed runs' caches
    assert set(m.ttft_s) == {"uncached", "cached"} and all(s > 0 for s in m.ttft_s.values())
    assert m.peak_source == "process peak RSS" and all(b > 0 for b in m.peak_bytes.values())
    row = result.to_dataframe().iloc[0]
    assert list(row.index) == list(COLUMNS)
    assert row["cached_ttft_s"] == m.ttft_s["cached"]
    # A load spike can make the one-token run as slow as the whole run: then there is no decode time to divide by.
    decoding = m.times("cached")[0] - m.ttft_s["cached"]
    assert row["cached_tok_s"] == pytest.approx(4 / decoding if decoding > 0 else math.nan, nan_ok=True)
    assert row["kv_cache_mib"] == row["kv_predicted_mib"] == m.kv_predicted_bytes / 2**20
    assert row["cached_peak_mib"] == m.peak_bytes["cached"] / 2**20
    assert math.isnan(row["uncached_iqr_s"]) and math.isnan(row["speedup_ci_low"])  # one pair: no spread


def test_steps_time_every_token_of_each_condition(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=5, warmup_tokens=1, steps=True)
    m = result.measurements[0]
    for name in ("uncached", "cached"):
        profile = m.profiles[name]
        assert len(profile.step_s) == 5 and len(profile.margins) == 5
        assert all(s > 0 for s in profile.step_s) and all(g >= 0 for g in profile.margins)
        assert profile.generated_ids == m.generated_ids  # the hooked run took the same path
        assert profile.ttft_s == profile.step_s[0]
        assert profile.tok_s == pytest.approx(4 / sum(profile.step_s[1:]))
        assert profile.peak_bytes > 0
    assert m.profiles["uncached"].kv_bytes == 0
    assert m.profiles["cached"].kv_bytes == m.kv_predicted_bytes
    steps = m.steps()
    assert list(steps.columns) == ["uncached_s", "cached_s"]
    assert list(steps.index) == list(range(m.prompt_tokens, m.prompt_tokens + 5))


def test_headline_runs_carry_no_hooks_and_hooked_runs_follow_only_with_steps(tiny, monkeypatch) -> None:
    calls: list[tuple[bool, int, bool]] = []
    generate = tiny.model.generate

    def recording_generate(*args, **kwargs):
        config = kwargs["generation_config"]
        calls.append((config.use_cache, config.max_new_tokens, "stopping_criteria" in kwargs))
        return generate(*args, **kwargs)

    monkeypatch.setattr(tiny.model, "generate", recording_generate)
    inputs = encode_prompt(tiny, PROMPT)
    plain = measure_rounds(tiny, inputs, new_tokens=2, stop=FixedRounds(2))
    timed, first_token = [(False, 2, False), (True, 2, False)] * 2, [(False, 1, False), (True, 1, False)]
    assert calls == timed + first_token and plain.profiles == {}
    calls.clear()
    measure_rounds(tiny, inputs, new_tokens=2, stop=FixedRounds(2), steps=True)
    assert calls == timed + first_token + [(False, 2, True), (True, 2, True)]


def test_first_mismatch_on_constructed_sequences() -> None:
    assert first_mismatch([1, 2, 3, 4], [[1, 2, 3, 4], [1, 2, 9, 4]]) == (1, 2)
    assert first_mismatch([1, 2, 3], [[1, 2]]) == (0, 2)  # a shorter run differs where it stops
    assert first_mismatch([1, 2], [[1, 2]]) is None
    mismatch = Mismatch(
        run=1, position=2, expected_id=3, actual_id=9, expected_token="c", actual_token="x", margin=0.01
    )
    note = BenchmarkResult("m", [_measurement([1.0], [0.5], mismatch=mismatch)]).notes()
    assert note == [
        (
            "3+2 tokens: generated tokens differ from position 2: 'c' (id 3, first uncached run) vs 'x' "
            "(id 9, cached run); there the cached run's top two logits were 0.01 apart "
            "(a near tie: rounding in float16/bfloat16 can flip it)"
        )
    ]


def test_a_real_run_forced_to_differ_reports_where_and_by_how_much(tiny, monkeypatch) -> None:
    honest = run_benchmark(tiny, PROMPT, new_tokens=4, warmup_tokens=0).measurements[0]
    target = 100 if honest.generated_ids[2] != 100 else 101
    monkeypatch.setattr(tiny.model, "forward", FlipCachedStep(tiny.model.forward, step=2, target=target))
    result = run_benchmark(tiny, PROMPT, new_tokens=4, warmup_tokens=0)
    mismatch = result.measurements[0].mismatch
    assert not result.identical
    assert (mismatch.run, mismatch.position, mismatch.expected_id, mismatch.actual_id) == (
        1, 2, honest.generated_ids[2], target,
    )  # fmt: skip
    assert mismatch.expected_token == tiny.tokenizer.decode([honest.generated_ids[2]])
    assert mismatch.actual_token == tiny.tokenizer.decode([target])
    assert mismatch.margin == pytest.approx(1.0, abs=1e-5)
    assert result.notes()[0].endswith("there the cached run's top two logits were 1 apart")


def test_the_magic_shows_the_mismatch(shell, tiny, monkeypatch) -> None:
    monkeypatch.setattr(tiny.model, "forward", FlipCachedStep(tiny.model.forward, step=1, target=100))
    frame = shell.run_cell_magic("kvbench", "-n 3 -w 0", PROMPT)
    assert not frame["identical"].iloc[0]
    assert "differ from position 1" in repr(frame)


def test_spread_columns_against_hand_computed_numbers() -> None:
    m = _measurement([4.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    row = report.row(m)
    assert (row["uncached_s"], row["uncached_min_s"], row["uncached_iqr_s"]) == (3.0, 2.0, 1.0)
    assert (row["cached_s"], row["cached_min_s"], row["cached_iqr_s"]) == (1.0, 1.0, 0.0)
    # Three pairs: Student's t (2 degrees of freedom, 4.303) on the logs of 4, 2 and 3.
    assert (row["speedup_ci_low"], row["speedup_ci_high"]) == pytest.approx((1.21444, 6.85118), rel=1e-5)
    assert math.isnan(row["kv_cache_mib"]) and math.isnan(row["cached_ttft_s"])  # no hooked runs


def test_large_spread_is_warned_about_once_per_condition() -> None:
    # uncached: quartiles 1.0 and 1.5 around a median of 1.0 (50%); cached: 1% of its median.
    result = BenchmarkResult("m", [_measurement([1.0, 1.0, 2.0], [1.0, 1.01, 1.02])])
    notes = result.notes()
    assert len(notes) == 1
    assert notes[0].startswith("3+2 tokens: warning: uncached times vary (IQR is 50% of the median, over 10%)")
    assert "warning" in str(result)
    assert BenchmarkResult("m", [_measurement([1.0, 2.0], [1.0, 3.0])]).notes() == []  # two runs: no IQR


def test_metadata_says_where_the_numbers_come_from(tiny) -> None:
    metadata = run_benchmark(tiny, PROMPT, new_tokens=1, warmup_tokens=0).metadata
    assert metadata["kvmagic"] == kvmagic.__version__
    assert metadata["torch"] == torch.__version__
    assert metadata["transformers"] == transformers.__version__
    assert metadata["device"].startswith("cpu (")
    assert metadata["dtype"] == "float32"
    assert metadata["attn_implementation"] == tiny.model.config._attn_implementation
    assert (metadata["model"], metadata["revision"]) == ("tiny", None)
    assert metadata["prompt_sha256"] == hashlib.sha256(PROMPT.encode()).hexdigest()


def test_kvbench_returns_every_column(shell) -> None:
    frame = shell.run_cell_magic("kvbench", "-n 2 -w 0 -r 3 -q -v found", PROMPT)
    assert frame is None
    found = shell.user_ns["found"]
    assert list(found.to_dataframe().columns) == list(COLUMNS)
    assert found.speedup_ci[0] <= found.speedup_ci[1]
