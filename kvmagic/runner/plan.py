"""What the runner works from: the strategies and inputs of every configuration, and what it may spend."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from kvmagic.core.addon import AddOn, addons, used_by
from kvmagic.core.deadline import shortest_first
from kvmagic.core.lengths import configurations
from kvmagic.core.strategy import PAIR, REFERENCE
from kvmagic.errors import KVMagicError, clipped
from kvmagic.measure.guards import is_out_of_memory
from kvmagic.measure.lockstep import any_reason
from kvmagic.measure.strategies import Setup, checked, setups
from kvmagic.runner.judge import Judge
from kvmagic.runner.prompt import check_positions, prompt_inputs, text_ids
from kvmagic.runner.rounds import first_call

if TYPE_CHECKING:
    from transformers import BatchEncoding

    from kvmagic.core.config import Config
    from kvmagic.core.spec import BenchSpec
    from kvmagic.core.strategy import Strategy
    from kvmagic.measure.loaded import LoadedModel

__all__ = ["Plan", "make_plan", "probe_two_tokens", "rounds_of", "todo"]

T = TypeVar("T")


@dataclass
class Plan:
    """What the runner works from: the request, its inputs per prompt length, and the strategies."""

    loaded: LoadedModel
    spec: BenchSpec
    inputs: dict[int, BatchEncoding]
    natural_tokens: int
    configs: list[Config]
    strategies: list[Setup]  # every strategy asked for, in order, runnable or not
    skipped: dict[Strategy, str] = field(default_factory=dict)  # strategy -> why it did not run
    judge: Judge | None = None  # a comparison of strategies: how each one's quality is read
    prompt: str = ""  # as written: an add-on that reads it its own way reads it here

    @property
    def remarks(self) -> dict[Strategy, str]:
        """Strategy -> what a reader of its rows should know though it runs (see ``Setup.note``)."""
        return {s.strategy: s.note for s in self.runnable if s.note}

    def attempt(self, strategy: Setup, run: Callable[[], T]) -> T | None:
        """``run()``; a strategy whose run fails (not for memory) is skipped with the error as its reason.

        The cache off and on (``off``, ``dynamic``) are the model's own ``generate``: an error there is the model's,
        the user's to see. Across ranks, a strategy that failed on one is skipped on every one, with the first
        failing rank's reason.
        """
        if strategy.strategy in PAIR:
            return run()
        found, failed = None, ""
        try:
            found = run()
        except Exception as error:
            if is_out_of_memory(error):
                raise
            said = clipped((str(error).splitlines() or [""])[0])
            failed = f"failed: {type(error).__name__}: {said}"
        failed = any_reason(failed)
        if failed:
            self.skipped[strategy.strategy] = failed
        return None if failed else found

    @property
    def runnable(self) -> list[Setup]:
        return [s for s in self.strategies if not s.reason and s.strategy not in self.skipped]


def make_plan(loaded: LoadedModel, prompt: str, spec: BenchSpec) -> Plan:
    """Resolve the strategies (with those the add-ons add), tokenize, and check every configuration fits the
    model."""
    resolved = setups(loaded, checked(spec.cache or PAIR), kv_bits=spec.kv_bits, compile=spec.compile)
    for addon in used_by(spec):
        resolved = addon.strategies(spec, resolved)
    inputs, natural_tokens = prompt_inputs(loaded, prompt, spec)
    configs = configurations(list(inputs), spec.new_tokens, spec.batch)
    forced = None if spec.quality_text is None else text_ids(loaded, spec.quality_text)
    stretched = spec.prompt_tokens is not None
    for prompt_tokens, new_tokens, _ in configs:
        check_positions(loaded, prompt_tokens, new_tokens, stretched=stretched)
        check_positions(loaded, prompt_tokens, spec.warmup_tokens, "warmup_tokens", stretched=stretched)
        if forced is not None:
            check_positions(loaded, prompt_tokens, len(forced), "quality_text", stretched=stretched)
    skipped = {s.strategy: s.reason for s in resolved if s.reason}
    _check_something_runs(resolved)
    judge = Judge(forced) if spec.judged else None
    return Plan(loaded, spec, inputs, natural_tokens, configs, resolved, skipped, judge, prompt)


def _check_something_runs(chosen: list[Setup]) -> None:
    """Refuse a comparison in which nothing but the reference can run here: its table would hold no measurement."""
    others = [s for s in chosen if s.strategy != REFERENCE]
    if others and all(s.reason for s in others):
        first = others[0]
        raise KVMagicError(f"nothing to set against {REFERENCE} here: {first.strategy} {first.reason}; add a strategy "
                           "that runs here to {cache}, e.g. dynamic", "cache")  # fmt: skip


def todo(plan: Plan, before: Mapping[AddOn, Any]) -> list[Config]:
    """The configurations to measure, in the order to measure them, the least work first (:func:`shortest_first`):
    the budget is a deadline (:class:`~kvmagic.runner.deadline_run.Deadline`), and what fits it is measured before
    what would pass it. Each add-on the request uses may leave some out (:meth:`~kvmagic.core.addon.AddOn.todo`,
    with what its ``before`` found)."""
    found = shortest_first(plan.configs)
    for addon, data in before.items():
        found = addon.todo(plan, found, data)
    return found


def probe_two_tokens(plan: Plan, strategies: Sequence[Setup], inputs: BatchEncoding) -> dict[Strategy, float]:
    """Each of ``strategies``' two-token run, for one whose warm-up (fewer than two tokens, or none: a compiled
    strategy warms up at each configuration's own shape) says nothing of its cached steps. A compiled strategy runs
    as its uncompiled self, told not to compile (its compile is no part of a timed run); one that fails is
    skipped."""
    found = {}
    for strategy in strategies:
        plain = dataclasses.replace(strategy, settings={**strategy.settings, "disable_compile": True})
        seconds = plan.attempt(strategy, partial(first_call, plan.loaded, inputs, 2, plain))
        if seconds is not None:
            found[strategy.strategy] = seconds
    return found


def rounds_of(plan: Plan) -> int:
    """Runs per strategy at each configuration beside the warm-up and first-token ones: the timed rounds, the
    hooked one of ``steps``, and those the add-ons add (:meth:`~kvmagic.core.addon.AddOn.extra_runs`)."""
    return plan.spec.rounds + sum(addon.extra_runs(plan) for addon in addons())
