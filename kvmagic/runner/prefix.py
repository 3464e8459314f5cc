"""A reused prefix: the cache of the prompt's first tokens, built once per configuration and copied into each run.

Chat and agent applications keep a system prompt's cache and start every request from it. A warm twin
(``dynamic+prefix``) measures that: its prefix cache is built once, untimed, by its own strategy, and a
copy made before each timed run (outside the timed region) is passed to ``generate``, which then
computes only the rest of the prompt and the new tokens. Its cold self is the same strategy without it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import torch

from kvmagic.measure.signatures import cache_keyword
from kvmagic.measure.timing import returned_cache, timed_generate
from kvmagic.runner.rounds import strategy_config

if TYPE_CHECKING:
    from transformers import BatchEncoding

    from kvmagic.measure.strategies import Strategy
    from kvmagic.runner.plan import Plan

__all__ = ["Prefix", "build_prefix"]


@dataclass
class Prefix:
    """The cache of the first ``tokens`` of the prompt, per warm twin, and how ``generate`` takes one."""

    tokens: int
    keyword: str
    caches: dict[str, Any] = field(default_factory=dict)

    def inputs(self, strategy: Strategy, inputs: Mapping[str, torch.Tensor]) -> Mapping[str, Any]:
        """What ``generate`` gets for ``strategy``: for a warm twin, the inputs and a fresh copy of its prefix's cache
        (copied here, before any timed region starts)."""
        if not strategy.warm:
            return inputs
        return {**inputs, self.keyword: copy.deepcopy(self.caches[strategy.name])}


def build_prefix(plan: Plan, inputs: BatchEncoding, tokens: int) -> Prefix:
    """Each runnable warm twin's prefix cache for these inputs (every sequence of the batch), built by the strategy
    it twins; a twin whose cache cannot be built or copied is skipped with the reason."""
    prefix = Prefix(tokens, cache_keyword(plan.loaded.model))
    head = {key: value[:, :tokens] for key, value in inputs.items()}
    by_name = {s.name: s for s in plan.strategies}
    for twin in [s for s in plan.runnable if s.warm]:
        cache = plan.attempt(twin, partial(_built, plan, head, by_name[twin.warm]))
        if cache is None:
            continue
        try:
            copy.deepcopy(cache)
        except Exception as error:  # a quantized tensor type may not copy (optimum-quanto's does not)
            plan.skipped[twin.name] = (
                f"its {type(cache).__name__} cannot be copied for each run ({type(error).__name__}), so a "
                "prefix cannot be reused with it"
            )
            continue
        prefix.caches[twin.name] = cache
    return prefix


def _built(plan: Plan, head: Mapping[str, torch.Tensor], strategy: Strategy) -> Any:
    """The cache ``strategy`` builds over the prefix alone: one untimed generate of one token (whose own keys
    and values are never computed, so the cache holds exactly the prefix)."""
    loaded, config = plan.loaded, strategy_config(plan.loaded, 1, strategy, keep_cache=True)
    with strategy.around(loaded.model):
        output, _ = timed_generate(loaded.model, head, config, loaded.devices)
    return returned_cache(output)
