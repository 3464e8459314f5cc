"""Models side by side as a picture: time, speed-up and the KV cache against the context, one colour per model.

Each model's lines share its colour, each strategy its line style (the plain run's two as uncached and cached), so
that what the shapes do shows at a glance: how the speed-up grows per model, and how each model's cache grows, by
its group size and, in a sliding-window layer, up to its window only. The cache panel sets the bytes predicted from
the config (dotted) beside the counted ones; its title says which, since a prediction that matches its count lies
hidden under it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kvmagic.addons.plot.sweep_plot import (
    MIB,
    STYLES,
    SweepFigure,
    grouped,
    kv_mib_at,
    seconds_at,
    speedup_axis,
    speedup_line,
)
from kvmagic.core.strategy import FULL_CACHE, REFERENCE
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from kvmagic.addons.models.models_record import ModelsRecord
    from kvmagic.results.benchmark_record import BenchmarkRecord

__all__ = ["plot_models"]


def plot_models(models: ModelsRecord) -> SweepFigure:
    """Three panels against the context (prompt plus new tokens): time per generate, speed-up over the reference,
    and the KV cache the caching strategies returned."""
    if not any(r.measurements for r in models.results):
        raise KVMagicError("nothing to plot: the benchmark finished no configuration")
    figure = SweepFigure(figsize=(15.6, 4.4), layout="constrained")
    times, speedups, memory = figure.subplots(1, 3)
    colours = [f"C{index % 10}" for index in range(len(models.results))]
    differs: list[bool] = []  # for each prediction drawn, whether it shows beside its count
    for result, colour in zip(models.results, colours):
        differs += _draw_model(times, speedups, memory, result, colour)
    times.set(title="Time per generate (median)", ylabel="seconds")
    speedup_axis(speedups, "Speed-up over the cache off")
    memory.set(title=_memory_title(differs), ylabel="MiB")
    for axis in (times, speedups, memory):
        axis.set(xlabel="prompt + new tokens")
        axis.legend(fontsize="small")
        axis.grid(alpha=0.3)
    partial = " (partial)" if models.partial else ""
    figure.suptitle(f"Greedy generation, models side by side: {', '.join(models.models)}{partial}")
    return figure


def _memory_title(differs: list[bool]) -> str:
    """The cache panel's title: where the dotted predictions show (one that matches its count lies under it)."""
    if not differs:
        return "KV cache"
    if not any(differs):
        return "KV cache (as predicted from the config)"
    return "KV cache (dotted: predicted from the config, where it differs)"


def _draw_model(times: Axes, speedups: Axes, memory: Axes, result: BenchmarkRecord, colour: str) -> list[bool]:
    """Each model's lines; for each prediction drawn, whether it leaves the counted full cache's line anywhere."""
    differs: list[bool] = []
    by_context = sorted(result.configs, key=lambda c: (c.prompt_tokens + c.new_tokens, c.prompt_tokens))
    batches = grouped(by_context, lambda c: c.batch)
    for batch, configs in batches.items():
        xs = [c.prompt_tokens + c.new_tokens for c in configs]
        label = result.model + (f", batch {batch}" if len(batches) > 1 else "")
        for strategy, style in zip(result.strategies, STYLES):
            name = f"{label}, {result.shown_name(strategy)}"
            times.plot(xs, seconds_at(result, strategy, configs), style, color=colour, label=name)
            if strategy == REFERENCE:
                continue
            speedup_line(speedups, xs, result, strategy, configs, style, color=colour, label=name)
            memory.plot(xs, kv_mib_at(result, strategy, configs), style, color=colour, label=name)
        sizes = result.facts.kv_sizes
        if sizes is not None and FULL_CACHE in result.strategies:
            predicted = [sizes.after(*config) / MIB for config in configs]
            memory.plot(xs, predicted, ":", color=colour, linewidth=1, label=f"_{label} predicted")
            counted = kv_mib_at(result, FULL_CACHE, configs)
            differs.append(not all(math.isclose(p, c, rel_tol=1e-9) for p, c in zip(predicted, counted)))
    return differs
