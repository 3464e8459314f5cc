"""The trade-off plot: one point per strategy whose quality was read, a curve per method over its ratios."""

from __future__ import annotations

import io

import pytest

from kvmagic.addons.plot.tradeoff import judged_config, method
from kvmagic.core.quality import Quality
from kvmagic.core.spec import BenchSpec
from kvmagic.core.strategy import parse
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.verdict import verdict_lines

from .records import timed

MIB = 2**20
CONFIG = (16, 8)


def _judged(strategy: str, seconds: float, kv_mib: float, kl: float, **fields) -> object:
    quality = Quality(8, 1.0 - kl, kl, 1.0 + kl)
    return timed(
        CONFIG, strategy, [seconds] * 3, kv_bytes=int(kv_mib * MIB), ttft_s=seconds / 4, quality=quality, **fields
    )


def _result() -> BenchmarkResult:
    names = ["off", "dynamic", "press:snapkv:0.5", "press:snapkv:0.25", "press:knorm:0.5", "quantized:fp8"]
    measurements = [
        _judged("off", 1.0, 0.0, 1e-12),
        _judged("dynamic", 0.5, 4.0, 0.0),
        _judged("press:snapkv:0.5", 0.45, 2.0, 0.02),
        _judged("press:snapkv:0.25", 0.48, 3.0, 0.005),
        _judged("press:knorm:0.5", 0.46, 2.0, 0.05),
        _judged("quantized:fp8", 0.52, 1.0, 0.001),
    ]
    return BenchmarkResult(
        model="tiny", measurements=measurements, spec=BenchSpec(cache=tuple(names)), strategies=names
    )


def _lines(axis) -> dict[str, tuple[list, list]]:
    return {
        line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
        for line in axis.get_lines()
        if not line.get_label().startswith("_")
    }


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("press:snapkv:0.5", ("press:snapkv", 0.5)),
        ("press:streaming_llm:0.25", ("press:streaming_llm", 0.25)),
        ("quantized:fp8", ("quantized:fp8", None)),
        ("dynamic", ("dynamic", None)),
    ],
)
def test_a_method_and_its_ratio_are_read_from_the_name(name: str, found: tuple) -> None:
    assert method(parse(name)) == found


def test_quality_panels_draw_a_curve_per_method_and_mark_the_full_cache() -> None:
    figure = _result().plot()
    memory, speed = figure.axes[2], figure.axes[3]  # the second row, below time and speed-up
    lines = _lines(memory)
    rings = lines.pop("trade-off frontier (pareto)")
    assert set(lines) == {"full cache (dynamic)", "press:snapkv", "press:knorm", "quantized:fp8"}  # off holds none
    # knorm:0.5 (0.46 s, 2 MiB, KL 0.05) is beaten by snapkv:0.5 (0.45 s, 2 MiB, KL 0.02); every other caching
    # point is best at something: dynamic at KL, snapkv:0.5 at speed, fp8 at bytes, snapkv:0.25 at KL among the
    # faster; off is on the frontier too, but holds no cache to draw
    assert sorted(zip(*rings)) == [(1.0, 0.001), (2.0, 0.02), (3.0, 0.005), (4.0, 0.0)]
    assert lines["press:snapkv"] == ([2.0, 3.0], [0.02, 0.005])  # sorted by the bytes held
    assert lines["full cache (dynamic)"] == ([4.0], [0.0])
    assert memory.get_yscale() == "symlog" and memory.get_xlabel() == "KV cache (MiB)"
    # decode tok/s: 7 tokens after the first over (median - ttft) = 0.75 of the run
    assert _lines(speed)["press:snapkv"][0] == pytest.approx(sorted([7 / (0.45 * 0.75), 7 / (0.48 * 0.75)]))
    assert sorted(text.get_text() for text in memory.texts) == ["0.25", "0.5", "0.5"]  # each ratio annotated
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    assert buffer.getvalue().startswith(b"\x89PNG")


def test_without_quality_the_plot_keeps_its_one_row() -> None:
    result = _result()
    result.measurements = [timed(CONFIG, m.strategy, m.seconds) for m in result.measurements]
    assert judged_config(result) is None and len(result.plot().axes) == 2


def test_a_real_comparison_plots_its_trade_off(tiny) -> None:
    from kvmagic import run_benchmark

    from .test_quality import LOSSY

    result = run_benchmark(tiny, "The KV cache", new_tokens=3, warmup_tokens=0, cache=f"dynamic,static,{LOSSY}")
    lines = _lines(result.plot().axes[2])
    assert set(lines) - {"trade-off frontier (pareto)"} == {"full cache (dynamic)", "static", LOSSY}
    table = result.to_dataframe()
    assert set(table["pareto"]) <= {True, False} and table["pareto"].iloc[0]  # off holds nothing: never beaten
    assert result.notes()[: len(verdict_lines(result))] == verdict_lines(result)  # the verdict leads the notes
    kl = {str(m.strategy): m.quality.kl_nats for m in result.measurements if m.quality}
    assert lines[LOSSY][1] == [kl[LOSSY]]
