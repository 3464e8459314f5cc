"""The intervals and the significance test, checked where the truth is known: seeded simulations.

Each assertion allows the simulation's own error: a count that a binomial with the claimed rate
would fall outside of once in a thousand. The seeds are fixed, so the verdicts never change from run
to run; the allowance is what keeps a change of seed from turning an honest method into a failure.
benchmarks/coverage.py prints the same simulations with more trials, beside the methods they replaced.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest

from benchmarks import simulate as sim
from kvmagic.core import intervals, sequential

TRIALS = 400


def _exact_coverage(pairs: int) -> float:
    """What the order-statistic interval covers by construction: 1 - 2 P(Bin(n, 1/2) < k)."""
    depth = intervals.order_statistic_depth(pairs, 0.95)
    return 1 - 2 * sum(math.comb(pairs, k) for k in range(depth)) / 2**pairs


def test_simulated_pairs_have_the_stated_truth_and_noise() -> None:
    uncached, cached = sim.draw_pairs(random.Random(1), "paired", 4000)
    logs = intervals.log_speedups(uncached, cached)
    assert statistics.median(logs) == pytest.approx(math.log(sim.TRUE_SPEEDUP), abs=0.01)
    assert statistics.stdev(logs) == pytest.approx(math.sqrt(2) * sim.JITTER, rel=0.05)  # the drift cancels
    assert statistics.stdev(math.log(c) for c in cached) == pytest.approx(math.hypot(sim.DRIFT, sim.JITTER), rel=0.05)
    uncached, cached = sim.draw_pairs(random.Random(1), "heavy", 4000)
    slowed = sum(c > 1.6 for c in cached) / len(cached)  # 1.6 s is past 9 sigma of the lognormal noise
    assert slowed == pytest.approx(sim.SLOW_CHANCE, abs=0.015)
    assert sim.draw_pairs(random.Random(2), "heavy", 3) == sim.draw_pairs(random.Random(2), "heavy", 3)


@pytest.mark.parametrize("noise", sim.NOISE_MODELS)
@pytest.mark.parametrize("pairs", [3, 5, 10, 30])
def test_the_interval_holds_its_coverage(noise: str, pairs: int) -> None:
    tally = sim.coverage(intervals.speedup_interval, pairs, noise, TRIALS)
    assert tally.shown == TRIALS
    if intervals.order_statistic_depth(pairs, 0.95):
        # distribution-free: the coverage is what the depths make it, whatever the noise
        low, high = sim.binomial_bounds(TRIALS, _exact_coverage(pairs))
    else:
        # Student's t: exact for lognormal noise, conservative (above 95%) when a run now and then is slow
        low, high = sim.binomial_bounds(TRIALS, 0.95)
        high = high if noise == "paired" else TRIALS
    assert low <= tally.hits <= high, tally


@pytest.mark.parametrize("noise", sim.NOISE_MODELS)
@pytest.mark.parametrize("cap", [8, 60])
def test_auto_reports_an_interval_that_holds_whenever_it_stopped(noise: str, cap: int) -> None:
    # a cap of 8 pairs always comes before the rule can stop (10 pairs): the fixed-count interval is reported
    tally = sim.auto_coverage(
        lambda u, c: sequential.auto_should_stop(u, c, 0.05), sequential.auto_interval, noise, TRIALS, cap=cap
    )
    assert tally.shown == TRIALS and tally.hits >= sim.binomial_bounds(TRIALS, 0.95)[0], tally
    if cap == 60:
        assert 10 <= tally.pairs < 60  # it stops on the target, and not always at the first chance or the cap


def test_stopping_on_a_fixed_count_interval_would_not_hold() -> None:
    # the same simulation catches the rule the anytime depths replace: stop once the 95% fixed-count
    # interval is within 5% and report it (92-93% coverage, 3 standard errors under the 95% allowance)
    def naive(uncached: list[float], cached: list[float]) -> bool:
        low, high = intervals.speedup_interval(uncached, cached)
        return math.log(high / low) / 2 <= math.log1p(0.05)

    tally = sim.auto_coverage(naive, intervals.speedup_interval, "paired", 3000, cap=60)
    assert tally.hits < sim.binomial_bounds(3000, 0.95)[0], tally


@pytest.mark.parametrize("noise", [("paired", "paired"), ("heavy", "heavy")])
def test_significant_false_alarms_stay_within_five_percent(noise: tuple[str, str]) -> None:
    trials, total = 150, 0
    for pairs in range(2, 31):
        tally = sim.alarms(intervals.significant_change, pairs, noise, trials)
        assert tally.shown == trials and tally.hits <= sim.binomial_bounds(trials, intervals.SIGNIFICANCE)[1], pairs
        total += tally.hits
    assert total <= sim.binomial_bounds(29 * trials, intervals.SIGNIFICANCE)[1]


def test_significant_notices_a_real_change() -> None:
    # 20% faster with the cache, 10 pairs a run: the per-pair ratios hardly overlap
    tally = sim.alarms(intervals.significant_change, 10, ("paired", "paired"), 150, change=1.2)
    assert tally.rate > 0.9, tally
