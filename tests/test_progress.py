"""The progress bar moves within a run and its time left learns from the runs done: the arithmetic on a fake
clock, the bar's redraws by its own thread, and a real run's bar as the user sees it."""

from __future__ import annotations

import math
import threading
import warnings

import pytest

from kvmagic import run_benchmark
from kvmagic.runner import benchmark
from kvmagic.runner.progress import HELD_SHORT, LEFT_OF_LATE, Bar, Eta, progress_bar

from .conftest import PROMPT

PAIR = {"off": 10.0, "on": 2.0}  # one timed run's estimated seconds per strategy


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _eta(runs: list[dict[str, float]], rounds: int = 1, **kwargs) -> tuple[Eta, Clock]:
    clock = Clock()
    eta = Eta(runs, rounds, clock=clock, **kwargs)
    eta.begin(0, list(runs[0]))
    return eta, clock


def test_before_any_run_the_estimate_counts_and_the_bar_moves_with_the_clock() -> None:
    eta, clock = _eta([PAIR], rounds=2)
    assert eta.now() == (0.0, 24.0)
    clock.t += 6.0  # into the first uncached run, as estimated
    assert eta.now() == (pytest.approx(0.25), pytest.approx(18.0))


def test_renewed_projections_are_shown_as_they_are_a_slower_machine_counted_once() -> None:
    """The runner renews the projections from the runs made: they say how the machine runs now already, so the
    runs that were slower than first projected do not scale them again."""
    eta, clock = _eta([PAIR, PAIR])
    clock.t += 30.0  # the uncached run took three times its projection
    eta.ran(30.0)
    slower = {"off": 30.0, "on": 6.0}
    eta.update([slower, slower])
    assert eta.now()[1] == pytest.approx(6.0 + 36.0)
    clock.t += 6.0  # so did the cached one
    eta.ran(6.0)
    eta.begin(1, list(PAIR))
    share, left = eta.now()
    assert left == pytest.approx(36.0) and share == pytest.approx(0.5)


def test_renewed_projections_replace_the_old_and_a_left_out_configuration_counts_nothing() -> None:
    eta, clock = _eta([PAIR, PAIR, PAIR])
    clock.t += 10.0
    eta.ran(10.0)  # as projected: 2 s left here, 12 s in each later configuration
    assert eta.now()[1] == pytest.approx(2.0 + 24.0)
    eta.update([PAIR, {"off": 30.0, "on": 6.0}, {}])  # the machine got slower; the last configuration left out
    assert eta.now()[1] == pytest.approx(2.0 + 36.0)


def test_the_time_left_never_passes_the_deadlines_cut() -> None:
    eta, clock = _eta([PAIR, PAIR], ends_by=130.0)  # the clock starts at 100
    assert eta.now()[1] == pytest.approx(24.0)
    clock.t += 20.0  # twice the run's projection: at its pace, 5 + 2 x 14 s would be left; the cut comes at 130
    assert eta.now()[1] == pytest.approx(10.0)
    clock.t += 40.0
    assert eta.now() == (HELD_SHORT, 0.0)


def test_a_run_past_its_estimate_raises_the_scale_and_never_fills_the_bar() -> None:
    eta, clock = _eta([PAIR, PAIR])
    clock.t += 20.0  # twice the first run's estimate, and still running
    pace = 20.0 / 10.0
    assert eta.now()[1] == pytest.approx(LEFT_OF_LATE * (20.0 - 10.0) + pace * (2.0 + 12.0))
    clock.t += 1e6
    share, left = eta.now()
    assert share < HELD_SHORT and left > LEFT_OF_LATE * 1e6


def test_a_configuration_stopped_early_leaves_nothing_to_come() -> None:
    eta, clock = _eta([PAIR, PAIR], rounds=10)  # -r auto, counted at 10 rounds, stopped after one
    clock.t += 12.0
    eta.ran(10.0)
    eta.ran(2.0)
    eta.begin(1, list(PAIR))
    assert eta.now()[1] == pytest.approx(10 * 12.0)


def test_a_strategy_skipped_after_the_plan_drops_out_of_each_round() -> None:
    eta, _ = _eta([PAIR, PAIR])
    eta.begin(1, ["off"])
    assert eta.now()[1] == pytest.approx(10.0)


def test_without_a_projection_the_time_left_waits_for_a_run() -> None:
    unknown = {"off": math.nan, "on": math.nan}
    eta, clock = _eta([unknown] * 3)
    clock.t += 5.0
    share, left = eta.now()
    assert share == 0.0 and math.isnan(left)
    eta.ran(5.0)  # the first run took 5 s; projected from it, 1 s a run to come
    eta.update([{"off": 5.0, "on": 1.0}] * 3)
    assert eta.now()[1] == pytest.approx(1.0 + 2 * 6.0)


def test_a_drawn_bar_shows_the_share_and_the_time_left() -> None:
    from tqdm import tqdm

    eta, clock = _eta([PAIR], rounds=2)
    clock.t += 6.0
    with tqdm(total=100.0, leave=False) as raw:
        bar = Bar(raw, 0.0)
        bar.draw()
        assert raw.n == 0 and raw.postfix == "warming up"  # before the first estimate
        bar.eta = eta
        bar.draw()
        assert raw.n == 25.0 and raw.postfix == "about 00:18 left"


def test_every_tick_redraws_the_bar_even_where_its_share_has_not_moved() -> None:
    """tqdm's own update redraws only once the count has grown by as much as between its earlier redraws: a long
    run's bar, moving a tenth of a per cent in seconds, froze with its clock and time left."""
    from tqdm import tqdm

    eta, clock = _eta([PAIR], rounds=2)
    drawn: list[str] = []
    with tqdm(total=100.0, leave=False, delay=0) as raw:
        raw.display = lambda *a, **k: drawn.append(raw.postfix)  # type: ignore[method-assign]
        bar = Bar(raw, 0.0)
        bar.eta = eta
        for _ in range(3):
            clock.t += 0.001  # the share rounds to the same tenth each time
            bar.draw()
        assert drawn == ["about 00:23 left"] * 3
    hidden = tqdm(total=100.0, leave=False, delay=3600)
    hidden.display = lambda *a, **k: drawn.append("shown")  # type: ignore[method-assign]
    Bar(hidden, 3600.0).draw()  # within its delay a bar is not drawn
    hidden.close()
    assert "shown" not in drawn


def test_the_bar_is_redrawn_by_its_own_thread_while_a_run_holds_the_main_one(monkeypatch) -> None:
    eta, clock = _eta([PAIR], rounds=2)
    drawn = threading.Event()
    real = Bar.draw

    def noted(bar) -> None:
        real(bar)
        if bar.tqdm.n > 0 and threading.current_thread() is not threading.main_thread():
            drawn.set()

    monkeypatch.setattr(Bar, "draw", noted)
    with progress_bar(enabled=True, delay_s=0.0, tick_s=0.001) as bar:
        bar.eta = eta
        clock.t += 6.0
        assert drawn.wait(timeout=60), "the ticker never redrew the bar"


def test_a_finished_bar_is_full_and_a_stopped_one_says_so(capsys) -> None:
    eta, clock = _eta([PAIR])
    with progress_bar(enabled=True, delay_s=0.0) as bar:
        bar.eta = eta
        clock.t += 1e6  # far past the estimate: held short of full until the end
        bar.draw()
        assert 0 < bar.tqdm.n <= 100 * HELD_SHORT
    assert bar.tqdm.n == bar.tqdm.total and bar.tqdm.postfix == "done"
    drawn = capsys.readouterr().err.split("\r")  # the end is drawn even right after a tick's draw, then erased
    assert any("100%" in line and "done]" in line for line in drawn)
    with pytest.raises(KeyboardInterrupt), progress_bar(enabled=True, delay_s=0.0) as bar:
        raise KeyboardInterrupt
    assert "stopped" in bar.tqdm.desc


def test_a_refused_run_or_one_never_shown_leaves_no_trace(capsys) -> None:
    from kvmagic import KVMagicError

    with pytest.raises(KVMagicError), progress_bar(enabled=True, delay_s=0.0) as bar:
        raise KVMagicError("would take about 13 min")
    assert "stopped" not in bar.tqdm.desc and bar.tqdm.n == bar.tqdm.total
    capsys.readouterr()
    with pytest.raises(KeyboardInterrupt), progress_bar(enabled=True, delay_s=3600.0) as bar:
        raise KeyboardInterrupt
    assert "stopped" not in bar.tqdm.desc and capsys.readouterr().err == ""


def test_a_real_run_moves_its_bar_against_the_runs_projections(tiny, monkeypatch) -> None:
    """Every timed run reaches the bar, each measured against its projection, and it closes full with no tqdm
    warning (a share past 1 makes tqdm clamp and warn)."""
    made: list[Eta] = []
    real = benchmark.Eta

    def kept(*args, **kwargs) -> Eta:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(benchmark, "Eta", kept)
    monkeypatch.setattr(benchmark, "PROGRESS_AFTER_S", 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=1, repeat=2, progress=True)
    (eta,) = made
    assert eta._done == 4  # four timed runs
    assert all(seconds > 0 for seconds in eta._runs[0].values())  # each renewed the projections from the runs


def test_a_long_run_late_after_short_ones_on_time_sets_the_pace_for_the_rest() -> None:
    """A sweep's longest runs come last; the first of them, five times its estimate, says more of those to come
    than the short runs that kept to theirs."""
    eta, clock = _eta([{"off": 1.0, "on": 1.0}, PAIR], rounds=2)
    for _ in range(4):
        clock.t += 1.0
        eta.ran(1.0)
    eta.begin(1, list(PAIR))
    clock.t += 50.0
    assert eta.now()[1] == pytest.approx(LEFT_OF_LATE * (50.0 - 10.0) + 5.0 * (2.0 + 10.0 + 2.0))


def test_the_work_between_configurations_counts_once_for_each_gap_to_come() -> None:
    """One-token runs, quality and the result come between a configuration's last timed run and the next one's
    first, and after the last: each gap measured so far is the mean the gaps to come are taken at."""
    eta, clock = _eta([PAIR, PAIR, PAIR])
    clock.t += 12.0
    eta.ran(10.0)
    eta.ran(2.0)  # the first configuration's runs, as projected
    assert eta.now()[1] == pytest.approx(24.0)  # no gap measured yet
    clock.t += 4.0  # its one-token runs and the like
    eta.begin(1, list(PAIR))
    clock.t += 10.0
    eta.ran(10.0)  # closes the gap: 4 s
    assert eta.now()[1] == pytest.approx(2.0 + 12.0 + 4.0 * 2)  # after this configuration and before the last


def test_once_a_configuration_has_run_its_rounds_no_run_is_under_way() -> None:
    eta, clock = _eta([PAIR], rounds=1)
    clock.t += 12.0
    eta.ran(10.0)
    eta.ran(2.0)
    assert eta.now()[1] == 0.0  # not the first strategy's projection again
