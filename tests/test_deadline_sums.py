"""The deadline's arithmetic by hand, without a model: the order of a sweep, each run projected from the runs
seen, what fits, when a run is cut, the budget that would fit what was left out, and the refusals."""

from __future__ import annotations

import pytest

from kvmagic import KVMagicError
from kvmagic.core.config import Config
from kvmagic.core.deadline import (
    CUT_MARGIN,
    FAR_PAST,
    Seen,
    config_seconds,
    cut_seconds,
    fits,
    fitting_budget,
    nothing_finished,
    prefill_seconds,
    refusal,
    run_seconds,
    shortest_first,
)
from kvmagic.core.strategy import parse

OFF, DYNAMIC, STATIC = parse("off"), parse("dynamic"), parse("static")


def test_a_sweep_is_measured_least_work_first_and_ties_keep_their_order() -> None:
    # work: 4 x (16 x 10 + 120) = 1120; 64 x 10 + 2016 = 2656; 16 x 100 + 120 = 1720; 2 x (16 x 10 + 120) = 560
    configs = [Config(10, 16, 4), Config(10, 64), Config(100, 16), Config(10, 16, 2), Config(10, 16, 2)]
    assert shortest_first(configs) == [Config(10, 16, 2), Config(10, 16, 2), Config(10, 16, 4), Config(100, 16),
                                       Config(10, 64)]  # fmt: skip


def test_nothing_seen_projects_nothing() -> None:
    assert prefill_seconds([], 10) is None and run_seconds([], OFF, Config(10, 4)) is None
    assert config_seconds([], Config(10, 4), [OFF, DYNAMIC], rounds=3, first_tokens=3) is None


def test_an_uncached_run_grows_with_its_sequence() -> None:
    # 4 tokens after 10 uncached: F(10) (1 + 11/10 + 12/10 + 13/10) = 4.6 F(10); it took 0.046 s, so F(10) = 0.01 s
    seen = [Seen(OFF, Config(10, 4), 0.046)]
    assert prefill_seconds(seen, 10) == pytest.approx(0.01)
    assert prefill_seconds(seen, 30) == pytest.approx(0.03)  # no run at 30: in proportion to the length
    # 20 tokens after 10: 0.01 (20 + 20 x 19 / 20) = 0.39 s; a batch of 3 is three sequences
    assert run_seconds(seen, OFF, Config(10, 20)) == pytest.approx(0.39)
    assert run_seconds(seen, OFF, Config(10, 20, 3)) == pytest.approx(1.17)
    assert run_seconds(seen, OFF, Config(10, 0)) == 0.0


def test_a_cached_run_is_its_prefill_then_its_own_steps() -> None:
    # F(10) = 0.01 s as above; dynamic's 4 tokens took 0.016 s: 0.002 s a step past the prefill
    seen = [Seen(OFF, Config(10, 4), 0.046), Seen(DYNAMIC, Config(10, 4), 0.016)]
    assert run_seconds(seen, DYNAMIC, Config(10, 51)) == pytest.approx(0.01 + 50 * 0.002)
    assert run_seconds(seen, DYNAMIC, Config(10, 51, 2)) == pytest.approx(2 * (0.01 + 50 * 0.002))
    # a strategy with no run of two tokens or more counts each step as a forward over the prompt
    assert run_seconds(seen, STATIC, Config(10, 5)) == pytest.approx(5 * 0.01)
    one_token = [*seen, Seen(STATIC, Config(10, 1), 0.01)]
    assert run_seconds(one_token, STATIC, Config(10, 5)) == pytest.approx(5 * 0.01)
    # noise can make a run faster than its prefill: a step then counts as 1% of the prefill
    fast = [Seen(OFF, Config(10, 4), 0.046), Seen(DYNAMIC, Config(10, 3), 0.005)]
    assert run_seconds(fast, DYNAMIC, Config(10, 3)) == pytest.approx(0.01 + 2 * 0.0001)


def test_the_latest_runs_say_how_the_machine_runs_now_and_one_slow_run_does_not() -> None:
    # uncached 4 tokens after 10 (4.6 forwards): F(10) read as 0.01, 0.04, 0.02, 0.03, 0.5 s; the median of the
    # latest three (0.02, 0.03, 0.5) is 0.03 s
    seen = [Seen(OFF, Config(10, 4), 4.6 * f) for f in (0.01, 0.04, 0.02, 0.03, 0.5)]
    assert prefill_seconds(seen, 10) == pytest.approx(0.03)
    # runs at the prompt length asked come first: one at 10 says more than three at 20
    mixed = [*[Seen(OFF, Config(20, 1), 1.0)] * 3, Seen(OFF, Config(10, 1), 0.1)]
    assert prefill_seconds(mixed, 10) == pytest.approx(0.1)
    assert prefill_seconds(mixed, 40) == pytest.approx(2.0)  # the latest three at any length, each in proportion:
    # 2, 2 and 0.4 s


def test_without_an_uncached_run_each_step_counts_as_at_most_a_forward() -> None:
    seen = [Seen(DYNAMIC, Config(10, 4, 2), 0.08)]  # 0.01 s a step and sequence
    assert prefill_seconds(seen, 10) == pytest.approx(0.01)


def test_a_configuration_is_its_rounds_and_its_first_token_runs() -> None:
    seen = [Seen(OFF, Config(10, 4), 0.046), Seen(DYNAMIC, Config(10, 4), 0.016)]
    # a round: uncached 0.39 s + cached 0.01 + 19 x 0.002 = 0.048 s; a one-token run of each: 0.01 s
    found = config_seconds(seen, Config(10, 20), [OFF, DYNAMIC], rounds=3, first_tokens=3)
    assert found == pytest.approx(3 * (0.39 + 0.048) + 3 * (0.01 + 0.01))


def test_what_fits_the_deadline_and_how_far_a_first_projection_may_pass_it() -> None:
    assert fits(50.0, 10.0, 60.0, measured=True) and not fits(50.0, 10.5, 60.0, measured=True)
    assert fits(10**6, 10**6, 0.0, measured=True)  # 0: no limit
    # before any timed run the warm-up alone projects: only a projection FAR_PAST times past the budget refuses
    assert fits(1.0, FAR_PAST * 60.0 - 1.0, 60.0, measured=False)
    assert not fits(1.0, FAR_PAST * 60.0, 60.0, measured=False)


def test_a_run_is_cut_past_the_deadline_by_its_margin() -> None:
    assert cut_seconds(60.0) == pytest.approx(60.0 * (1 + CUT_MARGIN)) and cut_seconds(0.0) is None


@pytest.mark.parametrize(
    ("needed", "fitting"),
    [(100.0, 120.0), (137.0, 170.0), (61.2, 74.0), (0.44, 0.53), (10_000.0, 12_000.0), (0.0, 0.0)],
)
def test_the_budget_that_fits_has_the_margin_as_room_rounded_up_to_two_digits(needed: float, fitting: float) -> None:
    assert fitting_budget(needed) == pytest.approx(fitting)
    assert fitting_budget(needed) >= needed * (1 + CUT_MARGIN) - 1e-9


def test_the_refusals_say_what_would_be_needed_and_what_to_lower() -> None:
    error = refusal(Config(82, 300), 900.0, 60.0)
    assert isinstance(error, KVMagicError) and error.params == ("max_seconds", "new_tokens", "prompt_tokens", "repeat")
    assert error.spelled(lambda name: "--" + name.replace("_", "-")) == (
        f"82+300 tokens would take about 15 min, over {FAR_PAST:g} times --max-seconds 60 s: raise it or lower "
        "--new-tokens, --prompt-tokens or --repeat"
    )
    cut = nothing_finished(Config(82, 300), 60.0, 100.0, cut=True)
    assert str(cut) == (
        "nothing finished within max_seconds 60 s: 82+300 tokens ran past it and was cut; max_seconds 120 should "
        "fit it, or lower new_tokens, prompt_tokens or repeat"
    )
    assert "82+300 tokens would pass it; max_seconds 120" in str(nothing_finished(Config(82, 300), 60, 100, cut=False))


def test_once_timed_runs_exist_the_warm_ups_no_longer_count() -> None:
    # a warm-up under a passing load read F(10) = 0.04 s; the timed runs since read 0.01 s
    warm = Seen(OFF, Config(10, 4), 4.6 * 0.04)
    assert prefill_seconds([warm], 10) == pytest.approx(0.04)
    assert prefill_seconds([warm, Seen(OFF, Config(10, 4), 0.046, timed=True)], 10) == pytest.approx(0.01)
    # at a prompt length with only a warm-up, that warm-up still says more than timed runs at another length
    assert prefill_seconds([Seen(OFF, Config(20, 4), 1.0, timed=True), warm], 10) == pytest.approx(0.04)
    unknown = nothing_finished(Config(82, 300), 60, None, cut=True)
    assert str(unknown).endswith(
        "82+300 tokens ran past it and was cut; raise it, or lower new_tokens, prompt_tokens or repeat"
    )
