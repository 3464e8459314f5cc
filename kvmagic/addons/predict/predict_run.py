"""``--predict`` in a run: the cost model probed before the first timed run, the rows its fastest round puts within
the budget, and its figures of every configuration.

The probe's figures are each point's median round (:class:`~kvmagic.addons.predict.costmodel.Probes`), a typical
run to set beside measured medians; the rows its fastest round puts past ``max_seconds`` are predicted, not
measured. Across ranks the probe's figures are each rank's own; which rows are measured is rank 0's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmagic.addons.predict.budget import plan_within_budget
from kvmagic.addons.predict.costmodel_probe import probe
from kvmagic.addons.predict.predictions import Predicted, Prediction
from kvmagic.core.deadline import shortest_first
from kvmagic.measure.lockstep import from_first
from kvmagic.measure.memory import kv_sizes
from kvmagic.runner.plan import rounds_of

if TYPE_CHECKING:
    from kvmagic.addons.predict.costmodel import CostModel, Probes
    from kvmagic.core.config import Config
    from kvmagic.measure.loaded import LoadedModel
    from kvmagic.runner.plan import Plan

__all__ = ["predicted_run", "probed", "within_budget"]


def probed(plan: Plan) -> Probes:
    """The cost model's probes, over the lengths from the shortest prompt to the most positions cached, on the
    prompt of the configuration measured first."""
    order = shortest_first(plan.configs)
    shortest, longest = min(c.prompt_tokens for c in order), max(c.cached_positions for c in order)
    return probe(plan.loaded, plan.inputs[order[0].prompt_tokens], shortest, longest)


def within_budget(plan: Plan, todo: list[Config], probes: Probes) -> list[Config]:
    """Of ``todo``, in order, what the fastest round's costs put within ``max_seconds``."""
    spec = plan.spec
    caches = [s.caches for s in plan.runnable]
    fits = plan_within_budget(
        probes.fastest(), todo, repeat=rounds_of(plan), warmup_tokens=spec.warmup_tokens,
        max_seconds=spec.max_seconds, caches=caches,
    )  # fmt: skip
    return from_first([config for config, fit in zip(todo, fits) if fit])  # each rank probed its own


def predicted_run(plan: Plan, probes: Probes) -> Predicted:
    """The typical cost model, its figures of every configuration in the order asked, and the weights' bytes."""
    typical, model = probes.typical(), plan.loaded.model
    predictions = tuple(_prediction(plan.loaded, typical, config) for config in plan.configs)
    return Predicted(typical, predictions, sum(p.numel() * p.element_size() for p in model.parameters()))


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
