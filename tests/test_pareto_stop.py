"""Two small rules read directly: which rows no other row beats (the trade-off frontier a plot marks), and when a
measuring loop has taken enough rounds (``repeat=N`` or ``auto``)."""

from __future__ import annotations

from kvmagic.core.pareto import BYTES_TIE, Point, beats, better, on_frontier
from kvmagic.core.sequential import first_stop
from kvmagic.core.spec import MIN_AUTO_PAIRS, BenchSpec
from kvmagic.core.stop import FixedRounds, UntilPrecise, stop_rule
from kvmagic.core.strategy import DYNAMIC, OFF


def test_a_row_beats_another_only_by_being_better_on_one_figure_and_no_worse_on_any() -> None:
    base = Point(seconds=1.0, kv_bytes=100.0, kl_nats=0.1)
    assert beats(Point(0.9, 100.0, 0.1), base) and not beats(base, Point(0.9, 100.0, 0.1))
    assert beats(Point(1.0, 50.0, 0.1), base) and beats(Point(1.0, 100.0, 0.05), base)
    assert not beats(base, base)  # as good is not better
    assert not beats(Point(0.5, 200.0, 0.1), base) and not beats(Point(0.5, 100.0, 0.2), base)  # a trade


def test_kv_bytes_within_a_hundredth_of_each_other_are_the_same_cache() -> None:
    base = Point(1.0, 100.0, 0.0)
    assert BYTES_TIE == 0.01
    # 100.5 bytes against 100: a tie, so a slower row holding 0.5 bytes fewer beats nothing ...
    assert not beats(Point(1.0, 100.0, 0.0), Point(1.0, 100.5, 0.0))
    assert not beats(Point(1.0, 100.5, 0.0), base)
    assert beats(Point(0.9, 100.5, 0.0), base)  # ... and a faster one holding 0.5 bytes more beats it
    # 102 against 100 is past the tie: fewer bytes is better, more bytes is worse
    assert beats(base, Point(1.0, 102.0, 0.0)) and not beats(Point(0.9, 102.0, 0.0), base)
    # seconds and KL have no tie: a hair faster is faster
    assert beats(Point(0.999, 100.0, 0.0), base)
    assert beats(Point(1.0, 100.0, 0.001), Point(1.0, 100.0, 0.0011))


def test_an_unknown_figure_is_never_guessed() -> None:
    known, unknown = Point(1.0, 100.0, 0.1), Point(1.0, 100.0, None)
    # neither knows it: a tie there, so speed decides
    assert beats(Point(0.5, 100.0, None), unknown)
    # only the beaten row lacks it: the other must be at the best there is (KL 0), and is not better there
    assert beats(Point(0.5, 100.0, 0.0), unknown) and not beats(Point(0.5, 100.0, 0.01), unknown)
    assert not beats(Point(1.0, 100.0, 0.0), unknown)  # KL 0 against unknown is no better
    # a row that lacks it is no better than one that has it
    assert not beats(Point(0.5, 100.0, None), known)
    # no bytes held beats unknown bytes only as the best there is
    assert beats(Point(0.5, 0.0, 0.1), Point(1.0, None, 0.1)) and not beats(Point(0.5, 1.0, 0.1), Point(1.0, None, 0.1))


def test_the_frontier_keeps_every_row_no_other_beats() -> None:
    fast, small, beaten = Point(1.0, 200.0, 0.1), Point(2.0, 100.0, 0.1), Point(2.0, 200.0, 0.1)
    assert on_frontier([fast, small, beaten]) == [True, True, False]
    twin = Point(1.0, 200.0, 0.1)  # the same figures twice: neither beats the other
    assert on_frontier([fast, twin]) == [True, True]
    assert on_frontier([]) == []


def test_fixed_rounds_stop_at_their_count_whatever_the_times() -> None:
    rule = stop_rule(BenchSpec(repeat=3))
    assert rule == FixedRounds(3) and not rule.sequential
    assert [rule.done(n, 0.0, {}) for n in (1, 2, 3, 4)] == [False, False, True, True]


def test_auto_takes_its_minimum_then_stops_at_the_cap_or_on_precision() -> None:
    rule = stop_rule(BenchSpec(repeat="auto", ci_target=0.1, auto_cap=30))
    assert rule == UntilPrecise(0.1, 30.0, MIN_AUTO_PAIRS) and rule.sequential
    noisy = {OFF: [1.0, 3.0] * 20, DYNAMIC: [1.0, 0.5, 2.0, 0.25] * 10}
    # before its minimum nothing stops it, not even the cap
    assert not rule.done(MIN_AUTO_PAIRS - 1, 1000.0, noisy)
    # from its minimum the cap does, at exactly the cap too
    assert rule.done(MIN_AUTO_PAIRS, 30.0, noisy) and not rule.done(MIN_AUTO_PAIRS, 29.9, noisy)
    # steady times stop it once the interval can be read, not before
    n = first_stop()
    steady = {OFF: [2.0] * n, DYNAMIC: [1.0] * n}
    assert rule.done(n, 0.0, steady)
    early = {OFF: [2.0] * (n - 1), DYNAMIC: [1.0] * (n - 1)}
    assert not rule.done(n - 1, 0.0, early)


def test_times_within_noise_tie_on_speed_and_leave_the_other_figures_to_decide() -> None:
    """Rows whose rounds cannot tell their times apart tie on speed: the faster median beats nothing by it, while a
    row better on another figure still beats; ``better`` calls the speed a tie (False), not unknown (None)."""
    fast, slow = Point(1.0, 100.0, 0.0), Point(1.2, 100.0, 0.0)
    assert beats(fast, slow) and not beats(fast, slow, same_speed=True)
    assert beats(Point(1.2, 50.0, 0.0), fast, same_speed=True) and not beats(Point(1.2, 50.0, 0.0), fast)
    assert better(fast, Point(1.2, 200.0, 0.0), same_speed=True) == (False, True, False)
    assert on_frontier([fast, slow]) == [True, False]
    assert on_frontier([fast, slow], close={frozenset((0, 1))}) == [True, True]
    assert on_frontier([fast, slow, Point(3.0, 100.0, 0.0)], close={frozenset((0, 1))}) == [True, True, False]
