"""How far memory reaches (``frontier``): each strategy's longest context and largest batch, predicted
after measuring from the model's shape, the memory free and the activations one probe measures; and,
when asked, one cached run at the predicted length that confirms it."""

from __future__ import annotations

import dataclasses
import statistics
from typing import TYPE_CHECKING

from kvmagic.core.frontier import CacheLayout, FitCheck, FrontierRow, frontier, layout, peak_bytes
from kvmagic.core.spec import CACHED, UNCACHED
from kvmagic.measure.capabilities import dynamic_cache_windows
from kvmagic.measure.frontier_probe import check_fit, free_bytes, measure_activations
from kvmagic.measure.shape_probe import model_shape
from kvmagic.runner.prompt import batched

if TYPE_CHECKING:
    from kvmagic.measure.strategies import Strategy
    from kvmagic.results.result import Measurement
    from kvmagic.runner.plan import Plan

__all__ = ["Reach", "memory_frontier"]

_PLAIN = {UNCACHED: "off", CACHED: "dynamic"}  # the plain run's conditions as the strategies they are


@dataclasses.dataclass(frozen=True)
class Reach:
    rows: list[FrontierRow]
    checks: list[FitCheck]
    free_bytes: float
    unchecked: dict[str, float]  # strategy -> estimated seconds of a check run past the budget


def memory_frontier(plan: Plan, measurements: list[Measurement]) -> Reach:
    """The frontier around the largest configuration measured (its prompt, new tokens and batch)."""
    loaded, spec = plan.loaded, plan.spec
    largest = max(measurements, key=lambda m: (m.prompt_tokens + m.new_tokens, m.batch))
    inputs = plan.inputs[largest.prompt_tokens]
    shape, free = model_shape(loaded.model), free_bytes(loaded.devices)
    activations = measure_activations(loaded, inputs["input_ids"])
    windowed = dynamic_cache_windows()  # 4.55's dynamic cache keeps sliding layers whole
    layouts = {s.name: _layout(s.name, spec.kv_bits, windowed) for s in plan.runnable}
    where = {"prompt_tokens": largest.prompt_tokens, "new_tokens": largest.new_tokens, "batch": largest.batch}
    rows = frontier(shape, free, activations, list(layouts.values()), **where)
    checks, unchecked = [], {}
    if spec.frontier == "check":
        for row, strategy in zip(rows, plan.runnable):
            if not strategy.caches or row.max_new_tokens < 1:
                continue  # an uncached run to its frontier is the longest there is: not run
            per_token = statistics.median(largest.times(strategy.name)) / largest.new_tokens
            seconds = row.max_new_tokens * per_token  # as long as its timed runs took per token: a lower bound
            if spec.max_seconds and seconds > spec.max_seconds:
                unchecked[strategy.name] = seconds
                continue
            cache = layouts[strategy.name]
            predicted = peak_bytes(shape, cache, activations, row.prompt_tokens, row.max_new_tokens, row.batch)
            checks.append(_check(plan, strategy, row, free, predicted))
    return Reach(rows, checks, free, unchecked)


def _layout(name: str, kv_bits: int | None, windowed: bool) -> CacheLayout:
    """The cache layout of a condition, named as the table names it."""
    return dataclasses.replace(layout(_PLAIN.get(name, name), kv_bits=kv_bits, windowed_dynamic=windowed), name=name)


def _check(plan: Plan, strategy: Strategy, row: FrontierRow, free: float, predicted: float) -> FitCheck:
    ids = batched(plan.inputs[row.prompt_tokens], row.batch)["input_ids"]
    return check_fit(plan.loaded, strategy, ids, row.max_new_tokens, budget_bytes=free, predicted_bytes=predicted)
