"""Run steps of checks in order under a deadline: print each check as it finishes, write the report after each.

A step runs only when its estimate fits the time left; one that runs past the deadline is stopped
there (an alarm raises inside it), and it and every step after it are reported NOT RUN with the
reason. SIGTERM stops a run the same way. Whatever finished is in the report either way.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from checklist import NOT_RUN, Check, guarded, line
from gpu_report import write_report

__all__ = ["Session", "Step", "Stopped"]


class Stopped(BaseException):
    """The deadline passed, or the process was told to stop: not an error of the check that was running."""


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[], Check | list[Check]]
    estimate_s: float  # how long it should take on this machine: it starts only if that fits


class Session:
    def __init__(
        self,
        deadline_s: float,
        out: Path | None,
        header: dict[str, Any],
        *,
        clock: Callable[[], float] = time.monotonic,
        echo: Callable[[str], None] = print,
    ) -> None:
        self.deadline_s, self.out, self.header = deadline_s, out, header
        self.clock, self.echo = clock, echo
        self.start = clock()
        self.checks: list[Check] = []
        self.stopped = ""  # why every step from here on is NOT RUN

    def left(self) -> float:
        return self.deadline_s - (self.clock() - self.start)

    def run(self, steps: list[Step]) -> list[Check]:
        with _on_terminate():
            for step in steps:
                try:
                    self._step(step)
                except Stopped as why:  # between two steps: the next ones say so
                    self.stopped = str(why)
        return self.checks

    def _step(self, step: Step) -> None:
        left = self.left()
        if self.stopped:
            self._add([Check(step.name, NOT_RUN, self.stopped)])
            return
        if step.estimate_s > left:
            self._add([Check(step.name, NOT_RUN, f"about {step.estimate_s:.0f} s needed, {max(left, 0):.0f} s left")])
            return
        started = self.clock()
        try:
            with _alarm(left):
                found = guarded(step.name, step.run)
        except Stopped as why:
            self.stopped = f"{why} ({self.clock() - started:.0f} s into {step.name!r})"
            found = [Check(step.name, NOT_RUN, self.stopped)]
        seconds = self.clock() - started
        self._add([replace(check, seconds=seconds) for check in found])

    def _add(self, checks: list[Check]) -> None:
        for check in checks:
            self.echo(line(check))
        self.checks += checks
        self.header["elapsed_s"] = round(self.clock() - self.start, 1)
        if self.out is not None:
            write_report(self.out, self.header, self.checks)


@contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Raise Stopped in this (main) thread once ``seconds`` have passed."""

    def ring(*_: object) -> None:
        raise Stopped("stopped at the deadline")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def _on_terminate() -> Iterator[None]:
    def stop(*_: object) -> None:
        raise Stopped("stopped by SIGTERM")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
