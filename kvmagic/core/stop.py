"""When to stop taking rounds: fixed repeats or ``auto``, two rules for one measuring loop.

As ``torch.utils.benchmark``'s ``adaptive_autorange`` hands a ``stop_hook`` to one generic loop,
the runner asks a rule after every round whether it has enough; the rule sees only the times so
far and the seconds spent, so each can be checked on made-up numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kvmagic.core import stats
from kvmagic.core.spec import CACHED, MIN_AUTO_PAIRS, UNCACHED, BenchSpec

__all__ = ["FixedRounds", "StopRule", "UntilPrecise", "enough_pairs", "stop_rule"]


class StopRule(Protocol):
    def done(self, rounds: int, elapsed: float, times: Mapping[str, Sequence[float]]) -> bool:
        """Whether ``rounds`` rounds, taking ``elapsed`` seconds with these times per condition, are enough."""
        ...


@dataclass(frozen=True)
class FixedRounds:
    """A fixed number of rounds (``repeat=N``)."""

    rounds: int

    def done(self, rounds: int, elapsed: float, times: Mapping[str, Sequence[float]]) -> bool:
        return rounds >= self.rounds


@dataclass(frozen=True)
class UntilPrecise:
    """``repeat="auto"``: at least ``minimum`` pairs, then until the speed-up is known to ``target``
    (a fraction) or ``cap`` seconds have passed."""

    target: float
    cap: float
    minimum: int = MIN_AUTO_PAIRS

    def done(self, rounds: int, elapsed: float, times: Mapping[str, Sequence[float]]) -> bool:
        if rounds < self.minimum:
            return False
        return elapsed >= self.cap or enough_pairs(list(times[UNCACHED]), list(times[CACHED]), self.target)


def enough_pairs(uncached: list[float], cached: list[float], target: float) -> bool:
    """Whether the 95% bootstrap interval of the speed-up lies within ``target`` (a fraction) of it."""
    speedup = stats.median(uncached) / stats.median(cached)
    low, high = stats.bootstrap_ratio_ci(uncached, cached)
    return stats.relative_half_width(speedup, low, high) <= target


def stop_rule(spec: BenchSpec) -> StopRule:
    """The rule ``spec.repeat`` asks for."""
    if spec.repeat == "auto":
        return UntilPrecise(spec.ci_target, spec.auto_cap)
    return FixedRounds(spec.repeat)
