"""--predict's budget summed by hand on a toy cost model, without a model: what a round and its batches cost, and
which configurations fit; how seconds are written."""

from __future__ import annotations

from kvmagic.addons.predict.budget import plan_within_budget, round_seconds
from kvmagic.addons.predict.costmodel import CostModel
from kvmagic.core.config import Config
from kvmagic.core.curves import Polynomial
from kvmagic.core.deadline import format_seconds

# F(L) = 1 + L, D = 2: after a prompt of 2, 3 new tokens take F(2) + F(3) + F(4) = 12 s uncached, F(2) + 2 D = 7 s
# cached; 1 new token takes F(2) = 3 s either way; after a prompt of 4, 1 new token takes 5 s.
COST = CostModel(prefill=Polynomial((1.0, 1.0)), decode=Polynomial((2.0,)))


def test_a_round_runs_each_strategy_once_and_a_batch_counts_each_sequence() -> None:
    assert round_seconds(COST, 2, 3) == 12 + 7
    assert round_seconds(COST, 2, 3, caches=(True,)) == 7
    assert round_seconds(COST, 2, 3, caches=(False, True, True)) == 12 + 7 + 7
    assert round_seconds(COST, 2, 3, batch=2) == 2 * 19


def test_what_fits_the_budget_is_measured_and_a_later_cheaper_one_may_still_fit() -> None:
    configs = [Config(2, 3), Config(4, 1), Config(2, 1)]
    # 19 + 6 (warm-up) = 25; then 10 + 10 (its warm-up) would pass 31; then 6 reaches 31 exactly
    assert plan_within_budget(COST, configs, repeat=1, warmup_tokens=1, max_seconds=31) == [True, False, True]
    assert plan_within_budget(COST, configs, repeat=1, warmup_tokens=1, max_seconds=30.5) == [True, False, False]
    assert plan_within_budget(COST, configs, repeat=1, warmup_tokens=1, max_seconds=0) == [True] * 3
    # a prompt length skipped is not warmed up: its next configuration still pays the warm-up (10 + 10 = 20)
    later = [Config(2, 3), Config(4, 3), Config(4, 1)]  # 25, then 18 + 9 + 10 is too much, then 20
    assert plan_within_budget(COST, later, repeat=1, warmup_tokens=1, max_seconds=45) == [True, False, True]
    assert plan_within_budget(COST, later, repeat=1, warmup_tokens=1, max_seconds=44) == [True, False, False]
    # with no warm-up only the rounds count; two rounds of a batch of two
    assert plan_within_budget(COST, [Config(2, 3, batch=2)], repeat=2, warmup_tokens=0, max_seconds=76) == [True]
    assert plan_within_budget(COST, [Config(2, 3, batch=2)], repeat=2, warmup_tokens=0, max_seconds=75) == [False]


def test_seconds_are_written_in_the_unit_a_reader_takes_in_at_once() -> None:
    assert [format_seconds(s) for s in (0.0123, 59.94, 119.4)] == ["0.0123 s", "59.9 s", "119 s"]
    assert [format_seconds(s) for s in (120, 150, 3599)] == ["2 min", "2 min", "60 min"]
    assert [format_seconds(s) for s in (3600, 5400, 7200)] == ["1.0 h", "1.5 h", "2.0 h"]
