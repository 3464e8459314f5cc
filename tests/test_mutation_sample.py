"""The mutation sample's interval: Clopper-Pearson's exact bounds, against published values and by the coverage
it claims in a seeded simulation."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "mutation_sample", Path(__file__).resolve().parent.parent / "benchmarks" / "mutation_sample.py"
)
assert _SPEC is not None and _SPEC.loader is not None
_SAMPLE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_SAMPLE)
clopper_pearson, coverage = _SAMPLE.clopper_pearson, _SAMPLE.coverage


def test_the_bounds_are_the_exact_ones() -> None:
    assert clopper_pearson(5, 10) == pytest.approx((0.1871, 0.8129), abs=1e-4)  # the textbook 5 of 10
    assert clopper_pearson(0, 10) == pytest.approx((0.0, 1 - 0.025 ** (1 / 10)))  # closed forms at the ends
    assert clopper_pearson(10, 10) == pytest.approx((0.025 ** (1 / 10), 1.0))


@pytest.mark.parametrize("truth", [0.5, 0.9, 0.97])
def test_it_holds_the_truth_at_least_95_percent_of_the_time(truth: float) -> None:
    assert coverage(60, truth, trials=1000, seed=3) >= 0.95
