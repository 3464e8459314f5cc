"""Pure statistics against numbers worked out by hand."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvmagic.core import distributions, intervals, sequential, stats
from kvmagic.core.stop import UntilPrecise
from kvmagic.core.strategy import PAIR


def test_percentiles_interpolate_between_ranks() -> None:
    # Four values: ranks sit at 0, 1/3, 2/3, 1; the 25th percentile is 3/4 of the way from 1 to 2.
    values = [4.0, 1.0, 3.0, 2.0]
    assert stats.percentile(values, 25) == 1.75
    assert stats.percentile(values, 50) == 2.5
    assert stats.percentile(values, 75) == 3.25
    assert stats.iqr(values) == 1.5
    assert stats.percentile(values, 0) == 1.0 and stats.percentile(values, 100) == 4.0


def test_relative_spread_is_iqr_over_median() -> None:
    # [1, 2, 3]: quartiles 1.5 and 2.5, median 2.
    assert stats.relative_spread([3.0, 1.0, 2.0]) == 0.5


@settings(deadline=None)
@given(st.lists(st.floats(min_value=1e-6, max_value=1e3), min_size=2, max_size=30))
def test_quartiles_agree_with_the_standard_library(values: list[float]) -> None:
    low, mid, high = statistics.quantiles(values, n=4, method="inclusive")
    assert stats.percentile(values, 25) == pytest.approx(low)
    assert stats.percentile(values, 50) == pytest.approx(mid)
    assert stats.percentile(values, 75) == pytest.approx(high)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: stats.percentile([], 50), "^percentile of no values$"),
        (lambda: stats.percentile([1.0], 101), r"\[0, 100\]"),
        (lambda: intervals.order_statistic_depth(5, 1.0), r"^confidence must lie in \(0, 1\), got 1.0$"),
        (lambda: intervals.order_statistic_depth(5, 0.0), r"^confidence must lie in \(0, 1\), got 0.0$"),
        (lambda: distributions.t_cdf(1.0, 0), "^degrees of freedom must be positive, got 0$"),
    ],
)
def test_bad_input_is_refused(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_spread_threshold_is_ten_percent() -> None:
    assert math.isclose(stats.SPREAD_WARNING, 0.10)


def test_t_quantiles_match_the_printed_tables() -> None:
    assert distributions.t_quantile(0.975, 1) == pytest.approx(12.7062, abs=1e-4)
    assert distributions.t_quantile(0.975, 2) == pytest.approx(4.3027, abs=1e-4)
    assert distributions.t_quantile(0.975, 4) == pytest.approx(2.7764, abs=1e-4)
    assert distributions.t_quantile(0.025, 4) == pytest.approx(-2.7764, abs=1e-4)


@pytest.mark.parametrize("t", [-3.0, -0.4, 0.0, 1.3, 7.5])
def test_t_cdf_matches_its_closed_forms(t: float) -> None:
    assert distributions.t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi)  # Cauchy
    assert distributions.t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)))


def test_t_cdf_reaches_its_ends() -> None:
    assert distributions.t_cdf(math.inf, 3) == 1.0 and distributions.t_cdf(-math.inf, 3) == 0.0


def test_rank_sum_counts_count_the_orderings() -> None:
    # x x y y: U = 4; x y x y, y x x y ... : listing the six orderings of two x and two y gives U = 0,1,2,2,3,4.
    assert distributions.rank_sum_counts(2, 2) == (1, 1, 2, 1, 1)
    assert distributions.rank_sum_counts(1, 3) == (1, 1, 1, 1)
    assert sum(distributions.rank_sum_counts(7, 9)) == math.comb(16, 7)


def test_the_speedup_is_the_median_of_the_pairs() -> None:
    # Pair ratios 2, 4, 3: the median is 3, though the medians of the times give 3 / 1.5 = 2.
    assert intervals.speedup_estimate([2.0, 4.0, 3.0], [1.0, 1.0, 1.0]) == pytest.approx(3.0)
    assert intervals.speedup_estimate([2.0, 8.0, 3.0], [1.0, 2.0, 1.5]) == pytest.approx(2.0)
    # An even count: the geometric mean of the middle two, sqrt(2 * 8).
    assert intervals.speedup_estimate([2.0, 8.0], [1.0, 1.0]) == pytest.approx(4.0)


def test_order_statistic_depths_follow_the_sign_test_table() -> None:
    # Two-sided 5%: 2 * P(Bin(n, 1/2) < k) <= 0.05. n=5: 2/32 > 5%; n=6: 2/64; n=9: 2*10/512 = 3.9%;
    # n=10: 2*11/1024 = 2.1% but 2*56/1024 = 10.9%; n=20: 2*P(B <= 5) = 4.1%, 2*P(B <= 6) = 11.5%.
    assert [intervals.order_statistic_depth(n, 0.95) for n in (1, 5, 6, 8, 9, 10, 20)] == [0, 0, 1, 1, 2, 2, 6]
    assert intervals.order_statistic_depth(7, 0.99) == 0 and intervals.order_statistic_depth(8, 0.99) == 1
    # 50%: P(B <= 3) = 176/1024 = 17.2%, twice 34.4%, within; P(B <= 4) = 386/1024, twice 75%: the sum counts, not
    # the last term (2 x 210/1024 alone would be 41%). And 6 pairs cover exactly 1 - 2/64 = 31/32 with depth 1.
    assert intervals.order_statistic_depth(10, 0.5) == 4 and intervals.order_statistic_depth(6, 31 / 32) == 1


def test_few_pairs_get_a_t_interval_on_the_log_ratios() -> None:
    # Log ratios ln 2 - 0.1, ln 2, ln 2 + 0.1, each pair with its own drift: mean ln 2, s = 0.1,
    # half-width t(0.975, 2) * 0.1 / sqrt(3) = 4.302653 * 0.057735 = 0.248414.
    drift = [1.3, 0.7, 1.0]
    uncached = [2 * math.exp(d) * s for d, s in zip((-0.1, 0.0, 0.1), drift, strict=True)]
    low, high = intervals.speedup_interval(uncached, drift)
    assert low == pytest.approx(2 * math.exp(-0.248414), rel=1e-5)
    assert high == pytest.approx(2 * math.exp(0.248414), rel=1e-5)
    assert intervals.speedup_interval([2.0], [1.0]) is None
    # at 90%, t(0.95, 2) = 2.919986: half-width 2.919986 x 0.057735 = 0.168585
    low, high = intervals.speedup_interval(uncached, drift, 0.9)
    assert low == pytest.approx(2 * math.exp(-0.168585), rel=1e-5)
    assert high == pytest.approx(2 * math.exp(0.168585), rel=1e-5)


def test_six_or_more_pairs_get_order_statistics_of_the_ratios() -> None:
    ratios = [2.0, 2.4, 1.9, 2.2, 2.1, 1.7, 2.05, 2.3, 1.8]
    assert intervals.speedup_interval(ratios[:6], [1.0] * 6) == pytest.approx((1.7, 2.4))  # depth 1: the extremes
    assert intervals.speedup_interval(ratios, [1.0] * 9) == pytest.approx((1.8, 2.3))  # depth 2: next to them
    # one run ten times slower moves the interval by one depth, not by a factor of ten
    assert intervals.speedup_interval([*ratios[:5], 20.0], [1.0] * 6) == pytest.approx((1.9, 20.0))
    assert intervals.speedup_interval([*ratios[:8], 20.0], [1.0] * 9) == pytest.approx((1.9, 2.4))


def test_significance_needs_two_pairs_a_side() -> None:
    assert intervals.significant_change([(2.0, 1.0)], [(3.0, 1.0), (3.1, 1.0)]) is None


def test_significance_with_few_pairs_is_welch_t() -> None:
    # Log ratios a -+ h against b -+ h: each mean's variance is h^2, t = (a - b) / (h sqrt 2) on
    # (2h^2)^2 / (h^4 + h^4) = 2 degrees of freedom, so it fires past |a - b| = 4.3027 * sqrt(2) * h.
    def pairs(centre: float, h: float = 0.01) -> list[tuple[float, float]]:
        return [(math.exp(centre - h), 1.0), (math.exp(centre + h), 1.0)]

    assert intervals.significant_change(pairs(0.77), pairs(0.70)) is True  # 0.07 > 0.0609
    assert intervals.significant_change(pairs(0.75), pairs(0.70)) is False  # 0.05 < 0.0609
    assert intervals.significant_change(pairs(0.70), pairs(0.77)) is True


def test_significance_with_enough_pairs_is_the_exact_rank_sum_test() -> None:
    was = [(r, 1.0) for r in (2.0, 2.1, 2.2, 2.3)]
    # 4 against 4 all above: one ordering of C(8, 4) = 70 each way, p = 2/70 = 2.9%.
    assert intervals.significant_change([(r, 1.0) for r in (2.4, 2.5, 2.6, 2.7)], was) is True
    # one swapped (U = 1): P(U <= 1) = 2/70, p = 4/70 = 5.7%.
    assert intervals.significant_change([(r, 1.0) for r in (2.25, 2.5, 2.6, 2.7)], was) is False
    # ranks, not sizes: an outlier as big as you like counts once
    outlier = [(r, 1.0) for r in (2.4, 2.5, 2.6, 270.0)]
    assert intervals.significant_change(outlier, was) is True
    # where the exact test just reaches alpha (2/70), it is the test, and a p-value of exactly alpha fires; Welch's
    # t, which the outlier's spread keeps quiet (p = 0.34), would not
    assert intervals.significant_change(outlier, was, alpha=2 / 70) is True
    # 3 against 5: 2/C(8, 3) = 2/56 = 3.6%, so the exact test can fire, and does: all three above
    above = [(r, 1.0) for r in (2.5, 2.6, 30.0)]
    assert intervals.significant_change(above, [(r, 1.0) for r in (2.0, 2.1, 2.2, 2.3, 2.4)]) is True


def test_welch_p_values_by_hand() -> None:
    # 0.8 -+ 0.1 (3 values) against 0.7 -+ 0.1 (2): variances of the means 0.01/3 and 0.01, t = 0.1 / sqrt(0.04/3)
    # = sqrt(3)/2 on (4/3)^2 / ((1/3)^2 / 2 + 1^2 / 1) = 32/19 degrees of freedom (in units of 0.01); either order
    expected = 2 * distributions.t_cdf(-math.sqrt(3) / 2, 32 / 19)
    assert intervals._welch_p([0.7, 0.8, 0.9], [0.6, 0.8]) == pytest.approx(expected, rel=1e-12)
    assert intervals._welch_p([0.6, 0.8], [0.7, 0.8, 0.9]) == pytest.approx(expected, rel=1e-12)
    # no spread at all: the same constant is no change (p = 1), two different ones are certain (p = 0)
    assert intervals._welch_p([0.5, 0.5], [0.5, 0.5]) == 1.0 and intervals._welch_p([0.5, 0.5], [0.6, 0.6]) == 0.0
    assert intervals.significant_change([(2.0, 1.0)] * 2, [(2.0, 1.0)] * 2) is False


def test_tied_values_share_the_mean_of_their_ranks() -> None:
    assert intervals._midranks([1.0, 1.0, 2.0, 3.0, 3.0, 3.0]) == [1.5, 1.5, 3.0, 5.0, 5.0, 5.0]
    assert intervals._midranks([0.5, 1.0, 1.0]) == [1.0, 2.5, 2.5]


def test_rank_sum_p_values_by_hand() -> None:
    # Counted exactly up to 50 x 50: x below both y gives U = 0 of the orderings U = 0, 1, 2 (one each), so
    # P(U <= 0) = 1/3 and p = 2/3. U at the centre (2 of 4, orderings 1 1 2 1 1 of 6) has 4/6 on both sides:
    # p is 1, not 4/3. Fifty below fifty: one ordering of C(100, 50) each way.
    assert intervals._rank_sum_p([1.0], [2.0, 3.0]) == pytest.approx(2 / 3)
    assert intervals._rank_sum_p([1.0, 4.0], [2.0, 3.0]) == 1.0
    assert math.isclose(intervals._rank_sum_p(list(range(50)), list(range(50, 100))), 2 / math.comb(100, 50))
    # Past it, the normal approximation: 51 against 51 has U's spread sqrt(51 x 51 x 103 / 12) = sqrt(22325.25);
    # 51 below 51 (U = 0) is 1300.5 - 0.5 = 1300 from the centre after the continuity correction; all tied is
    # at the centre, p = 1.
    z = 1300 / math.sqrt(22325.25)
    assert math.isclose(intervals._rank_sum_p(list(range(51)), list(range(51, 102))), math.erfc(z / math.sqrt(2)))
    assert intervals._rank_sum_p([1.0] * 51, [1.0] * 51) == 1.0


def test_anytime_ranks_hold_at_every_count_together() -> None:
    # Every sequence of 14 fair coins (heads: a pair's ratio below the median): the share whose head count
    # leaves [k_n, n - k_n] at some n must be at most 5%.
    depths = sequential.anytime_depths(14)
    escaped = sum(
        any(k and not k <= sum(1 for bit in range(n) if flips >> bit & 1) <= n - k for n, k in enumerate(depths))
        for flips in range(2**14)
    )
    assert 0 < escaped <= 0.05 * 2**14
    # n = 10 is the first count with an interval over 100 pairs: depths are narrower than at a fixed count
    assert sequential.anytime_depths()[9:11] == (0, 1)
    assert sequential.first_stop() == 10 < sequential.first_stop(confidence=0.99)  # surer takes more pairs
    assert sequential.anytime_depths()[30] < intervals.order_statistic_depth(30, 0.95)


def test_auto_interval_is_the_fixed_one_until_the_rule_could_stop() -> None:
    ratios = [2.0, 2.4, 1.9, 2.2, 2.1, 1.7, 2.05, 2.3, 1.8, 2.15]
    ones = [1.0] * 10
    assert sequential.auto_interval(ratios[:9], ones[:9]) == intervals.speedup_interval(ratios[:9], ones[:9])
    assert sequential.auto_interval(ratios, ones) == pytest.approx((1.7, 2.4))  # anytime depth 1 at 10 pairs
    assert intervals.speedup_interval(ratios, ones) == pytest.approx((1.8, 2.3))  # fixed depth 2
    # at 90% no anytime interval before 9 pairs; at 8, sorted 1.7 1.9 2.0 2.05 2.1 2.2 2.3 2.4, the fixed one's depth
    # is 2 at 90% (1 at 95%, 1.7..2.4)
    assert sequential.auto_interval(ratios[:8], ones[:8], confidence=0.9) == pytest.approx((1.9, 2.3))
    # at 9 pairs 90% has an anytime depth of 1 (1.7..2.4), where the fixed one's would be 2 (1.8..2.3)
    assert sequential.auto_interval(ratios[:9], ones[:9], confidence=0.9) == pytest.approx((1.7, 2.4))
    # a walk cut at 10 pairs may spend its error there: depth 2 at the 10th (1.8..2.3); past its end, refused
    assert sequential.auto_interval(ratios, ones, max_pairs=10) == pytest.approx((1.8, 2.3))
    with pytest.raises(ValueError, match=r"^the depths hold up to 9 pairs, got 10$"):
        sequential.auto_interval(ratios, ones, max_pairs=9)


def test_auto_stops_when_the_anytime_interval_meets_the_target() -> None:
    ratios = [2.0, 2.04, 1.97, 2.02, 2.01, 1.96, 2.03, 1.99, 1.98, 2.05]
    ones = [1.0] * 10
    assert not sequential.auto_should_stop(ratios[:9], ones[:9], 0.5)  # no anytime interval yet
    # at 10 pairs the interval is 1.96..2.05 around a median of 2.005: -2.2%, +2.2%
    assert sequential.auto_should_stop(ratios, ones, 0.025)
    assert not sequential.auto_should_stop(ratios, ones, 0.02)
    # 1.5 and 2.5 around a median of 2: 25% on both sides, exactly (each of these survives exp(log(r)) unchanged)
    even = [1.5, 2.5] + [2.0] * 8
    assert sequential.auto_should_stop(even, ones, 0.25) and not sequential.auto_should_stop(even, ones, 0.2499)
    assert sequential.auto_should_stop([3.0, 1.0], [1.0, 1.0], 0.01, max_pairs=2)  # the pair cap


def test_auto_takes_its_minimum_then_stops_at_the_cap_or_on_precision() -> None:
    rule = UntilPrecise(target=0.025, cap=10.0, minimum=3)
    few = {PAIR[0]: [2.0, 2.4, 1.9], PAIR[1]: [1.0] * 3}  # 3 pairs: no anytime interval, only the cap can stop
    assert not rule.done(2, 100.0, few)  # the minimum first, whatever the time
    assert not rule.done(3, 9.9, few) and rule.done(3, 10.0, few)  # from the minimum on, the cap as it is reached
    precise = {PAIR[0]: [2.0, 2.04, 1.97, 2.02, 2.01, 1.96, 2.03, 1.99, 1.98, 2.05], PAIR[1]: [1.0] * 10}
    assert rule.done(10, 0.0, precise)  # within 2.5% at 10 pairs (above): long before the cap
    spread = {PAIR[0]: [2.0, 2.4, 1.9, 2.2, 2.1, 1.7, 2.05, 2.3, 1.8, 2.15], PAIR[1]: [1.0] * 10}
    assert not rule.done(10, 0.0, spread)  # 1.7..2.4 around 2.075: not yet
