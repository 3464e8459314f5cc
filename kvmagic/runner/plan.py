"""What the runner works from: the conditions and inputs of every configuration, and what it may spend."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from kvmagic.core.budget import check_budget, estimate_seconds, plan_within_budget, round_seconds, scaled_seconds
from kvmagic.core.lengths import configurations
from kvmagic.measure.guards import is_out_of_memory
from kvmagic.measure.memory import predicted_kv_nbytes
from kvmagic.measure.probe import probe
from kvmagic.measure.strategies import Strategy, parse_names, plain_pair, strategies
from kvmagic.results.records import Prediction
from kvmagic.runner.measure import first_call
from kvmagic.runner.prompt import check_positions, prompt_inputs

if TYPE_CHECKING:
    from transformers import BatchEncoding

    from kvmagic.core.costmodel import CostModel
    from kvmagic.core.spec import BenchSpec
    from kvmagic.model.loading import LoadedModel

__all__ = ["Budget", "Plan", "plan_budget", "prepare"]

T = TypeVar("T")


@dataclass
class Plan:
    """What the runner works from: the request, its inputs per prompt length, and the conditions."""

    loaded: LoadedModel
    spec: BenchSpec
    inputs: dict[int, BatchEncoding]
    natural_tokens: int
    configs: list[tuple[int, int, int]]  # (prompt_tokens, new_tokens, batch)
    strategies: list[Strategy]  # every condition asked for, in order, runnable or not
    skipped: dict[str, str] = field(default_factory=dict)  # condition -> why it did not run

    def attempt(self, condition: Strategy, run: Callable[[], T]) -> T | None:
        """``run()``; a strategy whose run fails (not for memory) is skipped with the error as its reason.

        Only a comparison of strategies tolerates it: in the plain off/on run an error is the user's to see.
        """
        if self.spec.cache is None:
            return run()
        try:
            return run()
        except Exception as error:
            if is_out_of_memory(error):
                raise
            self.skipped[condition.name] = f"failed: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
            return None

    @property
    def runnable(self) -> list[Strategy]:
        return [s for s in self.strategies if not s.reason and s.name not in self.skipped]


@dataclass(frozen=True)
class Budget:
    """Which configurations to measure, their estimated weights, and the cost model behind them."""

    todo: list[tuple[int, int, int]]
    weights: list[float]
    cost: CostModel | None = None
    predictions: tuple[Prediction, ...] = ()
    estimate_s: float | None = None


def prepare(loaded: LoadedModel, prompt: str, spec: BenchSpec) -> Plan:
    """Resolve the conditions, tokenize, and check every configuration fits the model."""
    if spec.cache is None:
        chosen = list(plain_pair(loaded))
    else:
        chosen = strategies(loaded, parse_names(spec.cache), kv_bits=spec.kv_bits, compile=spec.compile)
    inputs, natural_tokens = prompt_inputs(loaded, prompt, spec)
    configs = configurations(list(inputs), spec.new_tokens, spec.batch)
    for prompt_tokens, new_tokens, _ in configs:
        check_positions(loaded, prompt_tokens, new_tokens)
        check_positions(loaded, prompt_tokens, spec.warmup_tokens, "warmup_tokens")
    skipped = {s.name: s.reason for s in chosen if s.reason}
    return Plan(loaded, spec, inputs, natural_tokens, configs, chosen, skipped)


def plan_budget(plan: Plan) -> Budget:
    """What the run will cost, and what of it to measure: refused, or cut to fit, past ``max_seconds``.

    A sweep, or a request to predict, probes the cost model; a single configuration is estimated
    from one two-token run of each condition (:func:`kvmagic.core.budget.scaled_seconds`). Either
    way the estimate counts the warm-ups, ``repeat="auto"`` at the fewest pairs it can stop at
    (``auto_cap`` bounds the rest) and the hooked round of ``steps``. 0: no limit, no estimate.
    """
    spec, configs = plan.spec, plan.configs
    if not spec.predict and len(configs) == 1 and spec.max_seconds:
        estimate = _single_estimate(plan)
        check_budget(estimate, spec.max_seconds)
        return Budget(configs, [estimate], estimate_s=estimate)
    if not (spec.predict or (spec.max_seconds and len(configs) > 1)):
        return Budget(configs, [1.0] * len(configs))
    shortest, longest = min(c[0] for c in configs), max(c[0] + c[1] - 1 for c in configs)
    cost = probe(plan.loaded, plan.inputs[configs[0][0]], shortest, longest)
    caches = [s.caches for s in plan.runnable]
    rounds, warmup = spec.rounds, spec.warmup_tokens
    estimate = estimate_seconds(cost, configs, repeat=rounds, warmup_tokens=warmup, caches=caches)
    predictions: tuple[Prediction, ...] = ()
    if spec.predict:
        predictions = tuple(_prediction(plan.loaded, cost, *config) for config in configs)
        fits = plan_within_budget(
            cost, configs, repeat=rounds, warmup_tokens=warmup, max_seconds=spec.max_seconds, caches=caches
        )
        todo = [config for config, fit in zip(configs, fits) if fit]
    else:
        check_budget(estimate, spec.max_seconds)
        todo = configs
    weights = [rounds * round_seconds(cost, p, n, caches, b) for p, n, b in todo]
    return Budget(todo, weights, cost, predictions, estimate)


def _single_estimate(plan: Plan) -> float:
    """Seconds of the one configuration: warm-ups, timed rounds and first-token runs of every condition,
    scaled from a two-token run of each (a compiled strategy is counted as its uncompiled self).

    A batch's timed and first-token runs are counted as ``batch`` times one sequence's: a first,
    conservative approximation (a batch shares each step's fixed costs)."""
    (prompt_tokens, new_tokens, batch), spec = plan.configs[0], plan.spec
    runs = {}
    for condition in plan.runnable:
        plain = dataclasses.replace(condition, compiled=False) if condition.compiled else condition
        seconds = plan.attempt(condition, partial(first_call, plan.loaded, plan.inputs[prompt_tokens], 2, plain))
        if seconds is not None:
            runs[condition.name] = (seconds, condition.caches)
    uncached = [seconds for seconds, caches in runs.values() if not caches] or [s for s, _ in runs.values()]
    prefill = min(uncached) / 2  # a two-token run without the cache is two forwards over about P tokens
    total = 0.0
    for two_tokens, caches in runs.values():
        for tokens, times in ((spec.warmup_tokens, 1), (new_tokens, batch * spec.rounds), (1, batch)):
            total += times * scaled_seconds(prefill, two_tokens, prompt_tokens, tokens, use_cache=caches)
    return total


def _prediction(loaded: LoadedModel, cost: CostModel, prompt_tokens: int, new_tokens: int, batch: int) -> Prediction:
    """The cost model's figures, a batch counted as ``batch`` sequences one after another (conservative)."""
    model = loaded.model
    return Prediction(
        prompt_tokens=prompt_tokens,
        new_tokens=new_tokens,
        uncached_s=batch * cost.generate_seconds(prompt_tokens, new_tokens, use_cache=False),
        cached_s=batch * cost.generate_seconds(prompt_tokens, new_tokens, use_cache=True),
        kv_bytes=batch * predicted_kv_nbytes(model.config, prompt_tokens + new_tokens - 1, model.dtype),
        batch=batch,
    )
