"""Holding a run to ``max_seconds`` as a deadline: the runs seen, the work left out, and the timer that cuts.

Before each configuration, and before each of its fixed rounds, the work it still has is projected from the
runs this cell has made (:mod:`kvmagic.core.deadline`); work that would pass the deadline is not started, and the
result says what was left out and what budget would fit it. A run the machine slows past the deadline by the
margin is cut by a timer thread as Ctrl-C would stop it (:func:`cut_after`): the timed region gains nothing.
"""

from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING

from kvmagic.core.config import Config
from kvmagic.core.deadline import (
    Seen,
    config_seconds,
    cut_seconds,
    fits,
    fitting_budget,
    nothing_finished,
    refusal,
    run_seconds,
)  # fmt: skip
from kvmagic.core.stop import StopRule
from kvmagic.measure.lockstep import from_first

if TYPE_CHECKING:
    from kvmagic.core.strategy import Strategy
    from kvmagic.errors import KVMagicError

__all__ = ["Cut", "Deadline", "HeldTo", "LeftOut", "cut_after"]


class Cut(KeyboardInterrupt):
    """The run went on past its deadline by the margin and was stopped, as Ctrl-C stops it; not the user's
    interrupt, which the runner tells apart by this type."""


class LeftOut(Exception):
    """The rounds a configuration still has would pass the deadline: it is left out, its runs so far dropped."""


@contextmanager
def cut_after(seconds: float | None) -> Iterator[None]:
    """Raise :class:`Cut` in this thread once ``seconds`` have passed, unless the block has ended (None: never).

    A daemon thread sleeps until then and, if the block is still running, sets the exception pending in this
    thread (``PyThreadState_SetAsyncExc``), which raises it at its next Python instruction, where a Ctrl-C would
    land: between torch's calls, never inside one. Nothing of it runs in the timed region; it wakes once. A cut
    pending as the block ends is withdrawn: the work it would have stopped has finished.
    """
    if seconds is None:
        yield
        return
    target, lock, stop = threading.get_ident(), threading.Lock(), threading.Event()
    state = {"ended": False, "fired": False}

    def fire() -> None:
        if stop.wait(max(seconds, 0.0)):
            return
        with lock:
            if not state["ended"]:
                state["fired"] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(Cut))

    timer = threading.Thread(target=fire, daemon=True, name="kvbench-deadline")
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["ended"] = True
            if state["fired"]:  # raised already (then this clears nothing), or still pending: withdrawn
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), None)
        stop.set()
        timer.join()


@dataclass(frozen=True)
class HeldTo:
    """A stop rule of fixed rounds held to the deadline: before each round after the first, the configuration's
    rounds left must fit (``fits(rounds done)``), else it is left out (:class:`LeftOut`). ``-r auto`` keeps its own
    cap: its rounds past the fewest it may stop at are not counted ahead."""

    rule: StopRule
    fits: Callable[[int], bool]

    @property
    def sequential(self) -> bool:
        return self.rule.sequential

    def done(self, rounds: int, elapsed: float, times: Mapping[Strategy, Sequence[float]]) -> bool:
        if self.rule.done(rounds, elapsed, times):
            return True
        if not self.rule.sequential and not self.fits(rounds):
            raise LeftOut
        return False


class Deadline:
    """The run's clock against ``max_seconds``, every ``generate`` it has made, and what it left out.

    ``rounds`` are the runs per strategy each configuration takes beside its ``first_tokens`` one-token runs
    (:func:`~kvmagic.core.deadline.config_seconds`); ``clock`` is injectable, so the decisions are tested on
    made-up times. Across ranks every decision is rank 0's (:func:`from_first`), so all of them act alike.
    """

    def __init__(
        self, max_seconds: float, *, rounds: int, first_tokens: int, clock: Callable[[], float] = perf_counter
    ) -> None:
        self.max_seconds, self.rounds, self.first_tokens, self.clock = max_seconds, rounds, first_tokens, clock
        self.started = clock()
        self.seen: list[Seen] = []
        self.timed = False  # whether a timed run has finished: until then the warm-up alone projects
        self.estimate_s: float | None = None  # the whole run as projected before its first timed run
        self.left_out: list[Config] = []
        self.cut: Config | None = None  # the configuration a cut stopped, first of those left out
        self.current: Config | None = None  # the configuration being measured (its warm-up included)
        self._current_from = self.started
        self._kept_until = self.started  # up to when the time spent bought what is kept: a row, or the warm-up
        self._measured = False  # whether a configuration has been measured
        self._cut_ran = 0.0  # how long the cut configuration had run

    def start(self) -> None:
        """The deadline runs from now."""
        self.started = self._current_from = self._kept_until = self.clock()

    @property
    def spent(self) -> float:
        return self.clock() - self.started

    @property
    def cut_in(self) -> float | None:
        """Seconds from now to the cut (None: no limit)."""
        at = cut_seconds(self.max_seconds)
        return None if at is None else at - self.spent

    @property
    def ends_by(self) -> float | None:
        """The clock's reading by which the run has ended, whatever happens (None: no limit)."""
        at = cut_seconds(self.max_seconds)
        return None if at is None else self.started + at

    def saw(self, strategy: Strategy, config: Config, seconds: float, *, timed: bool = False) -> None:
        """A ``generate`` of ``strategy`` at ``config`` took ``seconds``: the latest evidence of the machine."""
        if config.new_tokens >= 1:
            self.seen.append(Seen(strategy, config, seconds, timed))
        self.timed = self.timed or timed

    def run(self, strategy: Strategy, config: Config) -> float:
        """One run's projected seconds (NaN: nothing has run yet)."""
        found = run_seconds(self.seen, strategy, config)
        return math.nan if found is None else found

    def work(self, config: Config, strategies: Sequence[Strategy], rounds: int | None = None) -> float:
        """A configuration's projected work: its rounds and its one-token runs (NaN: nothing has run yet)."""
        rounds = self.rounds if rounds is None else rounds
        found = config_seconds(self.seen, config, strategies, rounds=rounds, first_tokens=self.first_tokens)
        return math.nan if found is None else found

    def _fits(self, needed: float) -> bool:
        return bool(from_first(math.isnan(needed) or fits(self.spent, needed, self.max_seconds, measured=True)))

    def warms(self, config: Config, warm_up: float) -> bool:
        """Whether the warm-up at a new prompt length, projected at ``warm_up`` seconds, fits; if not, ``config``
        is left out."""
        self._begin(config)
        return self._fits(warm_up) or self._leave_out(config)

    def starts(self, config: Config, strategies: Sequence[Strategy]) -> bool:
        """Whether to measure ``config`` now, and if not, it is left out. Before any timed run only its first run
        is projected, from the warm-up alone, and only one far past the budget is refused (the error raised)."""
        self._begin(config)
        if self.timed:
            return self._fits(self.work(config, strategies)) or self._leave_out(config)
        first = self.run(strategies[0], config)
        if not math.isnan(first) and not from_first(fits(self.spent, first, self.max_seconds, measured=False)):
            raise refusal(config, first, self.max_seconds)
        return True

    def estimate(self, todo: Sequence[Config], strategies: Sequence[Strategy], warmup_tokens: int) -> None:
        """The whole run as projected from the warm-up, before its first timed run: what was spent, every
        configuration's work, and a warm-up at each prompt length after the first (None: nothing to project)."""
        lengths = list(dict.fromkeys(c.prompt_tokens for c in todo))[1:]
        work = [self.work(c, strategies) for c in todo]
        work += [self.warmup_seconds(length, strategies, warmup_tokens) for length in lengths]
        total = self.spent + math.fsum(work)
        self.estimate_s = None if math.isnan(total) else total

    def warmup_seconds(self, prompt_tokens: int, strategies: Sequence[Strategy], tokens: int) -> float:
        """A warm-up of ``tokens`` of each strategy at a prompt length (NaN: nothing has run yet)."""
        return math.fsum(self.run(s, Config(prompt_tokens, tokens)) for s in strategies)

    def to_come(
        self, todo: Sequence[Config], index: int, strategies: Sequence[Strategy], done: int = 0
    ) -> list[dict[Strategy, float]]:
        """Each configuration's projected runs, per strategy, from ``index`` (under way, ``done`` runs into it) on;
        empty for one measured already, left out, or that the deadline would leave out as things stand."""
        runs: list[dict[Strategy, float]] = [{} for _ in todo]
        if index >= len(todo):
            return runs
        runs[index] = {s: self.run(s, todo[index]) for s in strategies}
        left = self.work(todo[index], strategies, self.rounds - done // max(len(strategies), 1))
        ends = self.spent + (0.0 if math.isnan(left) else left)
        for later in range(index + 1, len(todo)):
            config = todo[later]
            needed = self.work(config, strategies)
            if config not in self.left_out and (
                math.isnan(needed) or fits(ends, needed, self.max_seconds, measured=True)
            ):
                runs[later] = {s: self.run(s, config) for s in strategies}
                ends += 0.0 if math.isnan(needed) else needed
        return runs

    def round_fits(self, config: Config, strategies: Sequence[Strategy], done: int) -> bool:
        """Whether the rounds ``config`` has left after ``done`` of them, and its one-token runs, fit."""
        return self._fits(self.work(config, strategies, self.rounds - done))

    def finished(self) -> None:
        """The configuration under way has been measured."""
        self._kept_until, self.current, self._measured = self.clock(), None, True

    def leave_out(self, config: Config) -> None:
        """``config`` is left out: its rounds left would pass the deadline (its runs so far are dropped)."""
        self._leave_out(config)

    def stopped_by_cut(self, todo: Sequence[Config], measured: Collection[Config]) -> None:
        """The timer cut the run: the configuration under way (before any began, the first to come) is left out
        first, then every other one not measured."""
        rest = [c for c in todo if c not in measured]
        cut = self.current if self.current is not None else next(iter(rest), None)
        if cut is None:
            return
        self.cut, self._cut_ran = cut, self.clock() - self._current_from if self.current is not None else 0.0
        self.left_out = [cut, *(c for c in rest if c != cut)]

    def fitting_s(self, strategies: Sequence[Strategy]) -> float | None:
        """A ``max_seconds`` that should fit everything this run left out, as the runs made project it (None:
        nothing left out, or nothing ran to project it from)."""
        needed = math.fsum(self._needed(c, strategies) for c in self.left_out)
        if not self.left_out or math.isnan(needed):
            return None
        return fitting_budget(self._kept_until - self.started + needed)

    def nothing_finished(self, strategies: Sequence[Strategy]) -> KVMagicError:
        """Why a run with no configuration finished returns nothing."""
        config = self.left_out[0]
        needed = self._kept_until - self.started + self._needed(config, strategies)
        return nothing_finished(config, self.max_seconds, None if math.isnan(needed) else needed, cut=bool(self.cut))

    def _needed(self, config: Config, strategies: Sequence[Strategy]) -> float:
        """What ``config`` should take, the cut one at least as long as it ran (NaN: nothing ran to say)."""
        needed = self.work(config, strategies)
        return max(needed, self._cut_ran) if config == self.cut else needed

    def _begin(self, config: Config) -> None:
        if self.current != config:
            self.current, self._current_from = config, self.clock()
            if not self._measured:
                self._kept_until = self._current_from

    def _leave_out(self, config: Config) -> bool:
        self.left_out.append(config)
        self.current = None
        return False
