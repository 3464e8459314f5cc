"""The sweep as a picture: time and speed-up against length, per-step latency against position.

Built on a bare matplotlib ``Figure`` (no pyplot): no global figure state, no backend needed, and
``fig.savefig(path)`` works anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kvmagic.core.spec import CACHED, CONDITIONS
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from kvmagic.results.result import BenchmarkResult, Measurement

__all__ = ["plot_result", "step_seconds"]

MIB = 2**20


def step_seconds(measurement: Measurement, condition: str) -> Sequence[float] | None:
    """Per-token seconds of one condition, when the measurement recorded them."""
    steps = getattr(measurement, f"{condition}_step_s", None)
    if steps is None:
        profile = getattr(measurement, "profiles", {}).get(condition)
        steps = getattr(profile, "step_s", None)
    return steps or None


def plot_result(result: BenchmarkResult) -> Figure:
    """Two panels (time, speed-up against length), three when per-step times exist.

    The x axis is the generated length when that varies (one line per prompt length), else the
    prompt length. When the batch varies, the batch is the x axis of the first two panels instead:
    the speed-up and the memory it costs (KV cache, peaks), one line per (prompt, new) length.
    """
    from matplotlib.figure import Figure

    measurements = result.measurements
    if not measurements:
        raise KVMagicError("nothing to plot: the benchmark finished no configuration")
    stepped = [m for m in measurements if all(step_seconds(m, c) for c in CONDITIONS)]
    figure = Figure(figsize=(5.2 * (3 if stepped else 2), 4.2), layout="constrained")
    axes = figure.subplots(1, 3 if stepped else 2)
    if len({m.batch for m in measurements}) > 1:
        _draw_batches(axes[0], axes[1], measurements)
    else:
        _draw_lengths(axes[0], axes[1], measurements)
    if stepped:
        _draw_steps(axes[2], max(stepped, key=lambda m: (m.prompt_tokens + m.new_tokens, m.prompt_tokens)))
    figure.suptitle(f"{result.model}: greedy generation, KV cache off vs on" + (" (partial)" if result.partial else ""))
    return figure


def _draw_lengths(times: Axes, speedups: Axes, measurements: Sequence[Measurement]) -> None:
    by_new = len({m.new_tokens for m in measurements}) > 1 or len({m.prompt_tokens for m in measurements}) == 1
    x_name, group_name = ("new_tokens", "prompt_tokens") if by_new else ("prompt_tokens", "new_tokens")
    groups: dict[int, list[Measurement]] = {}
    for m in measurements:
        groups.setdefault(getattr(m, group_name), []).append(m)
    for group, rows in groups.items():
        rows = sorted(rows, key=lambda m: getattr(m, x_name))
        xs = [getattr(m, x_name) for m in rows]
        suffix = f", {group_name.replace('_', ' ')} {group}" if len(groups) > 1 else ""
        for condition, style in zip(CONDITIONS, ("o-", "s--")):
            times.plot(xs, [getattr(m, f"{condition}_s") for m in rows], style, label=condition + suffix)
        speedups.plot(xs, [m.speedup for m in rows], "o-", label=f"speed-up{suffix}")
    label = x_name.replace("_", " ")
    times.set(title="Time per generate (median)", xlabel=label, ylabel="seconds")
    speedups.set(title="Speed-up (uncached / cached)", xlabel=label, ylabel="times faster")
    speedups.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    for axis in (times, speedups):
        axis.legend()
        axis.grid(alpha=0.3)


def _draw_batches(speedups: Axes, memory: Axes, measurements: Sequence[Measurement]) -> None:
    """Speed-up and memory against the batch: what a larger batch buys, and what it holds."""
    groups: dict[tuple[int, int], list[Measurement]] = {}
    for m in measurements:
        groups.setdefault((m.prompt_tokens, m.new_tokens), []).append(m)
    for (prompt_tokens, new_tokens), rows in groups.items():
        rows = sorted(rows, key=lambda m: m.batch)
        xs = [m.batch for m in rows]
        suffix = f", {prompt_tokens}+{new_tokens} tokens" if len(groups) > 1 else ""
        speedups.plot(xs, [m.speedup for m in rows], "o-", label=f"speed-up{suffix}")
        memory.plot(xs, [m.kv_bytes.get(CACHED, math.nan) / MIB for m in rows], "o-", label=f"KV cache{suffix}")
        for condition, style in zip(CONDITIONS, ("s--", "^:")):
            peaks = [m.peak_bytes.get(condition, math.nan) / MIB for m in rows]
            if not all(math.isnan(p) for p in peaks):
                memory.plot(xs, peaks, style, label=f"{condition} peak{suffix}")
    speedups.set(title="Speed-up (uncached / cached)", xlabel="batch", ylabel="times faster")
    speedups.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    memory.set(title="Memory of the whole batch", xlabel="batch", ylabel="MiB")
    for axis in (speedups, memory):
        axis.legend()
        axis.grid(alpha=0.3)


def _draw_steps(axis: Axes, measurement: Measurement) -> None:
    for condition in CONDITIONS:
        steps = step_seconds(measurement, condition) or ()
        positions = range(measurement.prompt_tokens, measurement.prompt_tokens + len(steps))
        axis.plot(positions, [s * 1e3 for s in steps], label=condition)
    axis.set(
        title=f"Per-step latency ({measurement.prompt_tokens}+{measurement.new_tokens} tokens)",
        xlabel="position (tokens in context)",
        ylabel="ms per token",
    )
    axis.legend()
    axis.grid(alpha=0.3)
