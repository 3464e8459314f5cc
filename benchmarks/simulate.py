"""Seeded simulations with a known speed-up: how often an interval covers it, how often a test cries wolf.

An interval's label is a claim about repeated use; these check it where the truth is known. Two noise
models, both multiplicative (lognormal) as timings are: ``paired``, where each interleaved pair's two
runs share a drift and each run has its own noise; and ``heavy``, the same with a run now and then
2-3 times slower, as a busy machine or a garbage-collection pause makes. The same seed gives the same
numbers on every machine, so a test can assert on them.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "DRIFT",
    "JITTER",
    "NOISE_MODELS",
    "SLOW_CHANCE",
    "SLOW_FACTOR",
    "TRUE_SPEEDUP",
    "Tally",
    "alarms",
    "auto_coverage",
    "binomial_bounds",
    "coverage",
    "draw_pairs",
]

NOISE_MODELS = ("paired", "heavy")
TRUE_SPEEDUP = 2.0
DRIFT = 0.05  # sigma of the log drift a pair's two runs share
JITTER = 0.05  # sigma of each run's own log noise
SLOW_CHANCE = 0.1  # heavy: the chance that a run is slowed down
SLOW_FACTOR = (2.0, 3.0)  # heavy: how much, uniformly between these

Times = Sequence[float]
Interval = Callable[[Times, Times], "tuple[float, float] | None"]


@dataclass(frozen=True)
class Tally:
    """What a simulation counted: ``hits`` of ``shown`` trials (of ``trials``) covered, or raised an alarm."""

    trials: int
    shown: int
    hits: int
    pairs: float = math.nan  # mean pairs taken, where the number was not fixed
    half_width: float = math.nan  # median of the intervals' log(high/low)/2: about their relative reach

    @property
    def rate(self) -> float:
        return self.hits / self.shown if self.shown else math.nan


def draw_pairs(rng: random.Random, noise: str, pairs: int, speedup: float = TRUE_SPEEDUP) -> tuple[list, list]:
    """``pairs`` interleaved (uncached, cached) times whose true speed-up is ``speedup`` (cached takes 1 s)."""
    if noise not in NOISE_MODELS:
        raise ValueError(f"noise must be one of {NOISE_MODELS}, got {noise!r}")
    uncached, cached = [], []
    for _ in range(pairs):
        drift = rng.gauss(0, DRIFT)
        times = [scale * math.exp(drift + rng.gauss(0, JITTER)) for scale in (speedup, 1.0)]
        if noise == "heavy":
            times = [t * rng.uniform(*SLOW_FACTOR) if rng.random() < SLOW_CHANCE else t for t in times]
        uncached.append(times[0])
        cached.append(times[1])
    return uncached, cached


def _tally(intervals: list[tuple[float, float] | None], truth: float, pairs: float = math.nan) -> Tally:
    shown = [i for i in intervals if i is not None]
    widths = [math.log(high / low) / 2 for low, high in shown]
    return Tally(
        trials=len(intervals),
        shown=len(shown),
        hits=sum(low <= truth <= high for low, high in shown),
        pairs=pairs,
        half_width=statistics.median(widths) if widths else math.nan,
    )


def coverage(interval: Interval, pairs: int, noise: str, trials: int, seed: int = 0) -> Tally:
    """How often ``interval`` over ``pairs`` pairs covers the true speed-up."""
    rng = random.Random(f"coverage:{seed}:{noise}:{pairs}")
    return _tally([interval(*draw_pairs(rng, noise, pairs)) for _ in range(trials)], TRUE_SPEEDUP)


def auto_coverage(
    should_stop: Callable[[Times, Times], bool],
    interval: Interval,
    noise: str,
    trials: int,
    *,
    cap: int,
    min_pairs: int = 5,
    seed: int = 0,
) -> Tally:
    """The whole ``-r auto`` loop: pairs one at a time, ``should_stop`` asked after each from ``min_pairs``
    on, ``cap`` pairs standing in for the time cap; then how often the ``interval`` reported covers."""
    rng = random.Random(f"auto:{seed}:{noise}:{cap}")
    reported, taken = [], []
    for _ in range(trials):
        uncached, cached = draw_pairs(rng, noise, min_pairs)
        while len(uncached) < cap and not should_stop(uncached, cached):
            more = draw_pairs(rng, noise, 1)
            uncached += more[0]
            cached += more[1]
        reported.append(interval(uncached, cached))
        taken.append(len(uncached))
    return _tally(reported, TRUE_SPEEDUP, statistics.fmean(taken))


def alarms(
    decide: Callable[[list, list], bool | None],
    pairs: int,
    noise: tuple[str, str],
    trials: int,
    *,
    change: float = 1.0,
    seed: int = 0,
) -> Tally:
    """How often ``decide(now, was)`` calls a change between two runs of ``pairs`` pairs each, ``noise``
    naming each run's noise model and ``change`` the true speed-up's ratio between them: with no change
    (1.0) the alarms are false ones. ``shown`` counts the trials decided, ``hits`` the alarms."""
    rng = random.Random(f"alarms:{seed}:{noise}:{pairs}:{change}")
    decisions = []
    for _ in range(trials):
        now = list(zip(*draw_pairs(rng, noise[0], pairs, TRUE_SPEEDUP * change), strict=True))
        was = list(zip(*draw_pairs(rng, noise[1], pairs), strict=True))
        decisions.append(decide(now, was))
    made = [d for d in decisions if d is not None]
    return Tally(trials=trials, shown=len(made), hits=sum(made))


def binomial_bounds(trials: int, p: float, tail: float = 0.001) -> tuple[int, int]:
    """Counts (low, high) that a binomial(trials, p) falls below, or above, with chance at most ``tail`` each."""
    log_choose = [math.lgamma(trials + 1) - math.lgamma(k + 1) - math.lgamma(trials - k + 1) for k in range(trials + 1)]
    chances = [math.exp(c + k * math.log(p) + (trials - k) * math.log1p(-p)) for k, c in enumerate(log_choose)]
    low, below = 0, chances[0]
    while below <= tail:
        low += 1
        below += chances[low]
    high, above = trials, chances[trials]
    while above <= tail:
        high -= 1
        above += chances[high]
    return low, high
