"""Summary statistics for a handful of timings: pure Python, so every number can be checked by hand."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

__all__ = [
    "SPREAD_WARNING",
    "bootstrap_ratio_ci",
    "iqr",
    "median",
    "percentile",
    "relative_half_width",
    "relative_spread",
]

SPREAD_WARNING = 0.10  # IQR/median past which timings are too noisy to trust (as torch.utils.benchmark warns)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must lie in [0, 100], got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def iqr(values: Sequence[float]) -> float:
    """Interquartile range: the width of the middle half, robust to one slow outlier."""
    return percentile(values, 75) - percentile(values, 25)


def relative_spread(values: Sequence[float]) -> float:
    """IQR over median: how much the timings disagree, as a fraction of the typical one."""
    return iqr(values) / median(values)


def bootstrap_ratio_ci(
    numerators: Sequence[float],
    denominators: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap interval for ``median(numerators) / median(denominators)``.

    The values are paired (run i of each condition ran back to back), so pairs are resampled
    together and drift that hit both members of a pair stays matched. The RNG is seeded:
    the same timings always give the same interval.
    """
    if len(numerators) != len(denominators) or not numerators:
        raise ValueError("need the same, non-zero number of numerators and denominators")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    rng = random.Random(seed)
    count = len(numerators)
    ratios = []
    for _ in range(resamples):
        picks = [rng.randrange(count) for _ in range(count)]
        ratios.append(median([numerators[i] for i in picks]) / median([denominators[i] for i in picks]))
    tail = (1 - confidence) / 2 * 100
    return percentile(ratios, tail), percentile(ratios, 100 - tail)


def relative_half_width(estimate: float, low: float, high: float) -> float:
    """How far an interval reaches from its estimate, as a fraction of it (the wider side counts)."""
    return max(estimate - low, high - estimate) / estimate
