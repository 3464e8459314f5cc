"""The trade-off at a glance: what each strategy keeps of the full cache's predictions, against what it holds and how
fast it decodes.

One point per strategy whose quality was read, at one configuration; the strategies of one method at several
compression ratios (``press:snapkv:0.25``, ``press:snapkv:0.5``) join into that method's curve, the full cache is
marked, and a ring marks each point on the trade-off frontier (:func:`~kvmagic.results.pareto_marks.pareto_marks`: no
other row at once as fast, holding as little and losing as little). The y axis is ``kl_nats`` on a scale linear
near 0 (the full cache scores exactly 0) and logarithmic above. Where every strategy kept the full cache's
predictions (KL 0), there is no trade-off to draw: the figure has no such row, and the notes say why.

Each strategy has one colour in every panel of a figure (:func:`colours`), its method's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kvmagic.core.compression import PRESS
from kvmagic.core.strategy import FULL_CACHE, Strategy
from kvmagic.results.pareto_marks import pareto_marks

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from kvmagic.core.config import Config
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement

__all__ = ["colours", "draw_tradeoff", "judged_config", "method", "traded_config"]

MIB = 2**20
LINEAR_BELOW = 1e-6  # the KL below which the scale is linear: rounding of a lossless strategy sits there


def method(strategy: Strategy) -> tuple[str, float | None]:
    """A strategy's method and compression ratio: ``press:snapkv:0.5`` -> (``press:snapkv``, 0.5); any other strategy
    is its own method, with no ratio."""
    press = strategy.press
    return (str(strategy), None) if press is None else (f"{PRESS}:{press.method}", press.ratio)


def colours(result: BenchmarkRecord) -> dict[Strategy, str]:
    """Each strategy's colour, the same in every panel: its method's, the methods taking matplotlib's cycle in the
    order they come (the ratios of one press share their curve's colour; their line styles tell them apart)."""
    methods = list(dict.fromkeys(method(s)[0] for s in result.strategies))
    return {s: f"C{methods.index(method(s)[0]) % 10}" for s in result.strategies}


def judged_config(result: BenchmarkRecord) -> Config | None:
    """The longest configuration whose strategies' quality was read, or None."""
    judged = [m.config for m in result.measurements if m.quality is not None]
    return max(judged, key=lambda c: (c.prompt_tokens + c.new_tokens, c.batch)) if judged else None


def traded_config(result: BenchmarkRecord) -> Config | None:
    """The configuration the trade-off is drawn at (:func:`judged_config`), or None where none was read or no
    strategy there lost any of the full cache's predictions: a plot of zeros has nothing to show."""
    config = judged_config(result)
    lost = any(m.config == config and m.quality is not None and not m.quality.lossless and m.strategy.caches
               for m in result.measurements)  # fmt: skip
    return config if lost else None


def draw_tradeoff(memory: Axes, speed: Axes, result: BenchmarkRecord, config: Config) -> None:
    """KL against the KV cache's bytes, and against decode tok/s, at ``config``."""
    curves: dict[str, list[Measurement]] = {}
    for m in result.measurements:
        if m.config == config and m.quality is not None and m.strategy.caches:  # off holds no cache to trade
            curves.setdefault(method(m.strategy)[0], []).append(m)
    colour = colours(result)
    marks = pareto_marks(result)
    frontier = [m for found in curves.values() for m in found if marks.get((config, m.strategy))]
    for axis, figure, label in ((memory, _kv_mib, "KV cache (MiB)"), (speed, lambda m: m.decode_tok_s, "decode tok/s")):
        if frontier:  # rings drawn first, so each strategy's own point sits inside its ring
            kl = [m.quality.kl_nats if m.quality else math.nan for m in frontier]
            axis.plot([figure(m) for m in frontier], kl, "o", markersize=16, markerfacecolor="none",
                      markeredgecolor="black", label="trade-off frontier (pareto)")  # fmt: skip
        for name, found in curves.items():
            found = sorted(found, key=figure)
            kl = [m.quality.kl_nats if m.quality else math.nan for m in found]
            drawn = colour.get(found[0].strategy)
            if found[0].strategy == FULL_CACHE:
                axis.plot([figure(m) for m in found], kl, "*", markersize=14, color=drawn,
                          label=f"full cache ({FULL_CACHE})")  # fmt: skip
            else:
                axis.plot([figure(m) for m in found], kl, "o-", color=drawn, label=name)
                for m, y in zip(found, kl):
                    ratio = method(m.strategy)[1]
                    if ratio is not None:
                        axis.annotate(f"{ratio:g}", (figure(m), y), textcoords="offset points", xytext=(4, 4))
        axis.set_yscale("symlog", linthresh=LINEAR_BELOW)
        axis.margins(0.12)  # room for the ratio labels beside points at the edges
        axis.set(xlabel=label, ylabel="KL from the full cache (nats per token)")
        axis.legend()
        axis.grid(alpha=0.3)
    memory.set_title(f"Quality against memory ({config})")
    speed.set_title(f"Quality against decode speed ({config})")


def _kv_mib(m: Measurement) -> float:
    return math.nan if m.kv_bytes is None else m.kv_bytes / MIB
