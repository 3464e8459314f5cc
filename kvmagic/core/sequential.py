"""``-r auto``: when to stop taking pairs, and an interval that stays honest whenever that is.

Stopping at the first pair whose 95% interval looks narrow enough picks the moment the pairs
happened to agree, and that interval covers less than 95%. So the rule here looks at an interval
that holds at every number of pairs at once: the per-pair speed-ups fall above or below their median
like fair coins, whatever the noise's shape, and the depths used at each count are set, by following
the coins' walk exactly, so that the walk leaves them at any count up to ``AUTO_MAX_PAIRS`` with
probability at most 1 - confidence. Whatever stops the loop (this rule, the time cap, the pair cap),
the interval reported then covers the median speed-up with at least the nominal confidence.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from functools import lru_cache

from kvmagic.core.intervals import log_speedups, speedup_interval
from kvmagic.core.stats import relative_half_width

__all__ = ["AUTO_MAX_PAIRS", "anytime_depths", "auto_interval", "auto_should_stop", "first_stop"]

AUTO_MAX_PAIRS = 100  # the horizon the depths are set for; more would widen every interval before it


def _escape_chance(depths: Sequence[int]) -> float:
    """The chance that a fair coin's count of heads after n tosses leaves [k_n, n - k_n] at some n (k_n > 0)."""
    chances, escaped = [1.0], 0.0
    for tosses in range(1, len(depths)):
        chances = [(chances[heads] if heads < tosses else 0.0) / 2 + (chances[heads - 1] if heads else 0.0) / 2
                   for heads in range(tosses + 1)]  # fmt: skip
        depth = depths[tosses]
        if depth:
            escaped += sum(chances[:depth]) + sum(chances[tosses - depth + 1 :])
            chances = [0.0] * depth + chances[depth : tosses - depth + 1] + [0.0] * depth
    return escaped


@lru_cache(maxsize=16)
def anytime_depths(max_pairs: int = AUTO_MAX_PAIRS, confidence: float = 0.95) -> tuple[int, ...]:
    """k_n for n = 0 .. ``max_pairs``: the k-th lowest and highest of n per-pair speed-ups bound their median
    at every n together with at least ``confidence`` (0: no interval yet at n).

    The depths follow n/2 - c*sqrt(n), the walk's own spread; c is the least (found by bisection) whose
    escape chance is within 1 - confidence.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")

    def depths(c: float) -> tuple[int, ...]:
        return tuple(max(0, math.floor(n / 2 - c * math.sqrt(n))) for n in range(max_pairs + 1))

    low, high = 0.0, math.sqrt(max_pairs) / 2 + 1  # high leaves every depth at 0: no escape
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (low, middle) if _escape_chance(depths(middle)) <= 1 - confidence else (middle, high)
    return depths(high)


def first_stop(max_pairs: int = AUTO_MAX_PAIRS, confidence: float = 0.95) -> int:
    """The fewest pairs at which :func:`auto_should_stop` can stop on precision (10 at 95%)."""
    return next(n for n, depth in enumerate(anytime_depths(max_pairs, confidence)) if depth)


def _anytime(logs: Sequence[float], max_pairs: int, confidence: float) -> tuple[float, float] | None:
    if len(logs) > max_pairs:
        raise ValueError(f"the depths hold up to {max_pairs} pairs, got {len(logs)}")
    depth = anytime_depths(max_pairs, confidence)[len(logs)]
    if not depth:
        return None
    ordered = sorted(logs)
    return math.exp(ordered[depth - 1]), math.exp(ordered[-depth])


def auto_interval(
    uncached: Sequence[float],
    cached: Sequence[float],
    confidence: float = 0.95,
    max_pairs: int = AUTO_MAX_PAIRS,
) -> tuple[float, float] | None:
    """The interval to report for the median speed-up after ``-r auto`` stopped, whatever stopped it.

    Before the first count with an anytime interval (10 pairs at 95%), :func:`auto_should_stop` cannot
    have stopped the loop; only the time cap can, which ignores the ratios, so the fixed-count
    interval is honest there.
    """
    logs = log_speedups(uncached, cached)
    return _anytime(logs, max_pairs, confidence) or speedup_interval(uncached, cached, confidence)


def auto_should_stop(
    uncached: Sequence[float],
    cached: Sequence[float],
    target: float,
    confidence: float = 0.95,
    max_pairs: int = AUTO_MAX_PAIRS,
) -> bool:
    """Whether to stop after these pairs: the anytime interval reaches no further than ``target`` (a
    fraction) from the median speed-up on either side, or ``max_pairs`` pairs have been taken."""
    logs = log_speedups(uncached, cached)
    if len(logs) >= max_pairs:
        return True
    interval = _anytime(logs, max_pairs, confidence)
    if interval is None:
        return False
    return relative_half_width(math.exp(statistics.median(logs)), *interval) <= target
