"""Do kvmagic's intervals and its `significant` say what they claim? Simulated with a known speed-up.

Run: ``PYTHONPATH=. python benchmarks/coverage.py [--trials 1000] [--resamples 1000]``.

Prints three markdown tables for ``benchmarks/README.md``, each from seeded simulations of interleaved
pairs whose true speed-up is 2.0 (``kvmagic.core.simulate``: lognormal drift shared by a pair's two
runs and noise of each run, 5% each; ``heavy`` adds a 1-in-10 chance that a run is 2-3x slower):

1. coverage of each 95% interval method at a fixed number of pairs, and its median reach;
2. the whole ``-r auto`` loop (pairs one at a time, checked from 5 pairs on, 60 pairs standing in for
   the time cap): coverage of the interval reported when it stopped, and the mean pairs it took;
3. the false-alarm rate of ``significant`` between two runs with the same true speed-up, and how often
   it notices a true 10% change.

The methods kvmagic no longer uses live here, so that the comparison can be rerun.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from statistics import median
from typing import Any

from benchmarks import simulate as sim
from kvmagic.core import intervals, sequential
from kvmagic.core.distributions import t_quantile
from kvmagic.core.stats import percentile, relative_half_width

PAIRS = (3, 5, 10, 30)
TARGETS = (0.05, 0.10)
RUN_PAIRS = (2, 3, 4, 5, 10, 20, 30)
CAP = 60
Interval = Callable[[Sequence[float], Sequence[float]], "tuple[float, float] | None"]


def old_bootstrap(resamples: int) -> Interval:
    """kvmagic's first interval: percentile bootstrap of the ratio of medians, resampling pairs (seeded)."""

    def interval(uncached: Sequence[float], cached: Sequence[float]) -> tuple[float, float]:
        rng, count, ratios = random.Random(0), len(uncached), []
        for _ in range(resamples):
            picks = [rng.randrange(count) for _ in range(count)]
            ratios.append(median([uncached[i] for i in picks]) / median([cached[i] for i in picks]))
        return percentile(ratios, 2.5), percentile(ratios, 97.5)

    return interval


def t_log(uncached: Sequence[float], cached: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Student's t on the per-pair log speed-ups, at every count: an interval for their geometric mean."""
    logs = intervals.log_speedups(uncached, cached)
    if len(logs) < 2:
        return None
    centre = statistics.fmean(logs)
    half = t_quantile((1 + confidence) / 2, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(centre - half), math.exp(centre + half)


@lru_cache(maxsize=64)
def _signed_rank_cut(pairs: int, alpha: float) -> int:
    counts = [1]
    for rank in range(1, pairs + 1):
        grown = counts + [0] * rank
        for total in range(rank, len(grown)):
            grown[total] += counts[total - rank]
        counts = grown
    below, cut = 0, 0
    for statistic, ways in enumerate(counts):
        if 2 * (below + ways) > alpha * 2**pairs:
            break
        below, cut = below + ways, statistic + 1
    return cut


def signed_rank(uncached: Sequence[float], cached: Sequence[float]) -> tuple[float, float] | None:
    """Wilcoxon's signed-rank interval over the pairwise means of log speed-ups (Hodges-Lehmann); from 6 pairs."""
    logs = intervals.log_speedups(uncached, cached)
    cut = _signed_rank_cut(len(logs), 0.05)
    if not cut:
        return None
    walsh = sorted((a + b) / 2 for i, a in enumerate(logs) for b in logs[i:])
    return math.exp(walsh[cut - 1]), math.exp(walsh[-cut])


def sign_only(uncached: Sequence[float], cached: Sequence[float]) -> tuple[float, float] | None:
    """The sign-test interval alone, with nothing below the 6 pairs it needs."""
    depth = intervals.order_statistic_depth(len(uncached), 0.95)
    return intervals.speedup_interval(uncached, cached) if depth else None


def _grid(what: str, rows: dict[str, Any], cell: Callable[[Any, str, int], str]) -> list[str]:
    """A Markdown table: one row per entry of ``rows``, one column per noise model and number of pairs."""
    head = [f"{noise} {pairs}" for noise in sim.NOISE_MODELS for pairs in PAIRS]
    lines = [f"| {what} | " + " | ".join(head) + " |", "| --- |" + " ---: |" * len(head)]
    for name, row in rows.items():
        cells = [cell(row, noise, pairs) for noise in sim.NOISE_MODELS for pairs in PAIRS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def coverage_table(trials: int, resamples: int) -> list[str]:
    methods: dict[str, Interval] = {
        "percentile bootstrap of the ratio of medians (old)": old_bootstrap(resamples),
        "t on log ratios": t_log,
        "signed-rank (Hodges-Lehmann), 6+ pairs": signed_rank,
        "sign test (median), 6+ pairs": sign_only,
        "**sign test, t below 6 pairs (kvmagic)**": intervals.speedup_interval,
    }

    def cell(method: Interval, noise: str, pairs: int) -> str:
        tally = sim.coverage(method, pairs, noise, trials)
        return f"{tally.rate:.1%} (±{math.expm1(tally.half_width):.0%})" if tally.shown else "none"

    return _grid("method", methods, cell)


def estimate_table(trials: int) -> list[str]:
    """How far each headline estimate typically lands from the truth: root mean square of its log error."""

    def median_ratio(uncached: Sequence[float], cached: Sequence[float]) -> float:
        return median(uncached) / median(cached)

    def geometric_mean(uncached: Sequence[float], cached: Sequence[float]) -> float:
        return math.exp(statistics.fmean(intervals.log_speedups(uncached, cached)))

    estimates = {
        "ratio of the medians (the table's `speedup`)": median_ratio,
        "geometric mean of the pair speed-ups": geometric_mean,
        "**median of the pair speed-ups (speedup_estimate)**": intervals.speedup_estimate,
    }

    def cell(estimate: Callable[..., float], noise: str, pairs: int) -> str:
        rng = random.Random(f"estimate:{noise}:{pairs}")
        errors = [math.log(estimate(*sim.draw_pairs(rng, noise, pairs)) / sim.TRUE_SPEEDUP) for _ in range(trials)]
        return f"{math.sqrt(statistics.fmean(e * e for e in errors)):.1%}"

    return _grid("estimate", estimates, cell)


def auto_rules(resamples: int, target: float) -> dict[str, tuple[Callable[..., bool], Interval]]:
    old = old_bootstrap(resamples)

    def old_stop(uncached: Sequence[float], cached: Sequence[float]) -> bool:
        return relative_half_width(median(uncached) / median(cached), *old(uncached, cached)) <= target

    def fixed_stop(uncached: Sequence[float], cached: Sequence[float], confidence: float = 0.95) -> bool:
        found = intervals.speedup_interval(uncached, cached, confidence)
        estimate = intervals.speedup_estimate(uncached, cached)
        return found is not None and relative_half_width(estimate, *found) <= target

    return {
        "old: bootstrap 95% within target, report it": (old_stop, old),
        "new fixed-count 95% within target, report it": (fixed_stop, intervals.speedup_interval),
        "fixed-count 99% within target, report the 95%": (
            lambda u, c: fixed_stop(u, c, 0.99),
            intervals.speedup_interval,
        ),
        "**anytime interval within target, report it (kvmagic)**": (
            lambda u, c: sequential.auto_should_stop(u, c, target),
            sequential.auto_interval,
        ),
    }


def auto_table(trials: int, resamples: int) -> list[str]:
    head = [f"{noise} ±{target:.0%}" for noise in sim.NOISE_MODELS for target in TARGETS]
    rows: dict[str, list[str]] = {}
    for noise in sim.NOISE_MODELS:
        for target in TARGETS:
            for name, (stop, report) in auto_rules(resamples, target).items():
                tally = sim.auto_coverage(stop, report, noise, trials, cap=CAP)
                rows.setdefault(name, []).append(f"{tally.rate:.1%}, {tally.pairs:.0f} pairs")
    lines = ["| rule | " + " | ".join(head) + " |", "| --- |" + " ---: |" * len(head)]
    return lines + [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows.items()]


def ranges_apart(now: list[tuple[float, float]], was: list[tuple[float, float]]) -> bool | None:
    """kvmagic's first rule: the two runs' ranges of per-pair speed-ups do not overlap."""
    if min(len(now), len(was)) < 2:
        return None
    ours, theirs = [u / c for u, c in now], [u / c for u, c in was]
    return min(ours) > max(theirs) or max(ours) < min(theirs)


def alarm_table(trials: int) -> list[str]:
    rules = {
        "ranges do not overlap (old)": ranges_apart,
        "**rank-sum, Welch t below (kvmagic)**": intervals.significant_change,
    }
    cases = [("paired", "paired", 1.0), ("heavy", "heavy", 1.0), ("heavy", "paired", 1.0), ("paired", "paired", 1.1)]
    head = [f"r={pairs}" for pairs in RUN_PAIRS]
    lines = [
        "| rule | runs (now, was) | change | " + " | ".join(head) + " |",
        "| --- | --- | ---: |" + " ---: |" * len(head),
    ]
    for name, rule in rules.items():
        for now, was, change in cases:
            cells = [f"{sim.alarms(rule, pairs, (now, was), trials, change=change).rate:.1%}" for pairs in RUN_PAIRS]
            lines.append(f"| {name} | {now}, {was} | {change - 1:+.0%} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000, help="simulated runs per cell")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples of the old method")
    args = parser.parse_args()
    low, high = sim.binomial_bounds(args.trials, 0.95)
    print(f"{args.trials} trials per cell; a method whose true coverage is 95% shows {low / args.trials:.1%} to "
          f"{high / args.trials:.1%} (each side 1 in 1000)\n")  # fmt: skip
    for title, table in (
        ("Headline estimates: root mean square error (of the log)", lambda: estimate_table(args.trials)),
        (
            "95% intervals at a fixed number of pairs: coverage (median reach)",
            lambda: coverage_table(args.trials, args.resamples),
        ),
        (
            f"-r auto, {CAP}-pair cap: coverage of the interval reported, mean pairs",
            lambda: auto_table(args.trials, args.resamples),
        ),
        ("significant: how often it fires", lambda: alarm_table(args.trials)),
    ):
        started = time.perf_counter()
        print(f"### {title}\n", *table(), sep="\n")
        print(f"\n({time.perf_counter() - started:.0f} s)\n")


if __name__ == "__main__":
    main()
