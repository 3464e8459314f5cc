"""Which rows of a comparison are on their configuration's trade-off frontier (the table's ``pareto`` column), and
when two rows' times are within noise of each other.

- The trade-off frontier (:mod:`kvmagic.core.pareto`): at each configuration, the rows no other row beats on
  speed (median seconds), KV bytes held and quality (``kl_nats``) at once.
- Noise: two rows whose times the rounds cannot tell apart (the 95% interval of their per-round time ratio, as
  the table's speed-up interval is taken, holds 1, or there is no interval: one round) are within noise of each
  other: they tie on speed. A row within noise of off is not beaten by it, nor off by it: whether that cache pays
  is open.

The verdict and the marks speak of a comparison of :data:`MIN_STRATEGIES` strategies or more, at its largest
configuration (:func:`largest_config`).
"""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING

from kvmagic.core.intervals import speedup_interval
from kvmagic.core.pareto import Point, on_frontier
from kvmagic.core.strategy import REFERENCE, Strategy
from kvmagic.results.measurement import MIN_REPEAT_FOR_SPREAD

if TYPE_CHECKING:
    from kvmagic.core.config import Config
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement

__all__ = [
    "MIN_STRATEGIES", "Close", "largest_config", "marked", "pareto_marks", "point", "told_apart", "undecided",
    "within_noise",
]  # fmt: skip

MIN_STRATEGIES = 3  # rows at one configuration before the verdict has something to say (off and two more)
Close = frozenset[frozenset[Strategy]]  # pairs of rows, by strategy, whose times are within noise of each other


def point(m: Measurement) -> Point:
    """A row's figures, as the trade-off frontier weighs them."""
    kl_nats = None if m.quality is None else m.quality.kl_nats
    return Point(m.median_s, None if m.kv_bytes is None else float(m.kv_bytes), kl_nats)


def pareto_marks(result: BenchmarkRecord) -> dict[tuple[Config, Strategy], bool]:
    """For each row measured, whether it is on its configuration's trade-off frontier."""
    marks = {}
    for config in result.configs:
        rows = [m for m in result.measurements if m.config == config]
        marks.update({(m.config, m.strategy): mark for m, mark in zip(rows, marked(rows, within_noise(rows)))})
    return marks


def within_noise(rows: list[Measurement]) -> Close:
    """The pairs of rows whose times the rounds cannot tell apart."""
    return frozenset(frozenset((a.strategy, b.strategy)) for a, b in combinations(rows, 2) if not told_apart(a, b))


def undecided(close: Close) -> Close:
    """The pairs within noise that hold off: whether that cache pays is open, so neither row beats the other (off
    holds no cache, and would otherwise beat every cache the rounds cannot tell from it)."""
    return frozenset(pair for pair in close if REFERENCE in pair)


def marked(rows: list[Measurement], close: Close) -> list[bool]:
    """Each row's mark, its pairs within noise (``close``, by strategy) handed over as the rows' positions."""
    at = {m.strategy: i for i, m in enumerate(rows)}
    positions = {pair: frozenset(at[s] for s in pair) for pair in close}
    held = [positions[pair] for pair in undecided(close)]
    return on_frontier([point(m) for m in rows], positions.values(), held)


def largest_config(result: BenchmarkRecord) -> Config:
    """The configuration the verdict speaks of: the longest context, the largest batch among those."""
    return max(result.configs, key=lambda c: (c.prompt_tokens + c.new_tokens, c.batch))


def told_apart(a: Measurement, b: Measurement) -> bool | None:
    """Whether the rounds tell the two rows' times apart: the 95% interval of their per-round time ratio (the rounds
    ran side by side) leaves out 1. None where there is no interval to tell by (fewer than 3 rounds, as in the
    table, or rounds that did not run side by side): such rows are within noise of each other too."""
    if len(a.seconds) != len(b.seconds) or len(a.seconds) < MIN_REPEAT_FOR_SPREAD:
        return None  # the table shows no interval below 3 rounds: neither do the words
    if min((*a.seconds, *b.seconds)) <= 0:
        return None
    found = speedup_interval(a.seconds, b.seconds)
    return None if found is None else not found[0] <= 1 <= found[1]
