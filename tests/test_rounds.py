"""What the rounds record beside the headline times, and how a result shows it: per-step timings, memory, the
time to first token, spread, mismatches, where the numbers come from."""

from __future__ import annotations

import hashlib
import math

import pytest
import torch
import transformers

import kvmagic
from kvmagic import run_benchmark
from kvmagic.core.stop import FixedRounds
from kvmagic.results.caution import caution_notes
from kvmagic.results.measurement import Measurement
from kvmagic.results.records import Mismatch, first_mismatch
from kvmagic.results.report import COLUMNS
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.rows import short_mismatch
from kvmagic.results.shown import wide_text
from kvmagic.runner.prompt import encode_prompt
from kvmagic.runner.rounds import measure_rounds

from .conftest import PROMPT
from .forcing import FlipCachedStep
from .records import pair


def _measurement(uncached: list[float], cached: list[float], **fields: object) -> list[Measurement]:
    return pair((3, 2), uncached, cached, dynamic=fields)


def test_every_figure_comes_from_the_runs_made_anyway(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=5, warmup_tokens=1)
    off, cached = result.measurements
    assert off.profile is None and cached.profile is None and result.steps().empty  # no hooked runs by default
    assert result.facts.kv_sizes is not None
    predicted = result.facts.kv_sizes.after(*result.configs[0])
    assert (off.kv_bytes, cached.kv_bytes) == (0, predicted)  # counted from the timed runs' caches
    assert off.ttft_s > 0 and cached.ttft_s > 0
    assert off.peak_source == cached.peak_source == "process peak RSS" and off.peak_bytes > 0 and cached.peak_bytes > 0
    row = result.to_dataframe().iloc[0]
    assert list(row.index) == list(COLUMNS)
    assert row["cached_ttft_s"] == cached.ttft_s
    # A load spike can make the one-token run as slow as the whole run: then there is no decode time to divide by.
    decoding = cached.seconds[0] - cached.ttft_s
    assert row["cached_tok_s"] == pytest.approx(4 / decoding if decoding > 0 else math.nan, nan_ok=True)
    assert row["kv_cache_mib"] == row["kv_predicted_mib"] == predicted / 2**20
    assert row["cached_peak_mib"] == cached.peak_bytes / 2**20
    assert math.isnan(row["uncached_iqr_s"]) and math.isnan(row["speedup_ci_low"])  # one pair: no spread


def test_steps_time_every_token_of_each_condition(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=5, warmup_tokens=1, steps=True)
    off, cached = result.measurements
    for m in (off, cached):
        profile = m.profile
        assert len(profile.step_s) == 5 and len(profile.margins) == 5
        assert all(s > 0 for s in profile.step_s) and all(g >= 0 for g in profile.margins)
        assert profile.generated_ids == off.generated_ids  # the hooked run took the same path
        assert profile.ttft_s == profile.step_s[0]
        assert profile.tok_s == pytest.approx(4 / sum(profile.step_s[1:]))
        assert profile.peak_bytes > 0
    assert off.profile.kv_bytes == 0
    assert cached.profile.kv_bytes == cached.kv_bytes
    steps = result.steps()
    prompt_tokens = result.configs[0].prompt_tokens
    assert list(steps.columns) == ["uncached_s", "cached_s"]
    assert list(steps.index) == list(range(prompt_tokens, prompt_tokens + 5))


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
    timed, first_token = [(False, 2, False), (True, 2, False)] * 2, [(False, 1, False), (True, 1, False)] * 3
    assert calls == timed + first_token and [m.profile for m in plain] == [None, None]
    calls.clear()
    measure_rounds(tiny, inputs, new_tokens=2, stop=FixedRounds(2), steps=True)
    assert calls == timed + first_token + [(False, 2, True), (True, 2, True)]


def test_first_mismatch_on_constructed_sequences() -> None:
    assert first_mismatch([1, 2, 3, 4], [[1, 2, 3, 4], [1, 2, 9, 4]]) == (1, 2)
    assert first_mismatch([1, 2, 3], [[1, 2]]) == (0, 2)  # a shorter run differs where it stops
    assert first_mismatch([1, 2], [[1, 2]]) is None
    mismatch = Mismatch(
        run=0, position=2, expected_id=3, actual_id=9, expected_token="c", actual_token="x", margin=0.01
    )
    note = BenchmarkResult("m", _measurement([1.0], [0.5], mismatch=mismatch)).notes()
    assert note[:-1] == [
        (
            "3+2 tokens: generated tokens differ from position 2: 'c' (id 3) in the first uncached run vs 'x' "
            "(id 9) in the cached run; there the cached run's top two logits were 0.01 apart "
            "(a near tie: rounding in float16/bfloat16 can flip it)"
        )
    ]


def test_a_token_that_shows_as_nothing_says_what_it_is() -> None:
    """A byte of a character alone decodes to U+FFFD, and a run that stopped early has no token there."""
    mismatch = Mismatch(run=0, position=4, expected_id=245, actual_id=-1, expected_token="\ufffd")
    assert mismatch.expected == "'\ufffd' (id 245, part of a character)"
    assert mismatch.actual == "no token (its run had ended)"
    assert short_mismatch(mismatch) == "4: '\ufffd' (id 245, part of a character) vs no token (its run had ended)"


def test_a_real_run_forced_to_differ_reports_where_and_by_how_much(tiny, monkeypatch) -> None:
    honest = run_benchmark(tiny, PROMPT, new_tokens=4, warmup_tokens=0).measurements[0]
    target = 100 if honest.generated_ids[2] != 100 else 101
    monkeypatch.setattr(tiny.model, "forward", FlipCachedStep(tiny.model.forward, step=2, target=target))
    result = run_benchmark(tiny, PROMPT, new_tokens=4, warmup_tokens=0)
    mismatch = result.measurement("dynamic").mismatch
    assert not result.identical and result.measurement("off").identical
    assert (mismatch.run, mismatch.position, mismatch.expected_id, mismatch.actual_id) == (
        0, 2, honest.generated_ids[2], target,
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
    row = BenchmarkResult("m", _measurement([4.0, 2.0, 3.0], [1.0, 1.0, 1.0])).to_dataframe().iloc[0]
    assert (row["uncached_s"], row["uncached_min_s"], row["uncached_iqr_s"]) == (3.0, 2.0, 1.0)
    assert (row["cached_s"], row["cached_min_s"], row["cached_iqr_s"]) == (1.0, 1.0, 0.0)
    # Three pairs: Student's t (2 degrees of freedom, 4.303) on the logs of 4, 2 and 3.
    assert (row["speedup_ci_low"], row["speedup_ci_high"]) == pytest.approx((1.21444, 6.85118), rel=1e-5)
    assert math.isnan(row["kv_cache_mib"]) and math.isnan(row["cached_ttft_s"])  # no hooked runs


def test_large_spread_is_warned_about_once_per_condition() -> None:
    # uncached: quartiles 1.0 and 1.5 around a median of 1.0 (50%); cached: 1% of its median.
    result = BenchmarkResult("m", _measurement([1.0, 1.0, 2.0], [1.0, 1.01, 1.02]))
    notes = [note for note in result.notes() if "warning" in note]  # its interval holds 1 too: another note
    assert len(notes) == 1
    assert notes[0].startswith("warning: times vary (IQR over 10% of the median) for uncached 50%: close other work")
    # Its interval holding 1 comes first under the short table; --wide shows the warning too.
    assert str(result).endswith("(+1 note: --wide or .notes())") and "warning" in result.notes()[1]
    assert "warning" in wide_text(result.to_dataframe(), result.notes())
    two = BenchmarkResult("m", _measurement([1.0, 2.0], [1.0, 3.0]))
    assert two.notes() == caution_notes(two)  # two runs: no IQR, only the note that they give no interval


def test_metadata_says_where_the_numbers_come_from(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=1, warmup_tokens=0)
    metadata = result.metadata
    assert metadata["kvmagic"] == kvmagic.__version__
    assert metadata["torch"] == torch.__version__
    assert metadata["transformers"] == transformers.__version__
    assert metadata["device"].startswith("cpu (")
    assert metadata["dtype"] == "float32"
    assert metadata["attn_implementation"] == tiny.model.config._attn_implementation
    assert (metadata["model"], metadata["revision"]) == ("tiny", None)
    assert result.facts.prompt_sha256 == hashlib.sha256(PROMPT.encode()).hexdigest()


def test_kvbench_returns_every_column(shell) -> None:
    frame = shell.run_cell_magic("kvbench", "-n 2 -w 0 -r 3 -q -v found", PROMPT)
    assert frame is None
    found = shell.user_ns["found"]
    assert list(found.to_dataframe().columns) == list(COLUMNS)
    assert found.pair().interval[0] <= found.pair().interval[1]


def test_time_to_first_token_is_the_median_of_interleaved_one_token_runs(tiny, monkeypatch) -> None:
    """One one-token run slowed by the machine must not decide the TTFT (it once exceeded the whole run)."""
    from kvmagic.runner import rounds

    order: list[str] = []
    injected = iter([0.5, 0.01, 0.02, 9.0, 0.03, 0.04])  # off, dynamic, off, dynamic, ...: one slow run each

    def one_token(loaded, inputs, new_tokens, strategy):  # type: ignore[no-untyped-def]
        assert new_tokens == 1
        order.append(str(strategy.strategy))
        return next(injected)

    monkeypatch.setattr(rounds, "first_call", one_token)
    inputs = encode_prompt(tiny, PROMPT)
    off, cached = measure_rounds(tiny, inputs, new_tokens=3)
    assert order == ["off", "dynamic"] * rounds.TTFT_RUNS  # interleaved like the timed rounds
    assert (off.ttft_s, cached.ttft_s) == (0.03, 0.04)
