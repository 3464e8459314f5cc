"""Notes on what the times cannot carry on their own: a speed-up with no interval, and a machine whose load
changed while it ran.

One pair of runs says nothing about its own noise, and on a busy machine the same cell can show a speed-up
of 2 and then of 30; a sweep whose times fall as its work grows, or a run several times its siblings, says
the machine's speed moved under it. Each gets one line under the table.
"""

from __future__ import annotations

import statistics
from itertools import combinations
from typing import TYPE_CHECKING

from kvmagic.results.columns import cell
from kvmagic.results.measurement import MIN_REPEAT_FOR_SPREAD

if TYPE_CHECKING:
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement

__all__ = ["OUT_OF_ORDER", "SLOW_RUN", "caution_notes"]

OUT_OF_ORDER = 0.8  # more work done in under this share of the time of less: not noise, a change of speed
SLOW_RUN = 3.0  # a run this many times the median of its siblings (the strategy's other runs there)
JITTER_S = 0.05  # times this short move with the scheduler's turns alone: no sign of a change of load
LOAD = "the machine's load likely changed while it ran"


def caution_notes(result: BenchmarkRecord) -> list[str]:
    """Plain-language notes: no interval from too few pairs, and the signs of a load that changed."""
    return _no_interval(result) + _out_of_order(result) + _slow_runs(result)


def _no_interval(result: BenchmarkRecord) -> list[str]:
    if result.spec.repeat == "auto" or not result.measurements:
        return []
    fewest = min(len(m.seconds) for m in result.measurements)
    if fewest >= MIN_REPEAT_FOR_SPREAD:
        return []
    pairs = "one pair" if fewest == 1 else f"{fewest} pairs"
    busy = "on a busy machine, a rerun may differ widely"
    return [f"{pairs}: no interval ({busy}); -r {MIN_REPEAT_FOR_SPREAD} gives one"]


def _out_of_order(result: BenchmarkRecord) -> list[str]:
    """A strategy that took less time for more work (as long a prompt and as many new tokens, or more, in the
    same batch): one line per strategy, naming the first such pair of configurations."""
    found, seconds = [], cell("seconds")
    by_strategy: dict[str, list[Measurement]] = {}
    for m in result.measurements:
        by_strategy.setdefault(result.shown_name(m.strategy), []).append(m)
    for name, measured in by_strategy.items():
        for less, more in combinations(sorted(measured, key=lambda m: m.config), 2):
            if _more_work(more, less) and less.median_s >= JITTER_S and more.median_s < OUT_OF_ORDER * less.median_s:
                found.append(
                    f"{name} took {seconds(more.median_s)} s at {more.config}, less than {seconds(less.median_s)} s "
                    f"at {less.config} with less work: {LOAD}; close other work and rerun, or use --threads 1"
                )
                break
    return found


def _slow_runs(result: BenchmarkRecord) -> list[str]:
    """A run several times the median of its siblings: one line for all of them."""
    slow = []
    for m in result.measurements:
        for i, seconds in enumerate(m.seconds):
            others = m.seconds[:i] + m.seconds[i + 1 :]
            if others and seconds >= JITTER_S and seconds > SLOW_RUN * statistics.median(others):
                where = f" at {m.config}" if len(result.configs) > 1 else ""
                slow.append(f"{result.shown_name(m.strategy)}{where} ({seconds / statistics.median(others):.1f}x)")
                break
    if not slow:
        return []
    return [f"a run took several times its siblings' median: {', '.join(slow)}: {LOAD}; the medians keep it out"]


def _more_work(more: Measurement, less: Measurement) -> bool:
    (p, n, b), (q, k, c) = more.config, less.config
    return b == c and p >= q and n >= k and (p, n) != (q, k)
