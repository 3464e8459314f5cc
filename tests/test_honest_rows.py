"""Every row honest: each strategy's speed-up with its interval and notes, as the plain run's; every drawn speed-up
with its error bar; float noise read as none; quality within its steps' noise said to be."""

from __future__ import annotations

import pytest
from matplotlib.container import ErrorbarContainer

from kvmagic.core.quality import Quality
from kvmagic.core.sequential import auto_interval
from kvmagic.core.spec import BenchSpec
from kvmagic.core.strategy import parse_list
from kvmagic.results.measurement import Pair
from kvmagic.results.records import Mismatch
from kvmagic.results.report import rows
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.shown import INTERVAL_HEADER, WIDTH, shown_table

from .conftest import PROMPT
from .records import rounds, timed

CONFIG = (8, 4)
OFF = [1.0, 1.1, 0.9]
# Per round, off's seconds over each strategy's: dynamic 2, 2.2, 1.8; static 0.8, 1.1, 1.125 (holds 1);
# quantized 0.5 in every round (slower: its interval is [0.5, 0.5]).
SECONDS = {"dynamic": [0.5, 0.5, 0.5], "static": [1.25, 1.0, 0.8], "quantized:quanto": [2.0, 2.2, 1.8]}
NAMES = ["off", *SECONDS]


def _comparison(configs: tuple[tuple[int, int], ...] = (CONFIG,), **fields: object) -> BenchmarkResult:
    rows = [timed(c, name, OFF if name == "off" else SECONDS[name], **fields) for c in configs for name in NAMES]
    return BenchmarkResult("m", rows, spec=BenchSpec(cache=tuple(NAMES), repeat=3), strategies=NAMES)


def test_each_strategy_row_has_the_interval_the_plain_runs_row_would() -> None:
    frame = _comparison().to_dataframe().set_index("strategy")
    plain = BenchmarkResult("m", rounds(CONFIG, list(zip(OFF, SECONDS["dynamic"])))).to_dataframe().iloc[0]
    ends = ["speedup", "speedup_ci_low", "speedup_ci_high"]
    assert frame.loc["dynamic", ends].tolist() == plain[ends].tolist()
    assert frame.loc["quantized:quanto", ends].tolist() == pytest.approx([0.5, 0.5, 0.5])
    assert frame.loc["off", "speedup"] == 1.0 and frame.loc["off", ends[1:]].isna().all()  # the reference itself
    low, high = frame.loc["static", ends[1:]]
    assert low < 1 < high


def test_after_auto_rounds_a_strategy_row_has_the_anytime_interval() -> None:
    off, other = [1.0 + 0.01 * i for i in range(12)], [0.5 + 0.003 * (i % 5) for i in range(12)]
    reference, m = timed(CONFIG, "off", off), timed(CONFIG, "dynamic", other)
    plain = BenchmarkResult("m", [reference, m], spec=BenchSpec(repeat="auto"))  # a comparison cannot be -r auto
    row = next(r for r in rows(plain) if r["strategy"] == "dynamic")
    assert (row["speedup_ci_low"], row["speedup_ci_high"]) == auto_interval(off, other)
    assert (row["speedup_ci_low"], row["speedup_ci_high"]) != Pair(reference, m).interval  # the fixed-rounds one


def test_every_strategy_row_shows_its_interval_and_the_notes_the_plain_row_gets() -> None:
    result = _comparison()
    lines = str(result).splitlines()
    assert INTERVAL_HEADER in lines[0]
    cells = {line.split()[2]: line for line in lines[1:4]}
    assert "[" not in cells["off"] and all(" [" in cells[name] for name in ("dynamic", "static"))
    assert " 0.500 [0.500, 0.500] " in lines[4]
    notes = result.notes()
    assert any(note.startswith("static: the 95% interval [") and "holds 1" in note for note in notes)
    assert "quantized:quanto: slower than off: its 95% interval [0.500, 0.500] lies below 1" in notes
    assert not any(note.startswith("dynamic:") for note in notes)


def test_a_plain_cached_run_slower_than_uncached_says_so() -> None:
    result = BenchmarkResult("m", rounds(CONFIG, [(1.0, 2.0), (1.1, 2.2), (0.9, 1.8)]))
    assert "cached: slower than uncached: its 95% interval [0.500, 0.500] lies below 1" in result.notes()


def _error_bars(axis: object) -> list[tuple[float, float]]:
    """Each error bar's low and high end, in the order drawn."""
    found = []
    for container in axis.containers:  # type: ignore[attr-defined]
        if isinstance(container, ErrorbarContainer):
            for segment in container.lines[2][0].get_segments():
                found.append((float(segment[0][1]), float(segment[1][1])))
    return found


def test_every_drawn_speedup_has_its_error_bar() -> None:
    result = _comparison()
    speedups = result.plot().axes[1]
    ends = [end for name in NAMES[1:] for end in result.pair(result.config, name).interval]  # type: ignore[union-attr]
    assert [end for bar in _error_bars(speedups) for end in bar] == pytest.approx(ends)
    assert speedups.get_ylabel() == "times faster (error bars: 95% intervals)"
    sweep = _comparison(((8, 4), (8, 16)))
    lines = sweep.plot().axes[1]
    assert len(_error_bars(lines)) == 6  # a bar per strategy at each length
    one_round = BenchmarkResult("m", rounds(CONFIG, [(1.0, 0.5)]))
    drawn = one_round.plot().axes[1]
    assert _error_bars(drawn) == [] and drawn.get_ylabel() == "times faster"  # no interval, no bar


LOSSLESS = Quality(16, 1.0, 0.0, 1.0, "greedy", (1.0, 1.0))


def test_a_trade_off_of_lossless_strategies_is_a_note_not_a_blank_row() -> None:
    result = _comparison(quality=LOSSLESS)
    assert len(result.plot().axes) == 2 and all(axis.axison for axis in result.plot().axes)
    assert [note for note in result.notes() if "so the figure draws no trade-off" in note] == [
        (
            "quality: against dynamic, teacher-forced along its greedy tokens, 16 steps; every "
            "strategy kept the full cache's predictions (kl_nats 0, top1_agreement 1), so the figure draws no trade-off"
        )
    ]


def _lossy(quality: Quality) -> BenchmarkResult:
    flip = Mismatch(run=0, position=3, expected_id=97, actual_id=98, expected_token="a", actual_token="b")
    result = _comparison(quality=LOSSLESS, kv_bytes=2**20, ttft_s=0.01, peak_bytes=3 * 2**30)
    measurements = result.measurements
    measurements[-1] = timed(CONFIG, "quantized:quanto", [0.4, 0.42, 0.39], kv_bytes=2**19, ttft_s=0.01,
                             peak_bytes=3 * 2**30, quality=quality, mismatch=flip)  # fmt: skip
    return result


def test_a_lossy_strategy_shows_its_agreement_and_its_kl_within_100_columns() -> None:
    result = _lossy(Quality(16, 0.9375, 0.003274, 1.2, "greedy", (1.1, 1.3)))
    result.strategies = list(parse_list("off,quantized:quanto"))  # two strategies: no trade-off frontier to mark
    result.measurements = [m for m in result.measurements if m.strategy in result.strategies]
    text = str(result)
    header = text.splitlines()[0].split()
    assert {"top1_agreement", "kl_nats", "[95%"} <= set(header)
    assert max(map(len, text.splitlines())) <= WIDTH
    assert text.splitlines()[2].split()[-3:] == ["0.9375", "0.003274", "[1]"]


def test_beside_the_trade_off_frontier_s_marks_the_agreement_gives_way_first() -> None:
    """Four strategies: the marks, the bytes and the KL they are drawn from do not all fit beside the interval and the
    agreement; the agreement goes (``--wide`` keeps it)."""
    text = str(_lossy(Quality(16, 0.9375, 0.003274, 1.2, "greedy", (1.1, 1.3))))
    header = text.splitlines()[0].split()
    assert {"kl_nats", "kv_cache_mib", "pareto", "[95%"} <= set(header) and "top1_agreement" not in header
    assert max(map(len, text.splitlines())) <= WIDTH
    assert text.splitlines()[4].split()[-4:] == ["0.003274", "0.5", "True", "[1]"]  # the fastest, and half the bytes


def test_a_ppl_ratio_within_the_noise_of_its_steps_says_so() -> None:
    noisy = _lossy(Quality(16, 0.9375, 0.003274, 0.97, "greedy", (0.91, 1.04))).notes()
    assert (
        "quantized:quanto: ppl_ratio 0.97 is within noise (rough 95% interval [0.91, 1.04] over its 16 steps holds "
        "1): neither better nor worse than dynamic's"
    ) in noisy
    surer = _lossy(Quality(16, 0.9375, 0.003274, 0.9, "greedy", (0.85, 0.95))).notes()
    assert any(note.startswith("quantized:quanto: ppl_ratio 0.9 (rough 95% interval [0.85, 0.95] over its 16 "
                               "steps): surer of these tokens than dynamic, not closer") for note in surer)  # fmt: skip
    clear = _lossy(Quality(16, 0.9375, 0.003274, 1.2, "greedy", (1.1, 1.3))).notes()
    assert not any("ppl_ratio" in note for note in clear)  # worse beyond noise, as the table says
    (said,) = [note for note in clear if note.startswith("quality: ")]
    assert said == "quality: against dynamic, teacher-forced along its greedy tokens, 16 steps"


def test_the_magic_shows_every_strategys_interval_and_lossless_rows_exactly(shell) -> None:
    frame = shell.run_cell_magic("kvbench", "-n 8 -w 1 -r 3 --cache off,dynamic,static -v found", PROMPT)
    result = shell.user_ns["found"]
    rows = repr(frame).splitlines()
    assert "speedup [95% CI]" in rows[0]
    assert all(" [" in line for line in rows[2:4]) and "[" not in rows[1]
    page = frame._repr_html_()
    cells = shown_table(frame)[0][INTERVAL_HEADER].tolist()
    assert "[" not in cells[0] and all(" [" in cell and cell in page for cell in cells[1:])
    for name in ("dynamic", "static"):
        low, high = result.pair(result.config, name).interval
        assert frame.set_index("strategy").loc[name, ["speedup_ci_low", "speedup_ci_high"]].tolist() == [low, high]
    quality = frame.set_index("strategy")[["top1_agreement", "kl_nats", "ppl_ratio"]]
    assert quality.to_numpy().tolist() == [[1.0, 0.0, 1.0]] * 3  # no cache, a static cache: float noise is none
    figure = result.plot()
    assert len(figure.axes) == 2 and len(_error_bars(figure.axes[1])) == 2  # nothing lost: no trade-off row
    assert sum("every strategy kept the full cache's predictions" in note for note in result.notes()) == 1


def test_models_side_by_side_draw_each_speedup_with_its_error_bar() -> None:
    from kvmagic.addons.models.models_result import ModelsResult

    first, second = _comparison(), _comparison()
    second.model = "n"
    speedups = ModelsResult([first, second]).plot().axes[1]
    ends = [end for r in (first, second) for name in NAMES[1:] for end in r.pair(r.config, name).interval]  # type: ignore[union-attr]
    assert [end for bar in _error_bars(speedups) for end in bar] == pytest.approx(ends)
    assert speedups.get_ylabel() == "times faster (error bars: 95% intervals)"
