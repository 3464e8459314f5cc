"""What the runner works from: the strategies and inputs of every configuration, and what it may spend."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from kvmagic.core.addon import addons, used_by
from kvmagic.core.budget import (
    check_budget,
    estimate_seconds,
    floor_seconds,
    plan_within_budget,
    round_seconds,
    scaled_seconds,
)  # fmt: skip
from kvmagic.core.config import Config
from kvmagic.core.lengths import configurations
from kvmagic.core.strategy import PAIR, REFERENCE
from kvmagic.errors import KVMagicError, clipped
from kvmagic.measure.costmodel_probe import forward_seconds, probe
from kvmagic.measure.guards import is_out_of_memory
from kvmagic.measure.lockstep import any_reason, slowest
from kvmagic.measure.memory import kv_sizes
from kvmagic.measure.strategies import Setup, checked, setups
from kvmagic.results.records import Prediction
from kvmagic.runner.judge import Judge
from kvmagic.runner.prompt import check_positions, prompt_inputs, text_ids
from kvmagic.runner.rounds import first_call

if TYPE_CHECKING:
    from transformers import BatchEncoding

    from kvmagic.core.costmodel import CostModel
    from kvmagic.core.spec import BenchSpec
    from kvmagic.core.strategy import Strategy
    from kvmagic.measure.loaded import LoadedModel

__all__ = ["Budget", "Plan", "make_plan", "plan_budget"]

T = TypeVar("T")

TRIES = 3  # rounds of two-token runs, or of a sweep's first forwards; the fastest counts: a load only slows a run
SHORT_TOKENS = 1  # the forward whose time bounds F's fixed cost in a sweep's first look (floor_seconds)


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


@dataclass(frozen=True)
class Budget:
    """Which configurations to measure, their estimated weights (from the fastest probes), and the typical
    cost model (each point's median probe) that ``--predict`` reports. Where there is an estimate, ``runs``
    holds each configuration's estimated seconds of one timed run per strategy, and ``warmup_s`` those of the
    first warm-up: what the progress bar measures the runs against."""

    todo: list[Config]
    weights: list[float]
    cost: CostModel | None = None
    predictions: tuple[Prediction, ...] = ()
    estimate_s: float | None = None
    runs: tuple[dict[Strategy, float], ...] = ()
    warmup_s: float = 0.0


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


def plan_budget(plan: Plan) -> Budget:
    """What the run will cost, and what of it to measure: refused, or cut to fit, past ``max_seconds``.

    The budget counts the fastest of a few rounds of short probes: a load only slows a run, so a
    load that passes during some rounds cannot inflate the estimate and one slow round does not
    decide, while a load that lasts through every round is counted, as it will slow the run too.
    A single configuration is estimated from the fastest of ``TRIES`` rounds of two-token runs, one
    of each strategy (:func:`kvmagic.core.budget.scaled_seconds`). A sweep, or a request to
    predict, probes the cost model (:class:`kvmagic.core.costmodel.Probes`): the budget counts its
    fastest whole round; ``--predict``'s figures are each point's median round, a typical run to set
    beside measured medians. A sweep first takes a lower bound from single forwards (:func:`_floor`),
    so a hopeless one is refused in seconds, before the probes at its longest lengths. Either way the
    estimate counts the warm-ups, ``repeat="auto"`` at the fewest pairs it can stop at (``auto_cap``
    bounds the rest), the hooked round of ``steps`` and the runs the add-ons add. Across ranks in lockstep,
    every estimate is the slowest rank's, so that all of them decide alike. 0: no limit, no estimate.
    """
    spec, configs = plan.spec, plan.configs
    if not spec.predict and len(configs) == 1 and spec.max_seconds:
        single = _single_estimate(plan)
        estimate = slowest(single.total)
        check_budget(estimate, spec.max_seconds)
        return Budget(configs, [estimate], estimate_s=estimate, runs=(single.runs,), warmup_s=single.warmup)
    if not (spec.predict or (spec.max_seconds and len(configs) > 1)):
        return Budget(configs, [1.0] * len(configs))
    caches = [s.caches for s in plan.runnable]
    rounds, warmup = _rounds(plan), spec.warmup_tokens
    if not spec.predict:
        check_budget(_floor(plan, caches), spec.max_seconds)
    shortest, longest = min(c.prompt_tokens for c in configs), max(c.cached_positions for c in configs)
    probes = probe(plan.loaded, plan.inputs[configs[0].prompt_tokens], shortest, longest)
    typical, fastest = probes.typical(), probes.fastest()
    estimate = slowest(estimate_seconds(fastest, configs, repeat=rounds, warmup_tokens=warmup, caches=caches))
    predictions: tuple[Prediction, ...] = ()
    if spec.predict:
        predictions = tuple(_prediction(plan.loaded, typical, config) for config in configs)
        fits = plan_within_budget(
            fastest, configs, repeat=rounds, warmup_tokens=warmup, max_seconds=spec.max_seconds, caches=caches
        )
        todo = [config for config, fit in zip(configs, fits) if fit]
    else:
        check_budget(estimate, spec.max_seconds)
        todo = configs
    weights = [rounds * round_seconds(fastest, p, n, caches, b) for p, n, b in todo]
    runs = tuple(
        {s.strategy: batch * fastest.generate_seconds(p, n, use_cache=s.caches) for s in plan.runnable}
        for p, n, batch in todo
    )
    warmup_s = round_seconds(fastest, configs[0].prompt_tokens, warmup, caches) if warmup else 0.0
    return Budget(todo, weights, typical, predictions, estimate, runs, warmup_s)


def _floor(plan: Plan, caches: list[bool]) -> float:
    """A lower bound of the sweep's estimate (:func:`floor_seconds`), from the fastest of up to ``TRIES``
    forwards at each prompt length and at ``SHORT_TOKENS`` (each forward's own fastest: for a bound
    from below, the lower the safer). A round whose bound fits the budget ends it: more rounds could
    only lower it. So only a bound that every round puts past the budget refuses."""
    spec, lengths = plan.spec, list(plan.inputs)
    shortest = plan.inputs[min(lengths)]
    fastest = dict.fromkeys(lengths, math.inf)
    short = bound = math.inf
    for _ in range(TRIES):
        short = min(short, forward_seconds(plan.loaded, shortest, SHORT_TOKENS))
        for length in lengths:
            fastest[length] = min(fastest[length], forward_seconds(plan.loaded, plan.inputs[length], length))
        bound = slowest(floor_seconds(
            fastest, short, plan.configs, repeat=_rounds(plan), warmup_tokens=spec.warmup_tokens, caches=caches
        ))  # fmt: skip
        if bound <= spec.max_seconds:
            break
    return bound


@dataclass(frozen=True)
class _Single:
    """The one configuration's estimate: in all, one timed run per strategy, and the warm-up."""

    total: float
    runs: dict[Strategy, float]
    warmup: float


def _single_estimate(plan: Plan) -> _Single:
    """Seconds of the one configuration: warm-ups, timed rounds and first-token runs of every strategy,
    scaled from their two-token runs in the fastest of a few rounds (:func:`_fastest_round`).

    A batch's timed and first-token runs are counted as ``batch`` times one sequence's: a first,
    conservative approximation (a batch shares each step's fixed costs)."""
    (prompt_tokens, new_tokens, batch), spec = plan.configs[0], plan.spec
    runs = _fastest_round(plan, plan.inputs[prompt_tokens])
    uncached = [seconds for seconds, caches in runs.values() if not caches] or [s for s, _ in runs.values()]
    prefill = min(uncached) / 2  # a two-token run without the cache is two forwards over about P tokens

    def scaled(tokens: int, two_tokens: float, caches: bool) -> float:
        return scaled_seconds(prefill, two_tokens, prompt_tokens, tokens, use_cache=caches)

    timed = {name: batch * scaled(new_tokens, two, caches) for name, (two, caches) in runs.items()}
    warmup = sum(scaled(spec.warmup_tokens, two, caches) for two, caches in runs.values())
    first_tokens = sum(batch * scaled(1, two, caches) for two, caches in runs.values())
    return _Single(warmup + _rounds(plan) * sum(timed.values()) + first_tokens, timed, warmup)


def _rounds(plan: Plan) -> int:
    """Runs per strategy at each configuration beside the warm-up and first-token ones: the timed rounds, the
    hooked one of ``steps``, and those the add-ons add (:meth:`~kvmagic.core.addon.AddOn.extra_runs`)."""
    return plan.spec.rounds + sum(addon.extra_runs(plan) for addon in addons())


def _fastest_round(plan: Plan, inputs: BatchEncoding) -> dict[Strategy, tuple[float, bool]]:
    """Each strategy's two-token run and ``use_cache`` in the fastest of ``TRIES`` rounds (U C U C ...).

    The fastest round as a whole, as a sweep's probes count it (:class:`kvmagic.core.costmodel.Probes`);
    a compiled strategy runs as its uncompiled self, told not to compile (its compile is no part of a timed run)."""
    rounds: list[dict[Strategy, float]] = []
    for _ in range(TRIES):
        rounds.append({})
        for strategy in plan.runnable:
            plain = dataclasses.replace(strategy, settings={**strategy.settings, "disable_compile": True})
            seconds = plan.attempt(strategy, partial(first_call, plan.loaded, inputs, 2, plain))
            if seconds is not None:
                rounds[-1][strategy.strategy] = seconds
    caches = {c.strategy: c.caches for c in plan.runnable}  # a strategy that failed in any round is skipped
    fastest = min((r for r in rounds if set(caches) <= set(r)), key=lambda r: sum(r[name] for name in caches))
    return {name: (fastest[name], use_cache) for name, use_cache in caches.items()}


def _prediction(loaded: LoadedModel, cost: CostModel, config: Config) -> Prediction:
    """The cost model's figures, a batch counted as ``batch`` sequences one after another (conservative)."""
    model, (prompt_tokens, new_tokens, batch) = loaded.model, config
    return Prediction(
        prompt_tokens=prompt_tokens,
        new_tokens=new_tokens,
        uncached_s=batch * cost.generate_seconds(prompt_tokens, new_tokens, use_cache=False),
        cached_s=batch * cost.generate_seconds(prompt_tokens, new_tokens, use_cache=True),
        kv_bytes=kv_sizes(model.config, model.dtype).after(*config),
        batch=batch,
    )
