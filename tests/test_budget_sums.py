"""A sweep's time budget summed by hand on a toy cost model, without a model: what a round, a sweep, its
warm-ups and its batches cost, which configurations fit, the lower bound from single forwards, and the refusal."""

from __future__ import annotations

import pytest

from kvmagic.core.budget import (
    check_budget,
    estimate_seconds,
    floor_seconds,
    format_seconds,
    plan_within_budget,
    round_seconds,
    scaled_seconds,
)
from kvmagic.core.config import Config
from kvmagic.core.costmodel import CostModel, Polynomial
from kvmagic.errors import KVMagicError

# F(L) = 1 + L, D = 2: after a prompt of 2, 3 new tokens take F(2) + F(3) + F(4) = 12 s uncached, F(2) + 2 D = 7 s
# cached; 1 new token takes F(2) = 3 s either way; after a prompt of 4, 1 new token takes 5 s.
COST = CostModel(prefill=Polynomial((1.0, 1.0)), decode=Polynomial((2.0,)))


def test_a_round_runs_each_strategy_once_and_a_batch_counts_each_sequence() -> None:
    assert round_seconds(COST, 2, 3) == 12 + 7
    assert round_seconds(COST, 2, 3, caches=(True,)) == 7
    assert round_seconds(COST, 2, 3, caches=(False, True, True)) == 12 + 7 + 7
    assert round_seconds(COST, 2, 3, batch=2) == 2 * 19


def test_a_sweep_adds_one_warm_up_of_one_sequence_per_prompt_length() -> None:
    configs = [Config(2, 3), Config(2, 1, batch=2)]
    # 2 rounds of 19 s, 2 rounds of 2 x 6 s, and one warm-up of one token after the prompt of 2 (6 s)
    assert estimate_seconds(COST, configs, repeat=2, warmup_tokens=1) == 38 + 24 + 6
    assert estimate_seconds(COST, configs, repeat=2, warmup_tokens=0) == 38 + 24
    two_prompts = [Config(2, 3), Config(4, 1), Config(2, 1)]
    # rounds of 19 + 10 + 6 s, warm-ups of 6 s (prompt 2) and 10 s (prompt 4)
    assert estimate_seconds(COST, two_prompts, repeat=1, warmup_tokens=1) == 35 + 16
    assert estimate_seconds(COST, [Config(2, 3)], repeat=1, warmup_tokens=3, caches=(True,)) == 7 + 7


def test_the_floor_from_single_forwards_counts_rounds_warm_ups_and_batches() -> None:
    prefill = {2: 3.0, 4: 5.0}  # F(2), F(4); F at a few tokens: 1 s, a slope of at least (3 - 1) / 2 past 2
    # after 2: uncached 3 x 3 + 1 x 3 x 2 / 2 = 12, cached at least its prefill 3; after 4, one token: 5 + 5
    configs = [Config(2, 3), Config(4, 1, batch=2)]
    assert floor_seconds(prefill, 1.0, configs, repeat=2, warmup_tokens=1) == 2 * 15 + 2 * 2 * 10 + (6 + 10)
    assert floor_seconds(prefill, 1.0, configs, repeat=1, warmup_tokens=0) == 15 + 2 * 10
    assert floor_seconds(prefill, 1.0, [Config(2, 3)], repeat=1, warmup_tokens=0, caches=(False,)) == 12
    # a short forward slower than the prompt's (noise) gives no slope: 3 x 3 uncached
    assert floor_seconds(prefill, 10.0, [Config(2, 3)], repeat=1, warmup_tokens=0) == 9 + 3
    # the floor never passes the estimate of a convex model that agrees with it at the prompt
    assert floor_seconds({2: 3.0}, 1.0, [Config(2, 3)], repeat=1, warmup_tokens=0) <= round_seconds(COST, 2, 3)


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


def test_scaled_seconds_of_one_token_is_the_prefill() -> None:
    assert scaled_seconds(0.01, 0.02, 10, 1, use_cache=False) == 0.01
    assert scaled_seconds(0.01, 0.02, 10, 1, use_cache=True) == 0.01
    assert scaled_seconds(0.01, 0.02, 10, 0, use_cache=True) == 0.0
    # two tokens after 4: F(4) + F(5) = 0.01 (1 + 5/4) uncached
    assert scaled_seconds(0.01, 0.02, 4, 2, use_cache=False) == pytest.approx(0.0225)


def test_a_sweep_past_its_budget_is_refused_with_both_times_and_what_to_lower() -> None:
    with pytest.raises(KVMagicError) as caught:
        check_budget(150.0, 60.0)
    assert caught.value.params == ("max_seconds", "new_tokens", "prompt_tokens", "repeat")
    assert caught.value.spelled(lambda name: "--" + name.replace("_", "-")) == (
        "would take about 2 min, over --max-seconds 60 s: raise it or lower --new-tokens, --prompt-tokens or --repeat"
    )
    check_budget(60.0, 60.0)  # exactly the budget is within it
    check_budget(10**6, 0)  # 0: no limit


def test_seconds_are_written_in_the_unit_a_reader_takes_in_at_once() -> None:
    assert [format_seconds(s) for s in (0.0123, 59.94, 119.4)] == ["0.0123 s", "59.9 s", "119 s"]
    assert [format_seconds(s) for s in (120, 150, 3599)] == ["2 min", "2 min", "60 min"]
    assert [format_seconds(s) for s in (3600, 5400, 7200)] == ["1.0 h", "1.5 h", "2.0 h"]
