"""When to stop taking rounds: fixed repeats or ``auto``, two rules for one measuring loop.

As ``torch.utils.benchmark``'s ``adaptive_autorange`` hands a ``stop_hook`` to one generic loop,
the runner asks a rule after every round whether it has enough; the rule sees only the times so
far and the seconds spent, so each can be checked on made-up numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kvmagic.core import sequential
from kvmagic.core.spec import MIN_AUTO_PAIRS, BenchSpec
from kvmagic.core.strategy import PAIR, Strategy

__all__ = ["FixedRounds", "StopRule", "UntilPrecise", "stop_rule"]


class StopRule(Protocol):
    @property
    def sequential(self) -> bool:
        """Whether the number of rounds depends on the times: then only an anytime interval is honest."""
        ...

    def done(self, rounds: int, elapsed: float, times: Mapping[Strategy, Sequence[float]]) -> bool:
        """Whether ``rounds`` rounds, taking ``elapsed`` seconds with these times per strategy, are enough."""
        ...


@dataclass(frozen=True)
class FixedRounds:
    """A fixed number of rounds (``repeat=N``)."""

    rounds: int
    sequential = False

    def done(self, rounds: int, elapsed: float, times: Mapping[Strategy, Sequence[float]]) -> bool:
        return rounds >= self.rounds


@dataclass(frozen=True)
class UntilPrecise:
    """``repeat="auto"``: at least ``minimum`` pairs, then until the speed-up's anytime 95% interval
    reaches no further than ``target`` (a fraction) from it, or ``cap`` seconds have passed."""

    target: float
    cap: float
    minimum: int = MIN_AUTO_PAIRS
    sequential = True

    def done(self, rounds: int, elapsed: float, times: Mapping[Strategy, Sequence[float]]) -> bool:
        """The cap first (it ignores the times), then the anytime interval's reach (see :mod:`.sequential`)."""
        if rounds < self.minimum:
            return False
        return elapsed >= self.cap or sequential.auto_should_stop(times[PAIR[0]], times[PAIR[1]], self.target)


def stop_rule(spec: BenchSpec) -> StopRule:
    """The rule ``spec.repeat`` asks for."""
    if spec.repeat == "auto":
        return UntilPrecise(spec.ci_target, spec.auto_cap)
    return FixedRounds(spec.repeat)
