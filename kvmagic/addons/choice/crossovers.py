"""Where one strategy overtakes another as the context grows, from a comparison's own rows.

Along the sweep through the largest configuration (its prompt lengths, or its numbers of new tokens, whichever has
more), each strategy's median seconds against the context (prompt + new tokens) is fitted
(:func:`kvmagic.core.curves.fit_polynomial`) on every length but the longest, which is held out to check it; a
crossover is the context from which one fitted curve stays below another's (:func:`kvmagic.core.curves.crossing`),
searched from the shortest length fitted to the longest held out, or to the shorter of the two strategies' reach
where the memory frontier gives one. Each crossover keeps its check: the two strategies' time ratio at the held-out
length, predicted and measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

from kvmagic.core.curves import Polynomial, crossing, fit_polynomial, lowest
from kvmagic.core.strategy import Strategy

if TYPE_CHECKING:
    from kvmagic.core.config import Config
    from kvmagic.results.benchmark_record import BenchmarkRecord

__all__ = ["MIN_LENGTHS", "Crossover", "Fit", "crossovers", "fits"]

MIN_LENGTHS = 4  # three to fit a line (fit_polynomial holds one out to pick a degree), one held out to check it


@dataclass(frozen=True)
class Fit:
    """One strategy's median seconds against the context, fitted on ``fitted`` and checked at ``checked_at``."""

    strategy: Strategy
    curve: Polynomial
    fitted: tuple[int, ...]
    checked_at: int
    measured_s: float  # its row's median seconds there

    @property
    def error(self) -> float:
        """The fit's error at the held-out length: +0.05 = it predicted 5% more than was measured."""
        return self.curve(self.checked_at) / self.measured_s - 1


@dataclass(frozen=True)
class Crossover:
    """``overtaker`` is slower than ``overtaken`` at the shortest length fitted and faster from ``context`` on."""

    overtaker: Strategy
    overtaken: Strategy
    context: int
    checked_at: int
    predicted_ratio: float  # the overtaker's time over the overtaken's at checked_at, from the fits
    measured_ratio: float  # the same from their rows there

    @property
    def error(self) -> float:
        """The predicted ratio against the measured one at the held-out length: +0.05 = 5% above it."""
        return self.predicted_ratio / self.measured_ratio - 1

    @property
    def agrees(self) -> bool:
        """At the held-out length, the one the fits called faster was the faster measured."""
        return (self.predicted_ratio < 1) == (self.measured_ratio < 1)


def _series(configs: list[Config], largest: Config) -> list[Config]:
    """The sweep through the largest configuration: its prompt lengths, or its numbers of new tokens where those
    are more, shortest context first."""
    by_prompt = [c for c in configs if (c.new_tokens, c.batch) == (largest.new_tokens, largest.batch)]
    by_new = [c for c in configs if (c.prompt_tokens, c.batch) == (largest.prompt_tokens, largest.batch)]
    return sorted(by_new if len(by_new) > len(by_prompt) else by_prompt, key=_context)


def _context(config: Config) -> int:
    return config.prompt_tokens + config.new_tokens


def fits(result: BenchmarkRecord, largest: Config) -> tuple[list[Fit], str]:
    """Each strategy with a row at every length of the series: its fit on all but the longest, checked there; and
    why there are none, or which strategy has none (empty where every one has)."""
    series = _series(result.configs, largest)
    if len(series) < MIN_LENGTHS:
        return [], (
            f"crossovers need a sweep of {MIN_LENGTHS} lengths or more (-p or -n): each strategy's time is fitted "
            "on all but the longest and checked there"
        )
    *fitted, held_out = series
    found, missing = [], []
    for strategy in result.strategies:
        rows = [result.measurement(strategy, c) for c in series]
        if any(m is None for m in rows[:-1]):
            continue  # it did not run along the sweep: no curve to fit
        last = rows[-1]
        if last is None:
            missing.append(str(strategy))
            continue
        points = [(_context(c), m.median_s) for c, m in zip(fitted, rows) if m is not None]
        found.append(Fit(strategy, fit_polynomial(points), tuple(_context(c) for c in fitted), _context(held_out),
                         last.median_s))  # fmt: skip
    if missing:
        return found, f"no row at {held_out} to check the fit of {', '.join(missing)}: its crossovers not shown"
    return found, ""


def crossovers(
    fitted: list[Fit], reach: Mapping[Strategy, int]
) -> tuple[list[Crossover], tuple[int, int] | None, tuple[Strategy, ...]]:
    """Every pair of fitted strategies whose curves cross between the shortest length fitted and the longest
    checked, or the shorter of their two ``reach`` (the longest context each holds) where it is longer; the
    contexts searched; and the strategies whose fit falls to no time or less there (a noisy sweep's line can slope
    down), which cross nothing."""
    if not fitted:
        return [], None, ()
    low, held_out = fitted[0].fitted[0], fitted[0].checked_at
    found, highest, falling = [], held_out, {}
    for a, b in combinations(fitted, 2):
        high = max(held_out, min(reach.get(a.strategy, held_out), reach.get(b.strategy, held_out)))
        highest = max(highest, high)
        fallen = [fit.strategy for fit in (a, b) if lowest(fit.curve, low, high) <= 0]
        falling.update(dict.fromkeys(fallen))
        if fallen:
            continue
        at = crossing(a.curve, b.curve, low, high)
        if at is None:
            continue
        first, second = (a, b) if a.curve(low) > b.curve(low) else (b, a)
        predicted = first.curve(held_out) / second.curve(held_out)
        found.append(Crossover(first.strategy, second.strategy, at, held_out, predicted,
                               first.measured_s / second.measured_s))  # fmt: skip
    return found, (low, highest), tuple(falling)
