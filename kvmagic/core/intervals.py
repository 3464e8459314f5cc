"""The speed-up of interleaved pairs, its interval, and whether it changed between two runs.

Each pair (an uncached run, then a cached one, back to back) shares whatever drift hit the machine
then, so the pair's own ratio uncached/cached cancels it. The speed-up is the median of those
per-pair ratios, the one half the pairs beat, and its interval is the sign-test interval between two
order statistics of the ratios: whatever the noise's shape, heavy tails included, each pair's ratio
falls above or below the true median like a fair coin, so the interval's coverage is exact (and at
least the nominal level) with no assumption beyond independent pairs. With too few pairs for that
(fewer than 6 at 95%) the interval is Student's t on the log ratios, exact when they are normal and
conservative when a run now and then is slow; it covers the same median when the log ratios are
symmetric, as they are when the two strategies' noise is alike. ``benchmarks/coverage.py`` checks
both by simulation, against the percentile bootstrap this replaces.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence

from kvmagic.core.distributions import rank_sum_counts, t_cdf, t_quantile

__all__ = [
    "SIGNIFICANCE",
    "TOO_WIDE",
    "log_interval",
    "log_mean_interval",
    "log_speedups",
    "order_statistic_depth",
    "rounds_to_tell",
    "significant_change",
    "speedup_estimate",
    "speedup_interval",
    "too_wide",
]

SIGNIFICANCE = 0.05  # the false-alarm rate of significant_change when the speed-up has not changed
TOO_WIDE = 10.0  # an interval whose ends lie further apart than this factor tells a reader nothing to act on
_EXACT_RANK_SUM = 2_500  # m*n up to which the depth-sum p-value is counted exactly, beyond it approximated


def log_speedups(uncached: Sequence[float], cached: Sequence[float]) -> list[float]:
    """log(uncached/cached) of each pair: the drift a pair shared cancels, and noise alike in both runs is symmetric."""
    if len(uncached) != len(cached) or not uncached:
        raise ValueError("need the same, non-zero number of uncached and cached times (one of each per pair)")
    if min(uncached) <= 0 or min(cached) <= 0:
        raise ValueError("times must be positive")
    return [math.log(u / c) for u, c in zip(uncached, cached, strict=True)]


def speedup_estimate(uncached: Sequence[float], cached: Sequence[float]) -> float:
    """The median of the per-pair speed-ups (with an even count, the geometric mean of the middle two)."""
    return math.exp(statistics.median(log_speedups(uncached, cached)))


def order_statistic_depth(pairs: int, confidence: float) -> int:
    """The depth k whose k-th lowest and k-th highest of ``pairs`` values bound the median with at least
    ``confidence``, as wide as needed and no wider; 0 where no such k exists (too few pairs)."""
    _check_confidence(confidence)
    alpha, below, depth = 1 - confidence, 0, 0
    for count in range(pairs + 1):
        below += math.comb(pairs, count)
        if 2 * below > alpha * 2**pairs:
            break
        depth = count + 1
    return depth


def speedup_interval(
    uncached: Sequence[float], cached: Sequence[float], confidence: float = 0.95
) -> tuple[float, float] | None:
    """Interval for the median per-pair speed-up; None with one pair, where nothing honest can be said.

    For a fixed number of pairs only: after a data-driven number (``-r auto``) use
    :func:`kvmagic.core.sequential.auto_interval`.
    """
    found = log_interval(log_speedups(uncached, cached), confidence)
    return None if found is None else (math.exp(found[0]), math.exp(found[1]))


def too_wide(low: float, high: float) -> bool:
    """Whether an interval of a ratio is too wide to mean anything: its ends more than :data:`TOO_WIDE` apart, so that
    it holds a slow-down and a speed-up of several times at once and its estimate is a draw among them."""
    return low > 0 and high / low > TOO_WIDE


def log_interval(logs: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """:func:`speedup_interval` on the log ratios themselves: the sign-test interval from enough pairs, else
    Student's t; None with one pair."""
    depth = order_statistic_depth(len(logs), confidence)
    if depth:
        ordered = sorted(logs)
        return ordered[depth - 1], ordered[-depth]
    return log_mean_interval(logs, confidence)


def rounds_to_tell(first: Sequence[float], second: Sequence[float], most: int = 100) -> int | None:
    """About how many rounds would tell the two strategies' times apart, from the spread these rounds had: the
    fewest whose 95% interval (:func:`speedup_interval`, on rounds with this mean and standard deviation of the
    log ratio, spread as a normal sample's quantiles) leaves out 1. None where no count up to ``most`` would, or
    where two rounds are not there to show a spread. A projection, not a promise: the next rounds may vary more."""
    logs = log_speedups(first, second)
    if len(logs) < 2:
        return None
    centre, spread = statistics.fmean(logs), statistics.stdev(logs)
    normal = statistics.NormalDist(centre, spread) if spread > 0 else None
    for count in range(len(logs) + 1, most + 1):
        sample = [normal.inv_cdf((i + 0.5) / count) for i in range(count)] if normal else [centre] * count
        found = log_interval(sample)
        if found is not None and not found[0] <= 0 <= found[1]:
            return count
    return None


def log_mean_interval(logs: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Student's t interval of the mean of ``logs`` (log ratios, so their exponents bound a geometric mean);
    None below 2 values."""
    if len(logs) < 2:
        return None
    centre = statistics.fmean(logs)
    half = t_quantile((1 + confidence) / 2, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return centre - half, centre + half


def significant_change(
    now: Sequence[tuple[float, float]], was: Sequence[tuple[float, float]], alpha: float = SIGNIFICANCE
) -> bool | None:
    """Whether the speed-up moved between two runs, given each run's (uncached, cached) pairs.

    False-alarm rate: at most ``alpha`` (5%) when the speed-up has not changed. Where an exact test
    can reach ``alpha`` it is Wilcoxon's rank-sum test of the two runs' per-pair log speed-ups, whose
    false-alarm rate is at most ``alpha`` whatever the noise's shape, as long as it is alike in both
    runs (and close to it when one run is noisier: the runs have similar pair counts and symmetric
    log ratios). With fewer pairs (2 and 2, 2 and 3 ... 3 and 4) it is Welch's t-test on the log
    speed-ups: ``alpha`` under lognormal noise, less when a run now and then is slow. None when a
    run has a single pair, which says nothing about its own noise.
    """
    _check_confidence(1 - alpha)
    x = log_speedups([u for u, _ in now], [c for _, c in now])
    y = log_speedups([u for u, _ in was], [c for _, c in was])
    if min(len(x), len(y)) < 2:
        return None
    if 2 / math.comb(len(x) + len(y), len(x)) <= alpha:
        return _rank_sum_p(x, y) <= alpha
    return _welch_p(x, y) <= alpha


def _rank_sum_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of Mann-Whitney's U: exact for small samples, normal with continuity correction beyond."""
    m, n = len(x), len(y)
    ordered = sorted((value, side) for side, values in enumerate((x, y)) for value in values)
    ranks = _midranks([value for value, _ in ordered])
    u = sum(rank for rank, (_, side) in zip(ranks, ordered, strict=True) if side == 0) - m * (m + 1) / 2
    if m * n <= _EXACT_RANK_SUM:
        counts = rank_sum_counts(m, n)
        total = math.comb(m + n, m)
        low = sum(counts[: math.floor(u) + 1]) / total
        high = sum(counts[math.ceil(u) :]) / total
        return min(1.0, 2 * min(low, high))
    spread = math.sqrt(m * n * (m + n + 1) / 12)
    z = max(0.0, abs(u - m * n / 2) - 0.5) / spread
    return math.erfc(z / math.sqrt(2))


def _midranks(ordered: Sequence[float]) -> list[float]:
    """1-based ranks of sorted values, tied values sharing the mean of their ranks."""
    ranks: list[float] = []
    for _, tied in itertools.groupby(ordered):
        count = len(list(tied))
        ranks += [len(ranks) + (count + 1) / 2] * count
    return ranks


def _welch_p(x: Sequence[float], y: Sequence[float]) -> float:
    vx, vy = statistics.variance(x) / len(x), statistics.variance(y) / len(y)
    if vx + vy == 0:
        return 1.0 if statistics.fmean(x) == statistics.fmean(y) else 0.0
    t = (statistics.fmean(x) - statistics.fmean(y)) / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    return 2 * t_cdf(-abs(t), df)


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
