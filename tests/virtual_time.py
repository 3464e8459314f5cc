"""A made-up machine for the deadline's tests: tiny generates its real tokens, but the clock the runner reads moves
only as each ``generate`` runs, by what the machine says that run takes. So a test decides how fast the machine
is, and when it gets busier, and no verdict depends on the speed of the one running the tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from kvmagic.measure import timing
from kvmagic.runner import benchmark
from kvmagic.runner.deadline_run import Cut

__all__ = ["Machine", "install"]


@dataclass
class Machine:
    """Seconds of a ``generate``: each uncached step a forward over the whole sequence, ``fixed_s`` plus
    ``position_s`` per position; a cached one its prefill, then ``step_s`` a step; every sequence of a batch in
    turn. ``load(call)`` multiplies the ``call``-th ``generate`` (from 0): a machine that gets busier or quieter.
    ``now`` is its clock; ``cut_at`` when the deadline's timer would fire (None: not armed); ``calls`` each
    generate as (prompt tokens, new tokens, use_cache, batch)."""

    position_s: float
    step_s: float
    fixed_s: float = 0.0
    load: Callable[[int], float] = lambda call: 1.0
    now: float = 1000.0
    cut_at: float | None = None
    calls: list[tuple[int, int, bool, int]] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def forward(self, length: int) -> float:
        return self.fixed_s + self.position_s * length

    def seconds(self, prompt_tokens: int, new_tokens: int, use_cache: bool, batch: int = 1) -> float:
        """One generate on this machine before its load."""
        if use_cache:
            return batch * (self.forward(prompt_tokens) + (new_tokens - 1) * self.step_s)
        return batch * sum(self.forward(prompt_tokens + i) for i in range(new_tokens))

    def run(self, prompt_tokens: int, new_tokens: int, use_cache: bool, batch: int) -> None:
        """The clock moves by the run's seconds; past ``cut_at``, the timer fires during it."""
        taken = self.load(len(self.calls)) * self.seconds(prompt_tokens, new_tokens, use_cache, batch)
        self.calls.append((prompt_tokens, new_tokens, use_cache, batch))
        if self.cut_at is not None and self.now + taken > self.cut_at:
            self.now = self.cut_at
            raise Cut
        self.now += taken

    @contextmanager
    def armed(self, seconds: float | None) -> Iterator[None]:
        """The deadline's timer on this clock, in place of the real thread (:func:`~kvmagic.runner.deadline_run.cut_after`)."""
        self.cut_at = None if seconds is None else self.now + seconds
        try:
            yield
        finally:
            self.cut_at = None


def install(monkeypatch: pytest.MonkeyPatch, tiny: Any, machine: Machine) -> Machine:
    """Run tiny's ``generate`` on ``machine``'s clock, and the runner's timing and deadline on that clock."""
    real = type(tiny.model).generate

    def generate(model: Any, *args: Any, **kwargs: Any) -> Any:
        config, ids = kwargs["generation_config"], kwargs["input_ids"]
        machine.run(ids.shape[-1], config.max_new_tokens, bool(config.use_cache), ids.shape[0])
        return real(model, *args, **kwargs)

    monkeypatch.setattr(type(tiny.model), "generate", generate)
    monkeypatch.setattr(timing, "perf_counter", machine)
    monkeypatch.setattr(benchmark, "perf_counter", machine)
    monkeypatch.setattr(benchmark, "cut_after", machine.armed)
    return machine
