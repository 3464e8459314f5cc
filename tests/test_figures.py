"""The figures read back: each panel's title, axis labels and units, every strategy's line in its own style, each
interval drawn where its speed-up is, the line at 1, the suptitle, and the PNG a notebook shows, on hand-made
measurements (no model needed)."""

from __future__ import annotations

import struct
from dataclasses import replace

import matplotlib
import pytest
from matplotlib.colors import to_rgba
from matplotlib.container import ErrorbarContainer
from matplotlib.layout_engine import ConstrainedLayoutEngine

from kvmagic.addons.models.models_result import ModelsResult
from kvmagic.core.kvbytes import KVSizes
from kvmagic.core.quality import Quality
from kvmagic.core.spec import BenchSpec
from kvmagic.errors import KVMagicError
from kvmagic.results.records import RunFacts, StepProfile
from kvmagic.results.result import BenchmarkResult

from .records import rounds, timed

MIB = 2**20
FAST = [(1.0, 0.5), (1.1, 0.5), (0.9, 0.6)]  # three rounds: every speed-up has its 95% interval
SPEEDUP_LABEL = "times faster (error bars: 95% intervals)"


def _sweep(lengths: tuple[tuple[int, int], ...] = ((16, 16), (16, 4), (16, 8)), **facts: object) -> BenchmarkResult:
    """The plain run over these lengths, given out of order: its speed-up at each is 2x the length's index + 2."""
    measurements = [m for n, c in enumerate(lengths) for m in rounds(c, [(u * (n + 2), o) for u, o in FAST])]
    return BenchmarkResult("m", measurements, facts=RunFacts(**facts))  # type: ignore[arg-type]


def _comparison(names: tuple[str, ...], config: tuple[int, ...] = (8, 4), **fields: object) -> BenchmarkResult:
    """A comparison at one configuration: off, then each strategy a little faster than the one before."""
    rows = [timed(config, name, [s / (n + 1) for s in (1.0, 1.1, 0.9)], **fields) for n, name in enumerate(names)]
    return BenchmarkResult("m", rows, spec=BenchSpec(cache=names), strategies=list(names))


def _drawn(axis) -> dict[str, dict]:
    """Each labelled line: its points, style and colour."""
    return {
        line.get_label(): {
            "xy": (list(line.get_xdata()), list(line.get_ydata())),
            "style": (line.get_marker(), line.get_linestyle()),
            "colour": to_rgba(line.get_color()),
            "width": line.get_linewidth(),
        }
        for line in axis.get_lines()
        if not line.get_label().startswith("_")
    }


def _error_bars(axis) -> list[dict]:
    """Each error bar: where it stands, its ends, its colour, and its caps' ends."""
    found = []
    for container in axis.containers:
        if isinstance(container, ErrorbarContainer):
            through, caps, (bars,) = container.lines
            assert through is None  # the bar alone: no line joins the intervals' middles
            colour = to_rgba(bars.get_colors()[0])
            for index, segment in enumerate(bars.get_segments()):
                (x, low), (x_high, high) = segment
                assert x == x_high  # upright
                ends = sorted((float(cap.get_ydata()[index]), cap.get_markersize()) for cap in caps)
                found.append({"x": float(x), "ends": (float(low), float(high)), "colour": colour, "caps": ends})
    return found


def _level_lines(axis) -> list[tuple]:
    """The horizontal lines across the whole axis (``axhline``): height, colour, style, width."""
    return [
        (list(line.get_ydata()), to_rgba(line.get_color()), line.get_linestyle(), line.get_linewidth())
        for line in axis.get_lines()
        if list(line.get_xdata()) == [0, 1] and line.get_transform() == axis.get_yaxis_transform()
    ]


def _assert_line_at_one(axis) -> None:
    """The speed-up of 1 (no faster than the reference): grey, dotted, thinner than any data line."""
    ((heights, colour, style, width),) = _level_lines(axis)
    assert heights == [1.0, 1.0] and colour == to_rgba("grey") and style == ":"
    assert all(width < line["width"] for line in _drawn(axis).values())
    assert width < matplotlib.rcParams["lines.linewidth"]


def _assert_faint_grid(axis, which: str = "both") -> None:
    """A grid to read values by, faint behind the data; ``which`` axis only, where bars stand on the other."""
    for name, gridlines in (("x", axis.xaxis.get_gridlines()), ("y", axis.yaxis.get_gridlines())):
        drawn = [line for line in gridlines if line.get_visible()]
        assert bool(drawn) == (which in ("both", name)), name
        assert all(line.get_alpha() is not None and line.get_alpha() < 1 for line in drawn)


def _flat(pairs) -> list[float]:
    return [value for pair in pairs for value in pair]


def _legend(axis) -> list[str]:
    return [text.get_text() for text in axis.get_legend().get_texts()]


def _suptitle(figure) -> str:
    return figure.texts[-1].get_text()  # matplotlib 3.7 has no get_suptitle


def test_a_sweep_draws_each_strategy_in_its_style_and_each_interval_at_its_length() -> None:
    result = _sweep()
    figure = result.plot()
    times, speedups = figure.axes
    assert (times.get_title(), times.get_xlabel(), times.get_ylabel()) == (
        "Time per generate (median)", "new tokens", "seconds",
    )  # fmt: skip
    assert (speedups.get_title(), speedups.get_xlabel(), speedups.get_ylabel()) == (
        "Speed-up over uncached", "new tokens", SPEEDUP_LABEL,
    )  # fmt: skip
    configs = sorted(result.configs, key=lambda c: c.new_tokens)
    pairs = [result.pair(c) for c in configs]
    lines, drawn = _drawn(times), _drawn(speedups)
    assert lines["uncached"]["xy"] == ([4, 8, 16], [p.reference.median_s for p in pairs])
    assert lines["cached"]["xy"] == ([4, 8, 16], [p.other.median_s for p in pairs])
    assert drawn["cached speed-up"]["xy"] == ([4, 8, 16], [p.speedup for p in pairs])
    assert lines["uncached"]["style"] != lines["cached"]["style"]  # told apart without colour
    assert drawn["cached speed-up"]["style"] == lines["cached"]["style"]  # a strategy's style in every panel
    bars = _error_bars(speedups)
    assert [bar["x"] for bar in bars] == [4, 8, 16]  # each interval at its own length
    assert _flat(bar["ends"] for bar in bars) == pytest.approx(_flat(p.interval for p in pairs))
    assert all(bar["colour"] == drawn["cached speed-up"]["colour"] for bar in bars)  # its line's colour
    for bar in bars:  # a cap at each end
        assert [end for end, _ in bar["caps"]] == pytest.approx(sorted(bar["ends"])) and min(bar["caps"])[1] > 0
    assert _legend(times) == ["uncached", "cached"] and _legend(speedups) == ["cached speed-up"]  # no interval entry
    _assert_line_at_one(speedups)
    assert _level_lines(times) == []
    for axis in (times, speedups):
        _assert_faint_grid(axis)
    assert _suptitle(figure) == "m: greedy generation, uncached vs cached"
    assert isinstance(figure.get_layout_engine(), ConstrainedLayoutEngine)  # titles and labels kept apart


def test_a_partial_sweep_says_so_in_its_title() -> None:
    assert _suptitle(_sweep(stopped="interrupted").plot()) == "m: greedy generation, uncached vs cached (partial)"


def test_prompt_lengths_are_the_x_axis_of_both_panels_when_only_they_vary() -> None:
    result = _sweep(((64, 8), (16, 8), (32, 8)))
    times, speedups = result.plot().axes
    assert times.get_xlabel() == speedups.get_xlabel() == "prompt tokens"
    assert [bar["x"] for bar in _error_bars(speedups)] == [16, 32, 64]
    assert _drawn(speedups)["cached speed-up"]["xy"][0] == [16, 32, 64]


def test_each_group_of_a_two_way_sweep_has_its_intervals_at_its_own_lengths() -> None:
    result = _sweep(((8, 16), (8, 4), (32, 4), (32, 16)))
    times, speedups = result.plot().axes
    assert sorted(_legend(speedups)) == ["cached speed-up, prompt tokens 32", "cached speed-up, prompt tokens 8"]
    assert sorted(bar["x"] for bar in _error_bars(speedups)) == [4, 4, 16, 16]
    for axis in (times, speedups):  # a strategy's colour and style at each prompt length; its markers filled or not
        lines = {line.get_label(): line for line in axis.get_lines() if not line.get_label().startswith("_")}
        for name in {label.split(",")[0] for label in lines}:
            short, long = lines[f"{name}, prompt tokens 8"], lines[f"{name}, prompt tokens 32"]
            assert _drawn(axis)[short.get_label()]["colour"] == _drawn(axis)[long.get_label()]["colour"]
            assert (short.get_marker(), short.get_linestyle()) == (long.get_marker(), long.get_linestyle())
            assert short.get_fillstyle() != long.get_fillstyle()


def _bars(axis) -> list[tuple[float, float, tuple]]:
    return [(bar.get_x() + bar.get_width() / 2, bar.get_height(), bar.get_facecolor()) for bar in axis.patches]


def test_one_configuration_is_a_bar_per_strategy_with_its_interval_over_its_own_bar() -> None:
    names = ("off", "dynamic", "static", "quantized:quanto")
    result = _comparison(names)
    times, speedups = result.plot().axes
    assert (times.get_title(), times.get_ylabel()) == ("Time per generate (median, 8+4 tokens)", "seconds")
    assert (speedups.get_title(), speedups.get_ylabel()) == ("Speed-up over off", SPEEDUP_LABEL)
    assert times.get_xlabel() == speedups.get_xlabel() == ""  # the bars are named on the ticks
    assert [t.get_text() for t in times.get_xticklabels()] == list(names)
    assert [t.get_text() for t in speedups.get_xticklabels()] == list(names[1:])
    time_bars, speedup_bars = _bars(times), _bars(speedups)
    assert [height for _, height, _ in time_bars] == [result.measurement(n).median_s for n in names]
    assert [height for _, height, _ in speedup_bars] == [result.pair(strategy=n).speedup for n in names[1:]]
    assert [colour for *_, colour in time_bars] == [to_rgba(f"C{n}") for n in range(4)]  # a colour per strategy
    assert [colour for *_, colour in speedup_bars] == [colour for *_, colour in time_bars[1:]]  # its own in both
    assert [t.get_text() for t in times.texts] == [f"{result.measurement(n).median_s:.3g} s" for n in names]
    speedup_texts = [f"{result.pair(strategy=n).speedup:.3g}x" for n in names[1:]]
    assert [t.get_text() for t in speedups.texts] == speedup_texts
    bars = _error_bars(speedups)
    assert [bar["x"] for bar in bars] == pytest.approx([x for x, _, _ in speedup_bars])  # over its own bar's middle
    assert _flat(bar["ends"] for bar in bars) == pytest.approx(
        _flat(result.pair(strategy=n).interval for n in names[1:])
    )
    assert all(bar["colour"] == to_rgba("black") and bar["caps"][0][1] > 0 for bar in bars)
    _assert_line_at_one(speedups)
    for axis, tallest in ((times, max(h for _, h, _ in time_bars)), (speedups, max(h for _, h, _ in speedup_bars))):
        _assert_faint_grid(axis, which="y")
        assert axis.get_ylim()[1] > 1.1 * tallest  # room above the tallest bar for its label
        assert [t.get_rotation() for t in axis.get_xticklabels()] == [30] * len(axis.get_xticklabels())  # 4 names
        assert {t.get_rotation() for t in axis.get_yticklabels()} == {0}


def test_a_speedup_bar_s_label_stands_clear_above_its_error_bar_and_inside_the_panel() -> None:
    """A wide interval reaches far down its bar and far above it: a label in the bar's middle, or at its top, would
    sit on the error bar's line."""
    names = ("off", "dynamic", "static")
    rows = [timed((8, 4), "off", [1.0] * 3), timed((8, 4), "dynamic", [0.3, 0.9, 0.5]),
            timed((8, 4), "static", [0.6, 0.7, 0.65])]  # fmt: skip
    result = BenchmarkResult("m", rows, spec=BenchSpec(cache=names), strategies=list(names))
    figure = result.plot()
    speedups = figure.axes[1]
    wide = result.pair(strategy="dynamic").interval
    assert (
        wide[0] < result.pair(strategy="dynamic").speedup / 2 and wide[1] > 2 * result.pair(strategy="dynamic").speedup
    )
    figure.draw_without_rendering()
    panel = speedups.get_window_extent()
    for text, bar, (x, height, _) in zip(speedups.texts, _error_bars(speedups), _bars(speedups)):
        box = text.get_window_extent()
        top = speedups.transData.transform((bar["x"], max(bar["ends"]))).tolist()[1]
        assert bar["x"] == pytest.approx(x) and height < max(bar["ends"])
        assert box.y0 > top  # above the error bar's top cap, so no line runs through it
        assert box.x0 < speedups.transData.transform((x, 0))[0] < box.x1  # centred on its own bar
        assert panel.y0 < box.y0 and box.y1 < panel.y1  # and inside the panel


def test_three_names_or_fewer_stand_upright() -> None:
    for names in (("off", "dynamic", "static"), ("off", "dynamic")):
        for axis in _comparison(names).plot().axes:
            assert {t.get_rotation() for t in axis.get_xticklabels()} == {0}


def _batched(batch: int, uncached: float, config: tuple[int, int] = (8, 4), peak: bool = True) -> list:
    off = {"kv_bytes": 0, **({"peak_bytes": batch * 2 * MIB} if peak else {})}
    dynamic = {"kv_bytes": batch * MIB, **({"peak_bytes": batch * 3 * MIB} if peak else {})}
    return rounds((*config, batch), [(u * uncached, o) for u, o in FAST], off=off, dynamic=dynamic)


def test_a_batch_sweep_draws_speedup_and_memory_against_the_batch_in_each_strategys_style() -> None:
    result = BenchmarkResult("m", [*_batched(4, 3.0), *_batched(1, 1.0)])
    figure = result.plot()
    speedups, memory = figure.axes
    assert (speedups.get_title(), speedups.get_xlabel(), speedups.get_ylabel()) == (
        "Speed-up over uncached", "batch", SPEEDUP_LABEL,
    )  # fmt: skip
    assert (memory.get_title(), memory.get_xlabel(), memory.get_ylabel()) == (
        "Memory of the whole batch",
        "batch",
        "MiB",
    )
    pairs = [result.pair(c) for c in sorted(result.configs)]
    drawn, held = _drawn(speedups), _drawn(memory)
    assert drawn["cached speed-up"]["xy"] == ([1, 4], [p.speedup for p in pairs])
    assert [bar["x"] for bar in _error_bars(speedups)] == [1, 4]
    assert _flat(bar["ends"] for bar in _error_bars(speedups)) == pytest.approx(_flat(p.interval for p in pairs))
    assert set(held) == {"cached KV cache", "uncached peak", "cached peak"}  # off holds no cache to draw
    assert held["cached KV cache"]["xy"] == ([1, 4], [1.0, 4.0])
    assert held["uncached peak"]["xy"] == ([1, 4], [2.0, 8.0]) and held["cached peak"]["xy"] == ([1, 4], [3.0, 12.0])
    assert held["cached KV cache"]["style"] == held["cached peak"]["style"] == drawn["cached speed-up"]["style"]
    assert held["uncached peak"]["style"] != held["cached peak"]["style"]
    assert held["cached KV cache"]["colour"] == held["cached peak"]["colour"] == drawn["cached speed-up"]["colour"]
    alpha = {line.get_label(): line.get_alpha() for line in memory.get_lines()}
    assert alpha["cached KV cache"] is None and alpha["cached peak"] < 1  # the peak paler than the cache it holds
    assert _legend(speedups) == ["cached speed-up"] and _legend(memory) == list(held)
    _assert_line_at_one(speedups)
    assert _level_lines(memory) == []
    for axis in (speedups, memory):
        _assert_faint_grid(axis)
    assert _suptitle(figure) == "m: greedy generation, uncached vs cached"


def test_a_batch_sweep_at_two_lengths_names_each_length_and_draws_no_unread_peak() -> None:
    measurements = [*_batched(2, 2.0, peak=False), *_batched(1, 1.0, peak=False), *_batched(1, 1.0, (16, 8), False)]
    result = BenchmarkResult("m", [*measurements, *_batched(2, 3.0, (16, 8), peak=False)])
    speedups, memory = result.plot().axes
    assert _legend(speedups) == ["cached speed-up, 8+4 tokens", "cached speed-up, 16+8 tokens"]
    assert _legend(memory) == ["cached KV cache, 8+4 tokens", "cached KV cache, 16+8 tokens"]  # no peak read: none
    assert _drawn(memory)["cached KV cache, 16+8 tokens"]["xy"] == ([1, 2], [1.0, 2.0])


def _stepped(config: tuple[int, int], steps: tuple[float, ...], *, profiled: tuple[str, ...] = ("off", "dynamic")):
    fields = {name: {"profile": StepProfile(steps, (), (), 0, 0)} for name in profiled}
    return rounds(config, FAST, off=fields.get("off"), dynamic=fields.get("dynamic"))


def test_per_step_latency_is_drawn_for_the_longest_configuration_with_every_step_timed() -> None:
    # (8, 32) holds the most tokens, a shorter prompt than (16, 4)'s; (32, 16), longer, has one run's steps only
    measurements = [*_stepped((16, 4), (0.1,) * 4), *_stepped((8, 32), (0.3,) * 32)]
    result = BenchmarkResult("m", [*measurements, *_stepped((32, 16), (0.4,) * 16, profiled=("off",))])
    figure = result.plot()
    assert len(figure.axes) == 3
    steps = figure.axes[2]
    assert (steps.get_title(), steps.get_xlabel(), steps.get_ylabel()) == (
        "Per-step latency (8+32 tokens)", "position (tokens in context)", "ms per token",
    )  # fmt: skip
    lines = _drawn(steps)
    assert list(lines) == ["uncached", "cached"]
    assert lines["cached"]["xy"] == (list(range(8, 40)), pytest.approx([300] * 32))
    _assert_faint_grid(steps)
    assert _legend(steps) == ["uncached", "cached"]
    tied = BenchmarkResult("m", [*_stepped((8, 16), (0.2,) * 16), *_stepped((16, 8), (0.3,) * 8)]).plot()
    assert tied.axes[2].get_title() == "Per-step latency (16+8 tokens)"  # as many tokens: the longer prompt


def test_each_panel_has_the_same_room_however_many_the_figure_holds() -> None:
    two = _sweep().plot()
    three = BenchmarkResult("m", [*_stepped((16, 4), (0.1,) * 4), *_stepped((16, 8), (0.1,) * 8)]).plot()
    four = _judged_sweep().plot()
    sizes = {
        tuple(figure.get_size_inches() / (columns, rows)) for figure, rows, columns in ((two, 1, 2), (three, 1, 3),
                                                                                       (four, 2, 2))
    }  # fmt: skip
    assert len(sizes) == 1
    for figure in (three, four):
        assert isinstance(figure.get_layout_engine(), ConstrainedLayoutEngine)


def test_the_notebook_png_is_a_png_at_100_dpi_whatever_the_savefig_settings() -> None:
    figure = _sweep().plot()
    with matplotlib.rc_context({"savefig.format": "svg", "savefig.dpi": 300}):
        png = figure._repr_png_()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk
    assert (width, height) == tuple(round(inches * 100) for inches in figure.get_size_inches())


# ---- the trade-off panels ----

CONFIG = (16, 8)


def _judged(strategy: str, seconds: float, kv_mib: float, kl: float, config: tuple = CONFIG) -> object:
    quality = Quality(8, 1.0 - kl, kl, 1.0 + kl)
    return timed(config, strategy, [seconds], kv_bytes=int(kv_mib * MIB), ttft_s=seconds / 4, quality=quality)


NAMES = ["off", "dynamic", "press:snapkv:0.5", "press:snapkv:0.25", "quantized:fp8"]


def _judged_sweep(short: bool = True) -> BenchmarkResult:
    """The trade-off read at two lengths: the shorter (a longer prompt) has its points all elsewhere, KL 0.5 each."""
    rows = [
        _judged("off", 1.0, 0.0, 1e-12),
        _judged("dynamic", 0.5, 4.0, 0.0),
        _judged("press:snapkv:0.5", 0.45, 2.0, 0.02),
        _judged("press:snapkv:0.25", 0.48, 3.0, 0.005),
        _judged("quantized:fp8", 0.52, 1.0, 0.001),
    ]
    shorter = [_judged(name, 0.1, 40.0, 0.5, config=(20, 2)) for name in NAMES] if short else []
    return BenchmarkResult("m", [*shorter, *rows], spec=BenchSpec(cache=tuple(NAMES)), strategies=NAMES)


def test_the_trade_off_is_drawn_for_the_longest_judged_configuration_only() -> None:
    figure = _judged_sweep().plot()
    memory, speed = figure.axes[2], figure.axes[3]
    assert memory.get_title() == "Quality against memory (16+8 tokens)"
    assert speed.get_title() == "Quality against decode speed (16+8 tokens)"
    assert (memory.get_xlabel(), speed.get_xlabel()) == ("KV cache (MiB)", "decode tok/s")
    assert memory.get_ylabel() == speed.get_ylabel() == "KL from the full cache (nats per token)"
    for axis in (memory, speed):
        lines = _drawn(axis)
        assert 0.5 not in [y for line in lines.values() for y in line["xy"][1]]  # nothing of the shorter run
        assert axis.get_yscale() == "symlog" and axis.yaxis.get_transform().linthresh == 1e-6
        _assert_faint_grid(axis)
        assert _legend(axis) == list(lines)
    assert _drawn(memory)["press:snapkv"]["xy"] == ([2.0, 3.0], [0.02, 0.005])


def test_the_trade_off_rings_its_frontier_around_each_point_and_labels_each_ratio_beside_it() -> None:
    memory = _judged_sweep(short=False).plot().axes[2]
    first, *others = [line for line in memory.get_lines() if not line.get_label().startswith("_")]
    assert first.get_label() == "trade-off frontier (pareto)"  # drawn first: each point sits inside its ring
    assert first.get_marker() == "o" and first.get_linestyle() == "None"
    assert first.get_markerfacecolor() == "none" and to_rgba(first.get_markeredgecolor()) == to_rgba("black")
    assert all(first.get_markersize() > line.get_markersize() for line in others)  # a ring around, not over
    lines = _drawn(memory)
    assert lines["full cache (dynamic)"]["style"] == ("*", "None")
    sizes = {line.get_label(): line.get_markersize() for line in others}
    star = sizes.pop("full cache (dynamic)")
    assert all(star > size for size in sizes.values())  # the full cache's star stands out of the points
    assert lines["press:snapkv"]["style"] == lines["quantized:fp8"]["style"] == ("o", "-")
    ratios = sorted(memory.texts, key=lambda text: text.xy)
    assert [(text.get_text(), text.xy) for text in ratios] == [("0.5", (2.0, 0.02)), ("0.25", (3.0, 0.005))]
    (offset,) = {text.xyann for text in ratios}  # each the same few points up and right of its own point
    assert all(text.anncoords == "offset points" for text in ratios) and all(0 < shift <= 10 for shift in offset)


def test_lossless_strategies_leave_the_figure_its_one_row_and_the_notes_say_why() -> None:
    lossless = Quality(16, 1.0, 0.0, 1.0)
    rows = [timed(CONFIG, name, [1.0 / (n + 1)], quality=lossless) for n, name in enumerate(NAMES[:3])]
    kept = BenchmarkResult("m", rows, spec=BenchSpec(cache=tuple(NAMES[:3])), strategies=NAMES[:3])
    unread = BenchmarkResult("m", [replace(m, quality=None) for m in rows], spec=kept.spec, strategies=NAMES[:3])
    figure = kept.plot()
    assert len(figure.axes) == 2 and all(axis.axison for axis in figure.axes)  # no blank row beneath
    assert figure.get_size_inches().tolist() == unread.plot().get_size_inches().tolist()
    said = [note for note in kept.notes() if "kept the full cache's predictions" in note]
    assert said == [
        (
            "quality: against dynamic, teacher-forced along its greedy tokens, 16 steps; every "
            "strategy kept the full cache's predictions (kl_nats 0, top1_agreement 1), so the figure draws no trade-off"
        )
    ]
    rows[2] = replace(rows[2], quality=Quality(16, 0.9375, 0.01, 1.02))  # one strategy lost a step: a trade-off
    lost = BenchmarkResult("m", rows, spec=kept.spec, strategies=NAMES[:3])
    assert len(lost.plot().axes) == 4 and not any("kept the full cache's" in note for note in lost.notes())


def _colours(figure, names) -> dict[str, set[tuple[int, tuple]]]:
    """Each strategy's (panel, colour) over the figure: its lines as the legend names them (its speed-up, its KV
    cache, its peak; at any length), its bars as the ticks name them, its trade-off point or its method's curve."""
    found: dict[str, set[tuple[int, tuple]]] = {name: set() for name in names}
    for index, axis in enumerate(figure.axes):
        for label, line in _drawn(axis).items():
            label = label.split(",")[0].removeprefix("full cache (").removesuffix(")")
            for suffix in (" speed-up", " KV cache", " peak"):
                label = label.removesuffix(suffix)
            for name in names:
                if name == label or name.startswith(f"{label}:"):  # press:snapkv's curve holds each of its ratios
                    found[name].add((index, line["colour"]))
        ticks = [tick.get_text() for tick in axis.get_xticklabels()]
        for name, bar in zip(ticks, axis.patches) if axis.patches else ():
            found[name].add((index, to_rgba(bar.get_facecolor())))
    return found


def _profiled(result: BenchmarkResult) -> BenchmarkResult:
    result.measurements = [replace(m, profile=StepProfile((m.median_s / 8,) * 8, (), (), 0, 0)) for m in
                           result.measurements]  # fmt: skip
    return result


def test_each_strategy_keeps_its_colour_in_every_panel() -> None:
    """The speed-up panel has no bar or line for off: a strategy's colour is its own, not its place in what a panel
    draws. The ratios of one press share the colour of their curve in the trade-off, and differ in line style."""
    figure = _profiled(_judged_sweep()).plot()
    found = _colours(figure, NAMES)
    assert (
        {name: sorted({index for index, _ in drawn}) for name, drawn in found.items()}
        == {
            "off": [0, 2],  # time, per-step; it holds no cache to trade and is the speed-ups' reference
            **{name: [0, 1, 2, 3, 4] for name in NAMES[1:]},  # time, speed-up, per-step, both trade-off panels
        }
    )
    colours = {name: {colour for _, colour in drawn} for name, drawn in found.items()}
    assert all(len(drawn) == 1 for drawn in colours.values()), colours
    assert colours["press:snapkv:0.5"] == colours["press:snapkv:0.25"]
    assert (
        len({colour for name in ("off", "dynamic", "press:snapkv:0.5", "quantized:fp8") for colour in colours[name]})
        == 4
    )
    lines = [line for line in figure.axes[0].get_lines() if line.get_label().endswith("prompt tokens 16")]
    assert len(lines) == len({(line.get_linestyle(), line.get_marker()) for line in lines}) == len(NAMES)  # told apart
    steps = [line.get_linestyle() for line in figure.axes[2].get_lines()]
    assert steps[2] != steps[3]  # the two ratios' steps too
    names = ("off", "dynamic", "static", "quantized:quanto")
    bars = _profiled(_comparison(names)).plot()  # a bar per strategy at one length, and per-step lines
    found = _colours(bars, names)
    assert {name: sorted({index for index, _ in drawn}) for name, drawn in found.items()} == {
        "off": [0, 2],
        **{name: [0, 1, 2] for name in names[1:]},
    }
    assert all(len({colour for _, colour in drawn}) == 1 for drawn in found.values())


def test_a_trade_off_beside_per_step_latency_leaves_the_spare_panel_blank() -> None:
    quality = {"quality": Quality(8, 0.9, 0.01, 1.01)}
    profile = {"profile": StepProfile((0.1,) * 8, (), (), 0, 0)}
    measurements = rounds(CONFIG, FAST, off={**profile, "kv_bytes": 0}, dynamic={**profile, "kv_bytes": MIB})
    measurements[1] = timed(CONFIG, "press:snapkv:0.5", measurements[1].seconds, kv_bytes=MIB, **quality, **profile)
    names = ["off", "press:snapkv:0.5"]
    figure = BenchmarkResult("m", measurements, spec=BenchSpec(cache=tuple(names)), strategies=names).plot()
    assert len(figure.axes) == 6
    assert [axis.axison for axis in figure.axes] == [True, True, True, True, True, False]


# ---- models side by side ----

SIZES = KVSizes(position_bytes=4096, windows=(None, None))


def _model(name: str, lengths: tuple[tuple[int, ...], ...], *, sizes: KVSizes | None = None, cache: str = "dynamic"):
    names = ("off", cache)
    rows = [
        m
        for n, config in enumerate(lengths)
        for m in (
            timed(config, "off", [u * (n + 2) for u, _ in FAST], kv_bytes=0),
            timed(config, cache, [o for _, o in FAST], kv_bytes=(n + 1) * MIB),
        )
    ]
    spec = BenchSpec(cache=names) if cache != "dynamic" else BenchSpec()
    return BenchmarkResult(name, rows, spec=spec, strategies=list(names), facts=RunFacts(kv_sizes=sizes))


def test_models_side_by_side_share_a_colour_per_model_and_a_style_per_strategy() -> None:
    first = _model("a", ((8, 32), (16, 8)), sizes=SIZES)  # 40 and 24 tokens: drawn in order of the context
    second = _model("b", ((16, 8), (8, 32)), sizes=SIZES, cache="static")  # no dynamic cache: nothing predicted
    figure = ModelsResult([first, second]).plot()
    times, speedups, memory = figure.axes
    assert [(axis.get_title(), axis.get_xlabel(), axis.get_ylabel()) for axis in figure.axes] == [
        ("Time per generate (median)", "prompt + new tokens", "seconds"),
        ("Speed-up over the cache off", "prompt + new tokens", SPEEDUP_LABEL),
        ("KV cache (dotted: predicted from the config, where it differs)", "prompt + new tokens", "MiB"),
    ]
    assert _suptitle(figure) == "Greedy generation, models side by side: a, b"
    assert {axis.get_subplotspec().get_gridspec().get_geometry() for axis in figure.axes} == {(1, 3)}  # side by side
    lines = _drawn(times)
    assert set(lines) == {"a, uncached", "a, cached", "b, off", "b, static"}
    assert lines["a, uncached"]["xy"][0] == [24, 40] and lines["b, static"]["xy"][0] == [24, 40]
    assert lines["a, uncached"]["xy"][1] == [first.measurement("off", c).median_s for c in first.configs[::-1]]
    colours = [(name[0], line["colour"]) for axis in figure.axes for name, line in _drawn(axis).items()]
    assert set(colours) == {("a", to_rgba("C0")), ("b", to_rgba("C1"))}  # in every panel
    assert lines["a, uncached"]["style"] == lines["b, off"]["style"] != lines["a, cached"]["style"]
    drawn = _drawn(speedups)
    assert set(drawn) == {"a, cached", "b, static"} and drawn["a, cached"]["style"] == lines["a, cached"]["style"]
    assert drawn["a, cached"]["xy"] == ([24, 40], [first.pair(c).speedup for c in first.configs[::-1]])
    bars = _error_bars(speedups)
    assert [bar["x"] for bar in bars] == [24, 40, 24, 40]
    assert [bar["colour"] for bar in bars] == [to_rgba("C0")] * 2 + [to_rgba("C1")] * 2
    _assert_line_at_one(speedups)
    held = _drawn(memory)
    assert (
        held["a, cached"]["xy"] == ([24, 40], [2.0, 1.0]) and held["a, cached"]["style"] == lines["a, cached"]["style"]
    )
    (predicted,) = [line for line in memory.get_lines() if line.get_label().startswith("_")]  # a's, not in the legend
    assert list(predicted.get_xdata()) == [24, 40]
    assert list(predicted.get_ydata()) == [SIZES.after(16, 8) / MIB, SIZES.after(8, 32) / MIB]
    assert predicted.get_linestyle() == ":" and to_rgba(predicted.get_color()) == to_rgba("C0")
    assert predicted.get_linewidth() < held["a, cached"]["width"]
    for axis in figure.axes:
        _assert_faint_grid(axis)
        assert _legend(axis) == list(_drawn(axis))
        legend_size = axis.get_legend().get_texts()[0].get_fontsize()
        assert legend_size < axis.xaxis.label.get_fontsize()  # many entries: a smaller legend
    assert isinstance(figure.get_layout_engine(), ConstrainedLayoutEngine)
    single = _model("a", ((16, 8), (16, 16), (16, 32))).plot()  # a panel as wide as one of a single model's
    assert figure.get_size_inches()[0] / 3 == pytest.approx(single.get_size_inches()[0] / 2)


def test_the_cache_panel_says_dotted_only_where_a_prediction_shows_beside_its_count() -> None:
    def memory_title(*models: BenchmarkResult) -> str:
        return ModelsResult(list(models)).plot().axes[2].get_title()

    def counted(name: str, sizes: KVSizes | None = SIZES) -> BenchmarkResult:
        """Its full cache held what the config predicts, byte for byte: the dotted line lies hidden under it."""
        result = _model(name, ((8, 32), (16, 8)), sizes=sizes)
        result.measurements = [replace(m, kv_bytes=SIZES.after(*m.config)) if m.strategy.caches else m
                               for m in result.measurements]  # fmt: skip
        return result

    assert memory_title(counted("a"), counted("b")) == "KV cache (as predicted from the config)"
    assert memory_title(counted("a"), _model("b", ((16, 8),), sizes=SIZES)) == (
        "KV cache (dotted: predicted from the config, where it differs)"
    )
    assert memory_title(counted("a", sizes=None)) == "KV cache"  # nothing predicted, nothing dotted


def test_models_side_by_side_name_each_batch_and_say_when_partial() -> None:
    batched = _model("a", ((8, 4, 1), (8, 4, 2)), sizes=SIZES)
    other = _model("b", ((8, 4),))
    models = ModelsResult([batched, other], stopped="interrupted")
    figure = models.plot()
    assert set(_drawn(figure.axes[0])) == {"a, batch 1, uncached", "a, batch 1, cached", "a, batch 2, uncached",
                                           "a, batch 2, cached", "b, uncached", "b, cached"}  # fmt: skip
    assert _suptitle(figure) == "Greedy generation, models side by side: a, b (partial)"
    labels = [(line.get_label().lstrip("_"), line.get_color()) for axis in figure.axes for line in axis.get_lines()]
    colours = {(label[0], to_rgba(colour)) for label, colour in labels if label[1:3] == ", "}
    assert colours == {("a", to_rgba("C0")), ("b", to_rgba("C1"))}  # each batch's lines, and each prediction
    predicted = [label for label, _ in labels if label.endswith("predicted")]
    assert predicted == ["a, batch 1 predicted", "a, batch 2 predicted"]


def test_models_with_nothing_measured_refuse_to_plot() -> None:
    with pytest.raises(KVMagicError, match=r"^nothing to plot: the benchmark finished no configuration$"):
        ModelsResult([BenchmarkResult("a", []), BenchmarkResult("b", [])], stopped="interrupted").plot()
