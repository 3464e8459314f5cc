"""Pure statistics against numbers worked out by hand."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvmagic.core import stats


def test_percentiles_interpolate_between_ranks() -> None:
    # Four values: ranks sit at 0, 1/3, 2/3, 1; the 25th percentile is 3/4 of the way from 1 to 2.
    values = [4.0, 1.0, 3.0, 2.0]
    assert stats.percentile(values, 25) == 1.75
    assert stats.median(values) == 2.5
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
    assert stats.median(values) == pytest.approx(mid)
    assert stats.percentile(values, 75) == pytest.approx(high)


def test_bootstrap_of_one_pair_is_that_pair() -> None:
    assert stats.bootstrap_ratio_ci([3.0], [2.0]) == (1.5, 1.5)


def test_bootstrap_of_two_pairs_spans_every_resampled_median() -> None:
    # Resampling pairs (1, 1) and (3, 1): the numerator median is 1 (p=1/4), 2 (p=1/2) or 3 (p=1/4).
    assert stats.bootstrap_ratio_ci([1.0, 3.0], [1.0, 1.0]) == (1.0, 3.0)
    # The middle 40% lies inside the 50% of resamples whose median is 2.
    assert stats.bootstrap_ratio_ci([1.0, 3.0], [1.0, 1.0], confidence=0.4) == (2.0, 2.0)


def test_bootstrap_keeps_pairs_together() -> None:
    # Each pair has ratio 2 however slow it was, so every resample has ratio 2.
    low, high = stats.bootstrap_ratio_ci([2.0, 4.0, 10.0, 6.0], [1.0, 2.0, 5.0, 3.0])
    assert low == pytest.approx(2.0) and high == pytest.approx(2.0)


def test_bootstrap_is_reproducible_and_seeded() -> None:
    uncached, cached = [1.0, 1.3, 0.9, 1.6, 1.1], [0.5, 0.45, 0.6, 0.52, 0.4]
    first = stats.bootstrap_ratio_ci(uncached, cached)
    random.seed(12345)  # the global RNG's state must not matter
    assert first == stats.bootstrap_ratio_ci(uncached, cached)
    assert min(u / c for u, c in zip(uncached, cached)) <= first[0] <= first[1] <= 1.6 / 0.4


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: stats.percentile([], 50), "no values"),
        (lambda: stats.percentile([1.0], 101), r"\[0, 100\]"),
        (lambda: stats.bootstrap_ratio_ci([1.0], [1.0, 2.0]), "same, non-zero number"),
        (lambda: stats.bootstrap_ratio_ci([1.0], [1.0], confidence=1.0), r"\(0, 1\)"),
    ],
)
def test_bad_input_is_refused(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_spread_threshold_is_ten_percent() -> None:
    assert math.isclose(stats.SPREAD_WARNING, 0.10)
