"""The trade-off frontier: which rows no other row beats on speed, KV bytes and quality at once.

A row beats another when it is at least as good on all three and better on one: no more seconds (a median),
no more KV bytes, no more KL from the full cache. A figure not known (quality not read: ``--no-quality``, or a
quality run that could not run) is not guessed: where neither row has it, the two tie on it; where only the
beaten row lacks it, the other is at least as good only at the best there is (KL 0, no bytes held), and never
better; a row that lacks it is at least as good as none that has it. So a row with an unknown figure leaves the
frontier only to a row that beats it whatever that figure is. Medians decide speed, except between two rows whose
runs cannot tell their times apart (``same_speed``, from the rounds they ran side by side): they tie on it, so
that a row leaves the frontier only to one beyond its noise or better on another figure, not to another run's
luck. KV bytes within :data:`BYTES_TIE` of each other tie:
a static cache holds a few bookkeeping bytes a layer beside its keys and values, which trade nothing away.
Pure Python, checkable by hand.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

__all__ = ["BYTES_TIE", "Point", "beats", "better", "on_frontier"]

BYTES_TIE = 0.01  # a share of the larger: KV bytes this close are the same cache


@dataclass(frozen=True)
class Point:
    """One row's three figures, each lower better; None where it is not known."""

    seconds: float
    kv_bytes: float | None
    kl_nats: float | None

    def figures(self) -> tuple[float | None, ...]:
        return (self.seconds, self.kv_bytes, self.kl_nats)


_BEST = (None, 0.0, 0.0)  # the best a figure can be: none for seconds, no bytes held, KL 0
_TIES = (0.0, BYTES_TIE, 0.0)  # how close two figures tie, as a share of the larger


def _no_worse(mine: float | None, theirs: float | None, best: float | None, tie: float) -> bool:
    if mine is None:
        return theirs is None
    if theirs is None:
        return mine == best
    return mine <= theirs + tie * max(abs(mine), abs(theirs))


def _better(mine: float | None, theirs: float | None, tie: float) -> bool:
    return mine is not None and theirs is not None and mine < theirs - tie * max(abs(mine), abs(theirs))


def _figures(a: Point, b: Point, same_speed: bool) -> list[tuple[float | None, float | None, float | None, float]]:
    """Each figure of ``a`` and of ``b``, with its best and its tie; times within noise as two equal ones."""
    figures = list(zip(a.figures(), b.figures(), _BEST, _TIES))
    return [(0.0, 0.0, None, 0.0), *figures[1:]] if same_speed else figures


def beats(a: Point, b: Point, same_speed: bool = False) -> bool:
    """``a`` is no worse than ``b`` on every figure and better on one (unknown figures as the module says)."""
    figures = _figures(a, b, same_speed)
    return all(_no_worse(mine, theirs, best, tie) for mine, theirs, best, tie in figures) and any(
        _better(mine, theirs, tie) for mine, theirs, _, tie in figures
    )


def better(a: Point, b: Point, same_speed: bool = False) -> tuple[bool | None, ...]:
    """For each figure, whether ``a`` is better than ``b`` there (ties as :func:`beats` counts them); None where
    either lacks it. Where ``a`` beats ``b``, False is a tie: what the beaten row did not lose."""
    return tuple(
        None if mine is None or theirs is None else _better(mine, theirs, tie)
        for mine, theirs, _, tie in _figures(a, b, same_speed)
    )


def on_frontier(
    points: Sequence[Point], close: Collection[frozenset[int]] = (), undecided: Collection[frozenset[int]] = ()
) -> list[bool]:
    """For each point, whether no other point beats it; ``close`` holds the pairs of indices whose times are within
    noise of each other, ``undecided`` the pairs neither of which beats the other, whatever their figures."""
    return [
        not any(
            beats(other, point, frozenset((i, j)) in close)
            for j, other in enumerate(points)
            if j != i and frozenset((i, j)) not in undecided
        )
        for i, point in enumerate(points)
    ]
