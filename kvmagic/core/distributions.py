"""The few sampling distributions the intervals and tests need, in pure Python (kvmagic needs no scipy).

Student's t for few pairs, and the exact null distribution of Wilcoxon's rank-sum statistic, which
makes the comparison of two runs exact for any noise shape.
"""

from __future__ import annotations

import math
from functools import lru_cache

__all__ = ["rank_sum_counts", "t_cdf", "t_quantile"]


def _incomplete_beta_fraction(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta's continued fraction, by Lentz's method; converges for x < (a+1)/(a+b+2)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return result


def _regularized_beta(a: float, b: float, x: float) -> float:
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _incomplete_beta_fraction(a, b, x) / a
    return 1 - front * _incomplete_beta_fraction(b, a, 1 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` (not necessarily whole) degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    tail = 0.5 * _regularized_beta(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t > 0 else tail


@lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t, found by bisection on :func:`t_cdf` (monotone, so it cannot miss)."""
    if not 0 < p < 1:
        raise ValueError(f"probability must lie in (0, 1), got {p}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        low, high = high, high * 2
    for _ in range(200):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        low, high = (middle, high) if t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2


@lru_cache(maxsize=256)
def rank_sum_counts(m: int, n: int) -> tuple[int, ...]:
    """How many of the C(m+n, m) orderings of two samples give each Mann-Whitney U = 0 .. m*n.

    They are the coefficients of the Gaussian binomial [m+n choose m](q), the product over i = 1..m of
    (1 - q^(n+i)) / (1 - q^i): multiplying and dividing by one factor at a time keeps every step a polynomial.
    """
    counts = [1] + [0] * (m * n)
    for i in range(1, m + 1):
        for power in range(m * n, n + i - 1, -1):
            counts[power] -= counts[power - n - i]
        for power in range(i, m * n + 1):
            counts[power] += counts[power - i]
    return tuple(counts)
