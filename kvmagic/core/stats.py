"""Summary statistics for a handful of timings: pure Python, so every number can be checked by hand."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "SPREAD_WARNING",
    "iqr",
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


def iqr(values: Sequence[float]) -> float:
    """Interquartile range: the width of the middle half, robust to one slow outlier."""
    return percentile(values, 75) - percentile(values, 25)


def relative_spread(values: Sequence[float]) -> float:
    """IQR over median: how much the timings disagree, as a fraction of the typical one."""
    return iqr(values) / percentile(values, 50)


def relative_half_width(estimate: float, low: float, high: float) -> float:
    """How far an interval reaches from its estimate, as a fraction of it (the wider side counts)."""
    return max(estimate - low, high - estimate) / estimate
