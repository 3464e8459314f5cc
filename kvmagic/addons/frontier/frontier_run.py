"""The memory frontier after the timed runs: each strategy's longest context and largest batch, predicted from
the model's shape, the memory free and the activations one probe measures; and, with ``check``, one cached run
at the predicted length that confirms it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmagic.addons.frontier.cache_layout import layout
from kvmagic.addons.frontier.frontier_probe import check_fit, free_bytes, measure_activations
from kvmagic.addons.frontier.reach import FitCheck, Frontier, FrontierRow, frontier, peak_bytes
from kvmagic.measure.capabilities import dynamic_cache_windows
from kvmagic.measure.shape_probe import model_shape
from kvmagic.runner.prompt import batched

if TYPE_CHECKING:
    from kvmagic.measure.strategies import Setup
    from kvmagic.results.result import Measurement
    from kvmagic.runner.plan import Plan

__all__ = ["memory_frontier"]


def memory_frontier(plan: Plan, measurements: list[Measurement]) -> Frontier:
    """The frontier around the largest configuration measured (its prompt, new tokens and batch)."""
    loaded, spec = plan.loaded, plan.spec
    largest = max((m.config for m in measurements), key=lambda c: (c.prompt_tokens + c.new_tokens, c.batch))
    seconds = {m.strategy: m.median_s for m in measurements if m.config == largest}
    inputs = plan.inputs[largest.prompt_tokens]
    shape, free = model_shape(loaded.model), free_bytes(loaded.devices)
    activations = measure_activations(loaded, inputs["input_ids"])
    windowed = dynamic_cache_windows()  # 4.55's dynamic cache keeps sliding layers whole
    layouts = {
        s.strategy: layout(s.strategy, kv_bits=spec.kv_bits, windowed_dynamic=windowed, pruned=s.pruned)
        for s in plan.runnable
    }
    rows = frontier(shape, free, activations, list(layouts.values()), **largest._asdict())
    checks, unchecked = [], {}
    if spec.option("frontier") == "check":
        for row, strategy in zip(rows, plan.runnable):
            if not strategy.caches or row.max_new_tokens < 1:
                continue  # an uncached run to its frontier is the longest there is: not run
            per_token = seconds[strategy.strategy] / largest.new_tokens
            estimate = row.max_new_tokens * per_token  # as long as its timed runs took per token: a lower bound
            if spec.max_seconds and estimate > spec.max_seconds:
                unchecked[strategy.strategy] = estimate
                continue
            cache = layouts[strategy.strategy]
            predicted = peak_bytes(shape, cache, activations, row.prompt_tokens, row.max_new_tokens, row.batch)
            checks.append(_check(plan, strategy, row, free, predicted))
    return Frontier(rows, checks, free, unchecked)


def _check(plan: Plan, strategy: Setup, row: FrontierRow, free: float, predicted: float) -> FitCheck:
    ids = batched(plan.inputs[row.prompt_tokens], row.batch)["input_ids"]
    return check_fit(plan.loaded, strategy, ids, row.max_new_tokens, budget_bytes=free, predicted_bytes=predicted)
