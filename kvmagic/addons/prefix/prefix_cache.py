"""A reused prefix: the cache of the prompt's first tokens, built once per configuration and copied into each run.

Chat and agent applications keep a system prompt's cache and start every request from it. A warm twin
(``dynamic+prefix``) measures that: its prefix cache is built once, untimed, by its own strategy, and a
copy made before each timed run (outside the timed region) is passed to ``generate``, which then
computes only the rest of the prompt and the new tokens. Its cold self is the same strategy without it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import torch

from kvmagic.measure.lockstep import any_reason
from kvmagic.measure.strategies import Setup, strategy_config
from kvmagic.measure.timing import returned_cache, timed_generate

if TYPE_CHECKING:
    from transformers import BatchEncoding

    from kvmagic.core.strategy import Strategy
    from kvmagic.runner.plan import Plan

__all__ = ["Prefix", "build_prefix", "warm_twin"]


@dataclass
class Prefix:
    """The cache of the prompt's first tokens, per warm twin."""

    caches: dict[Strategy, Any] = field(default_factory=dict)

    def started(self, setups: Sequence[Setup]) -> list[Setup]:
        """Each warm twin starting from a fresh copy of its prefix's cache, made for each run before the clock
        starts (:meth:`~kvmagic.measure.strategies.Setup.given`); every other strategy as it is."""
        return [
            dataclasses.replace(s, start=partial(copy.deepcopy, self.caches[s.strategy]))
            if s.strategy in self.caches
            else s
            for s in setups
        ]


def build_prefix(plan: Plan, inputs: BatchEncoding, tokens: int) -> Prefix:
    """Each runnable warm twin's prefix cache for these inputs (every sequence of the batch), built by the strategy
    it twins, over their first ``tokens``; a twin whose cache cannot be built or copied is skipped with the
    reason."""
    prefix = Prefix()
    head = {key: value[:, :tokens] for key, value in inputs.items()}
    by_name = {s.strategy: s for s in plan.strategies}
    for twin in [s for s in plan.runnable if s.strategy.warm]:
        cache = plan.attempt(twin, partial(_built, plan, head, by_name[twin.strategy.cold]))
        if cache is None:
            continue
        reason = any_reason(_uncopied(cache))  # every rank skips it alike
        if reason:
            plan.skipped[twin.strategy] = reason
            continue
        prefix.caches[twin.strategy] = cache
    return prefix


def _uncopied(cache: Any) -> str:
    """Why ``cache`` cannot be copied for each run; empty where it can."""
    try:
        copy.deepcopy(cache)
    except Exception as error:  # a quantized tensor type may not copy (optimum-quanto's does not)
        return (
            f"its {type(cache).__name__} cannot be copied for each run ({type(error).__name__}), so a prefix cannot "
            "be reused with it"
        )
    return ""


def _built(plan: Plan, head: Mapping[str, torch.Tensor], strategy: Setup) -> Any:
    """The cache ``strategy`` builds over the prefix alone: one untimed generate of one token (whose own keys
    and values are never computed, so the cache holds exactly the prefix)."""
    loaded, config = plan.loaded, strategy_config(plan.loaded, 1, strategy, keep_cache=True)
    with strategy.around(loaded.model):
        output, _ = timed_generate(loaded.model, head, config, loaded.devices)
    return returned_cache(output)


def warm_twin(setup: Setup) -> Setup:
    """``setup``'s strategy started from the cache of the prompt's prefix, built with ``setup`` itself before each
    configuration and handed in as ``start`` (so ``generate`` is told no cache implementation of its own); a static
    cache and a press get one that says why it cannot run."""
    twin = setup.strategy.twin(warm=True)
    if setup.strategy.press is not None:
        return Setup(twin, reason="kvpress compresses only at a prefill, and the rest of a prompt after a reused "
                     "prefix is not one: its cache would stay whole")  # fmt: skip
    if setup.reason:
        return Setup(twin, reason=setup.reason)
    if setup.static or setup.strategy.compiled:
        return Setup(twin, reason="a reused prefix needs a cache that grows: a static one is sized by the call "
                     "that builds it")  # fmt: skip
    settings = {k: v for k, v in setup.settings.items() if k != "cache_config"}
    return Setup(twin, {**settings, "cache_implementation": None})
