"""Statistics and the result object against hand-computed numbers."""

from __future__ import annotations

import dataclasses
import math

import pytest

from kvmagic.core.config import Config
from kvmagic.core.spec import BenchSpec
from kvmagic.errors import KVMagicError
from kvmagic.results.caution import caution_notes
from kvmagic.results.measurement import Measurement, Pair
from kvmagic.results.records import Mismatch, StepProfile, first_mismatch
from kvmagic.results.report import COLUMNS
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.rows import figures
from kvmagic.results.shown import brief, noted, wide_text

from .records import rounds, timed


def measurement(seconds, mismatch=None) -> list[Measurement]:
    """The pair from interleaved times: uncached, cached, uncached, ..."""
    return rounds((16, 64), list(zip(seconds[::2], seconds[1::2])), dynamic={"mismatch": mismatch})


def test_medians_and_ratio_of_medians():
    pair = Pair(*measurement([8.0, 5.0, 7.0, 4.0, 9.0, 6.0]))
    assert pair.reference.seconds == (8.0, 7.0, 9.0)
    assert (pair.reference.median_s, pair.other.median_s) == (8.0, 5.0)
    assert pair.speedup == 1.6
    assert pair.identical


def test_first_mismatch():
    assert first_mismatch([1, 2, 3], [[1, 2, 3], [1, 2, 3]]) is None
    assert first_mismatch([1, 2, 3], [[1, 2, 3], [1, 9, 3]]) == (1, 1)
    assert first_mismatch([1, 2, 3], [[1, 2]]) == (0, 2)


def test_result_table_and_notes():
    flip = Mismatch(run=0, position=3, expected_id=5, actual_id=6, expected_token="a", actual_token="b")
    other = rounds((16, 32), [(3.0, 1.5)], dynamic={"mismatch": flip})
    result = BenchmarkResult("tiny", [*measurement([2.0, 1.0]), *other])
    frame = result.to_dataframe()
    assert list(frame.columns) == list(COLUMNS)
    assert frame.speedup.tolist() == [2.0, 2.0]
    assert frame.identical.tolist() == [True, False]
    assert not result.identical
    assert result.notes() == [
        (
            "16+32 tokens: generated tokens differ from position 3: 'a' (id 5) in the first uncached run "
            "vs 'b' (id 6) in the cached run"
        ),
        *caution_notes(result),
    ]
    assert "differ from position 3" in result._repr_html_()
    assert str(result).endswith("\n" + "\n".join(noted(brief(result.notes())[0], len(brief(result.notes())[1]))))
    with pytest.raises(KVMagicError, match=r"has 2 configurations: name one"):
        _ = result.speedup
    assert result.pair(Config(16, 32)).speedup == 2.0


def test_a_single_configuration_reads_through():
    result = BenchmarkResult("tiny", measurement([3.0, 1.0]))
    assert result.speedup == 3.0 and result.configs == [Config(16, 64)]
    assert result.measurement("off").seconds == (3.0,)
    assert repr(result) == "<BenchmarkResult tiny: 16+64 tokens: 3.00x; identical=True>"


def test_a_comparison_of_strategies_has_a_speedup_per_strategy():
    runs = [timed((8, 4), "off", [2.0]), timed((8, 4), "dynamic", [1.0]), timed((8, 4), "static", [0.5])]
    result = BenchmarkResult("tiny", runs, spec=dataclasses.replace(BenchSpec(), cache=("off", "dynamic", "static")),
                             strategies=["off", "dynamic", "static"])  # fmt: skip
    with pytest.raises(KVMagicError, match=r"a speed-up per strategy: name one of dynamic, static"):
        _ = result.speedup
    assert result.pair(strategy="static").speedup == 4.0
    assert result.to_dataframe()["speedup"].tolist() == [1.0, 2.0, 4.0]


def test_a_hooked_run_fills_what_the_timed_runs_left_empty() -> None:
    profile = StepProfile(step_s=(0.5, 0.1), margins=(), generated_ids=(), peak_bytes=2**21, kv_bytes=2**20)
    summary = figures(timed((8, 2), "dynamic", [1.0], profile=profile))
    assert (summary["ttft_s"], summary["kv_cache_mib"], summary["peak_mib"]) == (0.5, 1.0, 2.0)
    own = timed((8, 2), "dynamic", [1.0], profile=profile, ttft_s=0.25, kv_bytes=2**19, peak_bytes=2**22)
    summary = figures(own)
    assert (summary["ttft_s"], summary["kv_cache_mib"], summary["peak_mib"]) == (0.25, 0.5, 4.0)


def test_decode_speed_is_the_tokens_after_the_first_over_the_time_after_it() -> None:
    uncached = timed((8, 5), "off", [2.0, 2.2, 2.1], ttft_s=0.5)
    cached = timed((8, 5), "dynamic", [1.0, 0.9, 1.1], ttft_s=0.2)
    assert uncached.decode_tok_s == pytest.approx(4 / (2.1 - 0.5))
    assert cached.decode_tok_s == pytest.approx(4 / (1.0 - 0.2))
    assert math.isnan(dataclasses.replace(cached, ttft_s=1.5).decode_tok_s)  # noise ate the decoding
    assert math.isnan(dataclasses.replace(cached, config=Config(8, 1)).decode_tok_s)  # nothing after the first


def test_an_interval_that_holds_1_says_the_runs_cannot_tell() -> None:
    """Three pairs whose speed-ups straddle 1 (0.8, 1.0, 1.25): no verdict either way, and the note says so."""
    undecided = BenchmarkResult("m", rounds((8, 4), [(1.0, 1.25), (1.0, 1.0), (1.0, 0.8)]))
    low, high = undecided.pairs()[0].interval
    assert low < 1 < high
    note = "cached: the 95% interval [0.574, 1.74] holds 1, so these runs cannot tell whether it is faster "
    assert note + "than uncached: raise -r for more pairs" in undecided.notes()
    clear = BenchmarkResult("m", rounds((8, 4), [(1.0, 0.5), (1.1, 0.5), (0.9, 0.5)]))
    assert clear.pairs()[0].interval[0] > 1 and not any("holds 1" in note for note in clear.notes())


def test_a_speedup_outside_its_own_interval_says_why_and_which_to_read() -> None:
    """Nine pairs of ten ran 1.2x, but the machine's speed moved between them: the uncached median falls in a
    slow stretch, the cached one in a fast one, and their ratio, 1.06, is outside what every pair but one saw."""
    drifted = [(1.56, 1.3), (1.56, 1.3), (1.2, 1.0), (1.2, 2.0), (1.2, 1.0), (2.4, 2.0), (1.56, 1.3), (1.2, 1.0),
               (1.56, 1.3), (1.2, 1.0)]  # fmt: skip
    result = BenchmarkResult("m", rounds((8, 4), drifted))
    assert result.pairs()[0].interval == (1.2, 1.2)
    assert (
        "cached: the speed-up 1.06 (a ratio of median times) lies outside its 95% interval [1.20, 1.20], drawn from "
        "each pair's own ratio (median 1.20): the machine's speed changed between pairs, which a pair's own ratio "
        "cancels, so read the interval"
    ) in result.notes()
    steady = BenchmarkResult("m", rounds((8, 4), [(1.0, 0.5), (1.1, 0.5), (0.9, 0.5), (1.0, 0.45)]))
    assert not any("lies outside" in note for note in steady.notes())


def _noisy(config: tuple[int, int], names: list[str]) -> list[Measurement]:
    """Each strategy's three runs, each later one noisier: off and dynamic within 10% of their medians."""
    return [timed(config, name, [1.0, 1.0 + 0.05 * k, 1.0 + 0.2 * k]) for k, name in enumerate(names)]


def test_noisy_strategies_are_named_in_one_warning_with_their_spreads() -> None:
    names = ["off", "dynamic", "static", "quantized:fp8"]
    spec = dataclasses.replace(BenchSpec(), cache=tuple(names))
    result = BenchmarkResult("tiny", _noisy((16, 8), names), spec=spec, strategies=names)
    (warning,) = [note for note in result.notes() if "vary" in note]
    assert warning == (
        "warning: times vary (IQR over 10% of the median) for static 18%, quantized:fp8 26%: close other work or "
        "raise -r for more pairs before trusting the speed-ups"
    )
    text = wide_text(result.to_dataframe(), result.notes())  # the three lines under the short table keep the verdict
    assert text.count("vary") == 1 and max(map(len, text.splitlines())) <= 100
    assert result._repr_html_().count("times vary") == 1
    sweep = BenchmarkResult("tiny", [*_noisy((16, 8), names), *_noisy((16, 64), names)], spec=spec, strategies=names)
    (warning,) = [note for note in sweep.notes() if "vary" in note]
    assert "for static 18%, quantized:fp8 26% at 16+8 tokens; static 18%, quantized:fp8 26% at 16+64 tokens: " in (
        warning
    )


def test_under_r_auto_the_advice_names_what_takes_more_pairs() -> None:
    """-r auto counts no rounds: more pairs come from a longer cap, or a tighter target where it was reached."""
    noisy = [(1.0, 0.5), (1.2, 0.5), (1.5, 0.5), (1.0, 0.5), (1.1, 0.5)]  # uncached's spread: 18% of its median
    capped = BenchmarkResult("m", rounds((8, 4), noisy), spec=BenchSpec(repeat="auto", ci_target=0.05))
    reached = BenchmarkResult("m", rounds((8, 4), noisy), spec=BenchSpec(repeat="auto", ci_target=0.5))
    for result, advice in ((capped, "raise --auto-cap"), (reached, "lower --ci-target")):
        (warning,) = [note for note in result.notes() if "vary" in note]
        assert warning.endswith(f"for uncached 18%: close other work or {advice} for more pairs before trusting the "
                                "speed-up"), warning  # fmt: skip
        assert "-r " not in warning.replace("-r auto", "")
    straddling = [(1.0, 1.25), (1.0, 1.0), (1.0, 0.8), (1.0, 1.1), (1.0, 0.9)]
    undecided = BenchmarkResult("m", rounds((8, 4), straddling), spec=BenchSpec(repeat="auto", ci_target=0.05))
    (note,) = [note for note in undecided.notes() if "holds 1" in note]
    assert note.endswith("than uncached: raise --auto-cap for more pairs")
