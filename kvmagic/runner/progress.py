"""The progress bar over a run's timed runs: it moves every second, and its time left comes from the runs done.

A probe of one moment is wrong by large factors on a machine that gets busier or quieter; the runs a cell has just
made say how it runs now. So the time left is the projection of the runs still to come from the runs already made
(:class:`kvmagic.runner.deadline_run.Deadline`, renewed as each run finishes), with the work around the runs
(:class:`Eta`), and never past the deadline's cut. A
small thread redraws the bar every second (:func:`progress_bar`): it only reads :class:`Eta` and draws, never
touching the timed work.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from time import perf_counter
from typing import TYPE_CHECKING, Any

from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from kvmagic.core.strategy import Strategy

__all__ = ["HELD_SHORT", "TICK_S", "Bar", "Eta", "progress_bar"]

HELD_SHORT = 0.99  # the share of the bar it may reach before the run has finished
TICK_S = 1.0  # seconds between redraws
LEFT_OF_LATE = 0.5  # a run past its projection is taken to need this share of its time past it, again


class Eta:
    """How far a run has come and how long it has left, from each configuration's projected runs.

    ``runs[i]`` maps each strategy to the projected seconds of one timed run in configuration ``i`` (NaN: not known
    until a run has finished; empty: left out), of which ``rounds`` rounds are planned. The projections say how the
    machine runs now: :meth:`update` renews them from the runs made as each finishes, so they are taken as they
    are, never scaled again by how earlier projections fared (that would count a slower machine twice). What
    they leave out is the work between configurations (one-token runs, quality, a warm-up, the result at the
    end), which the user waits for too: each gap between one configuration's last timed run and the next one's
    first, as measured so far, is counted again for every gap to come. A run under way past its projection is
    late (:meth:`_left`). ``ends_by`` is the clock's reading by which the run has ended whatever happens (the
    deadline's cut; None: no limit). ``clock`` is injectable, so the arithmetic is tested without waiting.
    """

    def __init__(
        self,
        runs: Sequence[Mapping[Strategy, float]],
        rounds: int,
        *,
        ends_by: float | None = None,
        clock: Callable[[], float] = perf_counter,
    ) -> None:
        self._runs, self._rounds, self._clock, self._ends_by = list(runs), rounds, clock, ends_by
        self._gaps: list[float] = []  # the work between configurations, each gap's seconds
        self._started = self._mark = clock()
        self._index, self._names, self._done = 0, list(runs[0]) if runs else [], 0
        self._last = self._started  # when the last timed run ended
        self._lock = threading.Lock()

    def update(self, runs: Sequence[Mapping[Strategy, float]]) -> None:
        """The projections renewed from the runs made so far."""
        with self._lock:
            self._runs = list(runs)

    def begin(self, index: int, names: Sequence[Strategy]) -> None:
        """Configuration ``index`` starts its timed runs now, one of each of ``names`` per round; what an
        earlier one did not run (a stop rule satisfied early, a configuration left out) is no longer to come."""
        with self._lock:
            self._index, self._names, self._done, self._mark = index, list(names), 0, self._clock()

    def ran(self, seconds: float) -> None:
        """A timed run of ``seconds`` has finished; the first of a configuration after the first closes the gap
        since the last run before it."""
        with self._lock:
            now = self._clock()
            if self._done == 0 and self._index > 0:
                self._gaps.append(max(now - self._last - seconds, 0.0))
            self._done, self._mark, self._last = self._done + 1, now, now

    def now(self) -> tuple[float, float]:
        """The share of the bar done (at most :data:`HELD_SHORT`) and the seconds left (NaN: not known yet)."""
        with self._lock:
            now = self._clock()
            left = self._left(now - self._mark)
            if self._ends_by is not None:
                left = min(left, max(self._ends_by - now, 0.0))
            elapsed = now - self._started
        share = 0.0 if math.isnan(left) or elapsed + left <= 0 else elapsed / (elapsed + left)
        return min(share, HELD_SHORT), left

    def _current(self) -> float:
        """The projection of the run under way (none once the configuration's planned rounds are done)."""
        if self._index >= len(self._runs) or not self._names or self._done >= len(self._names) * self._rounds:
            return 0.0
        return self._runs[self._index].get(self._names[self._done % len(self._names)], 0.0)

    def _left(self, running: float) -> float:
        """The runs to come as projected, and the gaps to come at the mean of those measured (one after this
        configuration, and one before each later one); once the run under way, ``running`` seconds in, passes its
        projection, the runs to come at its pace instead (a sweep's longest runs come last: they are as slow as
        this one at least), and itself as needing :data:`LEFT_OF_LATE` of its time past the projection again."""
        current, pace = self._current(), 1.0
        this = max(current - running, 0.0)
        if current > 0 and running > current:
            pace = running / current
            this = LEFT_OF_LATE * (running - current)
        here = self._runs[self._index] if self._index < len(self._runs) else {}
        names = self._names
        rest = sum(here.get(names[k % len(names)], 0.0) for k in range(self._done + 1, len(names) * self._rounds))
        to_come = [runs for runs in self._runs[self._index + 1 :] if runs]
        later = sum(self._rounds * sum(runs.values()) for runs in to_come)
        gaps = statistics.fmean(self._gaps) * (1 + len(to_come)) if self._gaps else 0.0
        return this + pace * (rest + later) + gaps


class Bar:
    """A tqdm bar and the :class:`Eta` it shows once the run's estimate exists (before it: "warming up")."""

    def __init__(self, bar: Any, delay_s: float) -> None:
        self.tqdm, self.delay_s, self.started = bar, delay_s, perf_counter()
        self.eta: Eta | None = None

    @property
    def shown(self) -> bool:
        """Whether the bar has been on the screen: tqdm holds it back for its first ``delay_s``."""
        return perf_counter() - self.started >= self.delay_s

    def describe(self, text: str) -> None:
        self.tqdm.set_description_str(text, refresh=False)  # drawn by the next tick, not before the delay

    def draw(self) -> None:
        """Redraw the bar as things stand: its share of the run and the time left, as the :class:`Eta` says.

        Drawn outright once shown: tqdm's own ``update`` redraws only once the count has grown by as much as it
        grew between earlier redraws, so a bar that moves slowly would freeze, its clock and time left with it."""
        share, left = self.eta.now() if self.eta is not None else (0.0, math.nan)
        if self.eta is None:
            said = "warming up"  # the warm-up is the first probe: no time left to say before it ends
        else:
            said = f"about {'?' if math.isnan(left) else self.tqdm.format_interval(left)} left"
        self.tqdm.set_postfix_str(said, refresh=False)
        self.tqdm.n = round(100.0 * share, 1)  # may go back: the time left learned more
        if self.shown:
            self.tqdm.refresh()


@contextmanager
def progress_bar(*, enabled: bool, delay_s: float, tick_s: float = TICK_S) -> Iterator[Bar]:
    """tqdm's auto bar (a widget in Jupyter, text in a terminal) in per cent of the run, with the time left,
    redrawn every ``tick_s`` by a daemon thread, shown once the run has lasted ``delay_s``; a finished run ends
    it full (Jupyter then removes it), a stopped one says so; one never shown, or refused, leaves no trace."""
    from tqdm.auto import tqdm

    bar_format = "{desc} {percentage:3.0f}%|{bar}| [{elapsed}{postfix}]"
    shape = {"total": 100.0, "bar_format": bar_format, "desc": "kvbench", "leave": False, "delay": delay_s}
    with tqdm(disable=not enabled, **shape) as raw:
        bar = Bar(raw, delay_s)
        stop = threading.Event()
        ticker = threading.Thread(target=_tick, args=(bar, stop, tick_s), daemon=True, name="kvbench-progress")
        if enabled:
            bar.draw()
            ticker.start()
        try:
            yield bar
        except BaseException as error:
            _halt(ticker, stop)
            if bar.shown and not isinstance(error, KVMagicError):  # Jupyter turns it red too: it did not finish
                bar.describe("kvbench: stopped")
                raw.refresh()
            else:
                raw.update(raw.total - raw.n)  # never seen, or refused (the error says why): it leaves no trace
            raise
        _halt(ticker, stop)
        raw.set_postfix_str("done", refresh=False)
        raw.update(raw.total - raw.n)  # full: it closes as done, not failed
        if enabled and bar.shown:  # tqdm skips a redraw within 0.1 s of the last one: the end must be seen
            raw.refresh()


def _tick(bar: Bar, stop: threading.Event, tick_s: float) -> None:
    while not stop.wait(tick_s):
        bar.draw()


def _halt(ticker: threading.Thread, stop: threading.Event) -> None:
    stop.set()
    if ticker.is_alive():
        ticker.join()
