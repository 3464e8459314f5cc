"""The sweep as a picture: time and speed-up against length, per-step latency against position, quality's cost.

Every strategy gets its line (the plain run's two as uncached and cached), every strategy but the reference
its speed-up, each strategy in one colour and one line style in every panel (the trade-off's too). Built on a
bare matplotlib ``Figure`` (no pyplot): no global figure state, no backend needed, and ``fig.savefig(path)``
works anywhere; the figure shows itself as a PNG in a notebook, with no ``%matplotlib`` line, as a result's last
line or through ``display``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure

from kvmagic.addons.plot.tradeoff import colours, draw_tradeoff, traded_config
from kvmagic.core.config import Config
from kvmagic.core.strategy import REFERENCE, Strategy
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.typing import ColorType

    from kvmagic.results.benchmark_record import BenchmarkRecord

__all__ = [
    "MIB", "STYLES", "SweepFigure", "grouped", "kv_mib_at", "plot_result", "seconds_at", "speedup_axis", "speedup_line",
]  # fmt: skip

MIB = 2**20
STYLES = ("o-", "s--", "^:", "d-.", "v-", "x--", "*:", "p-.")
_K = TypeVar("_K")
_FILLS = ("full", "none", "left", "bottom", "right", "top")  # each length's markers, where several share a panel


class SweepFigure(Figure):
    """A matplotlib ``Figure`` that IPython shows as a PNG whatever the backend (a bare figure has no
    inline formatter until pyplot is imported)."""

    def _repr_png_(self) -> bytes:
        import io

        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()


def plot_result(result: BenchmarkRecord) -> SweepFigure:
    """Two panels (time, speed-up against length), three when per-step times exist; below them, where some
    strategy lost any of the full cache's predictions, the trade-off (:mod:`kvmagic.addons.plot.tradeoff`).

    The x axis is the generated length when that varies (one line per prompt length), else the
    prompt length. When the batch varies, the batch is the x axis of the first two panels instead:
    the speed-up and the memory it costs (KV cache, peaks), one line per (prompt, new) length.
    """
    configs = result.configs
    if not configs:
        raise KVMagicError("nothing to plot: the benchmark finished no configuration")
    stepped = [c for c in configs if all(m.profile for m in result.measurements if m.config == c)]
    judged = traded_config(result)
    rows, columns = (2 if judged else 1), (3 if stepped else 2)
    figure = SweepFigure(figsize=(5.2 * columns, 4.2 * rows), layout="constrained")
    grid = figure.subplots(rows, columns, squeeze=False)
    axes = grid[0]
    if judged is not None:
        draw_tradeoff(grid[1][0], grid[1][1], result, judged)
        for spare in grid[1][2:]:
            spare.set_axis_off()
    if len({c.batch for c in configs}) > 1:
        _draw_batches(axes[0], axes[1], result)
    elif len(configs) == 1:
        _draw_one(axes[0], axes[1], result, configs[0])
    else:
        _draw_lengths(axes[0], axes[1], result)
    if stepped:
        _draw_steps(axes[2], result, max(stepped, key=lambda c: (c.prompt_tokens + c.new_tokens, c.prompt_tokens)))
    what = " vs ".join(result.shown_name(s) for s in result.strategies)
    figure.suptitle(f"{result.model}: greedy generation, {what}" + (" (partial)" if result.partial else ""))
    return figure


def grouped(configs: Iterable[Config], key: Callable[[Config], _K]) -> dict[_K, list[Config]]:
    """The configurations by ``key``, in the order they come."""
    found: dict[_K, list[Config]] = {}
    for config in configs:
        found.setdefault(key(config), []).append(config)
    return found


def seconds_at(result: BenchmarkRecord, strategy: Strategy, configs: Sequence[Config]) -> list[float]:
    found = [result.measurement(strategy, c) for c in configs]
    return [math.nan if m is None else m.median_s for m in found]


def kv_mib_at(result: BenchmarkRecord, strategy: Strategy, configs: Sequence[Config]) -> list[float]:
    """The KV cache each run returned held, in MiB (NaN where not counted)."""
    found = [result.measurement(strategy, c) for c in configs]
    return [math.nan if m is None or m.kv_bytes is None else m.kv_bytes / MIB for m in found]


def speedups_at(result: BenchmarkRecord, strategy: Strategy, configs: Sequence[Config]) -> list[float]:
    found = [result.pair(c, strategy) for c in configs]
    return [math.nan if p is None else p.speedup for p in found]


def speedup_line(axis: Axes, xs: Sequence[float], result: BenchmarkRecord, strategy: Strategy,
                 configs: Sequence[Config], style: str, **line: Any) -> None:  # fmt: skip
    """A strategy's speed-ups at ``xs``, and each one's 95% interval as an error bar in the line's colour."""
    axis.plot(xs, speedups_at(result, strategy, configs), style, **line)
    _draw_intervals(axis, xs, result, strategy, configs, line["color"])


def _draw_intervals(axis: Axes, xs: Sequence[float], result: BenchmarkRecord, strategy: Strategy,
                    configs: Sequence[Config], color: ColorType) -> None:  # fmt: skip
    """Each speed-up's 95% interval as an error bar at ``xs``, where it has one (``-r 3`` or more): from its
    low end to its high end, which the ratio of medians drawn may lie outside."""
    found = [result.pair(c, strategy) for c in configs]
    ends = [(x, *p.interval) for x, p in zip(xs, found) if p is not None and math.isfinite(p.interval[0])]
    if ends:
        at, lows, highs = zip(*ends)
        middles = [(low + high) / 2 for low, high in zip(lows, highs)]
        halves = [(high - low) / 2 for low, high in zip(lows, highs)]
        axis.errorbar(at, middles, yerr=halves, fmt="none", ecolor=color, capsize=4, label="_95% interval")


def speedup_axis(axis: Axes, title: str, **labels: str) -> None:
    """The speed-up panel's title and labels, its y label saying what its error bars are where it has some, and the
    line at 1."""
    drawn = any(isinstance(container, ErrorbarContainer) for container in axis.containers)
    axis.set(title=title, ylabel="times faster" + (" (error bars: 95% intervals)" if drawn else ""), **labels)
    axis.axhline(1.0, color="grey", linestyle=":", linewidth=1)


def _draw_lengths(times: Axes, speedups: Axes, result: BenchmarkRecord) -> None:
    configs = result.configs
    by_new = len({c.new_tokens for c in configs}) > 1 or len({c.prompt_tokens for c in configs}) == 1
    x_name, group_name = ("new_tokens", "prompt_tokens") if by_new else ("prompt_tokens", "new_tokens")
    groups, colour = grouped(configs, lambda c: getattr(c, group_name)), colours(result)
    for at, (group, rows) in enumerate(groups.items()):
        rows = sorted(rows, key=lambda c: getattr(c, x_name))
        xs = [getattr(c, x_name) for c in rows]
        suffix = f", {group_name.replace('_', ' ')} {group}" if len(groups) > 1 else ""
        fill = _FILLS[at % len(_FILLS)]  # a strategy's colour and style at every length: its markers tell them apart
        for index, strategy in enumerate(result.strategies):
            style, drawn, name = STYLES[index % len(STYLES)], colour[strategy], result.shown_name(strategy)
            times.plot(xs, seconds_at(result, strategy, rows), style, color=drawn, fillstyle=fill, label=name + suffix)
            if strategy != REFERENCE:
                label = f"{name} speed-up{suffix}"
                speedup_line(speedups, xs, result, strategy, rows, style, color=drawn, fillstyle=fill, label=label)
    label = x_name.replace("_", " ")
    times.set(title="Time per generate (median)", xlabel=label, ylabel="seconds")
    speedup_axis(speedups, f"Speed-up over {result.shown_name(REFERENCE)}", xlabel=label)
    for axis in (times, speedups):
        axis.legend()
        axis.grid(alpha=0.3)


def _draw_one(times: Axes, speedups: Axes, result: BenchmarkRecord, config: Config) -> None:
    """One configuration: a bar per strategy in its colour, its median time and its speed-up, each bar labelled
    above its top, or above its error bar's where that is higher."""
    names, colour = [result.shown_name(s) for s in result.strategies], colours(result)
    bars = times.bar(names, [seconds_at(result, s, [config])[0] for s in result.strategies],
                     color=[colour[s] for s in result.strategies])  # fmt: skip
    times.bar_label(bars, fmt="%.3g s", padding=2)
    others = [s for s in result.strategies if s != REFERENCE]
    bars = speedups.bar([result.shown_name(s) for s in others], [speedups_at(result, s, [config])[0] for s in others],
                        color=[colour[s] for s in others])  # fmt: skip
    for bar, strategy in zip(bars, others):
        middle, height, pair = bar.get_x() + bar.get_width() / 2, bar.get_height(), result.pair(config, strategy)
        _draw_intervals(speedups, [middle], result, strategy, [config], "black")
        if math.isfinite(height):
            top = max(height, pair.interval[1]) if pair is not None and math.isfinite(pair.interval[1]) else height
            speedups.annotate(f"{height:.3g}x", (middle, top), xytext=(0, 2), textcoords="offset points",
                              ha="center", va="bottom")  # fmt: skip
    times.set(title=f"Time per generate (median, {config})", ylabel="seconds")
    speedup_axis(speedups, f"Speed-up over {result.shown_name(REFERENCE)}")
    for axis in (times, speedups):
        axis.margins(y=0.15)
        axis.tick_params(axis="x", labelrotation=30 if len(names) > 3 else 0)
        axis.grid(alpha=0.3, axis="y")


def _draw_batches(speedups: Axes, memory: Axes, result: BenchmarkRecord) -> None:
    """Speed-up and memory against the batch: what a larger batch buys, and what it holds."""
    groups, colour = grouped(result.configs, lambda c: (c.prompt_tokens, c.new_tokens)), colours(result)
    for at, ((prompt_tokens, new_tokens), rows) in enumerate(groups.items()):
        rows = sorted(rows, key=lambda c: c.batch)
        xs = [c.batch for c in rows]
        suffix = f", {prompt_tokens}+{new_tokens} tokens" if len(groups) > 1 else ""
        fill = _FILLS[at % len(_FILLS)]
        for index, strategy in enumerate(result.strategies):
            style, drawn, name = STYLES[index % len(STYLES)], colour[strategy], result.shown_name(strategy)
            found = [result.measurement(strategy, c) for c in rows]
            if strategy != REFERENCE:
                label = f"{name} speed-up{suffix}"
                speedup_line(speedups, xs, result, strategy, rows, style, color=drawn, fillstyle=fill, label=label)
                memory.plot(xs, kv_mib_at(result, strategy, rows), style, color=drawn, fillstyle=fill,
                            label=f"{name} KV cache{suffix}")  # fmt: skip
            peaks = [math.nan if m is None or m.peak_bytes is None else m.peak_bytes / MIB for m in found]
            if not all(math.isnan(p) for p in peaks):  # paler than its own KV cache's line, in the same colour
                memory.plot(xs, peaks, style, color=drawn, fillstyle=fill, alpha=0.45, label=f"{name} peak{suffix}")
    speedup_axis(speedups, f"Speed-up over {result.shown_name(REFERENCE)}", xlabel="batch")
    memory.set(title="Memory of the whole batch", xlabel="batch", ylabel="MiB")
    for axis in (speedups, memory):
        axis.legend()
        axis.grid(alpha=0.3)


def _draw_steps(axis: Axes, result: BenchmarkRecord, config: Config) -> None:
    """Each strategy's steps in its colour and style, a marker every few steps (one at each would hide the line)."""
    colour = colours(result)
    for index, strategy in enumerate(result.strategies):
        m = result.measurement(strategy, config)
        if m is not None and m.profile:
            positions = range(config.prompt_tokens, config.prompt_tokens + len(m.profile.step_s))
            every = max(1, len(positions) // 8)
            axis.plot(positions, [s * 1e3 for s in m.profile.step_s], STYLES[index % len(STYLES)], markevery=every,
                      color=colour[strategy], label=result.shown_name(strategy))  # fmt: skip
    axis.set(title=f"Per-step latency ({config})", xlabel="position (tokens in context)", ylabel="ms per token")
    axis.legend()
    axis.grid(alpha=0.3)
