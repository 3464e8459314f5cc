"""``--predict``'s budget: which rows the probed cost model puts within ``max_seconds``.

The run itself is held to the budget as a deadline, from the runs it makes (:mod:`kvmagic.core.deadline`); a
prediction's rows past it are shown predicted, not measured. Pure functions only (no torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kvmagic.core.config import Config

if TYPE_CHECKING:
    from kvmagic.addons.predict.costmodel import CostModel

__all__ = ["plan_within_budget", "round_seconds"]

PAIR = (False, True)  # use_cache of each strategy a round runs: uncached, then cached


def round_seconds(
    cost: CostModel, prompt_tokens: int, new_tokens: int, caches: Sequence[bool] = PAIR, batch: int = 1
) -> float:
    """One generate per strategy (``caches``: the ``use_cache`` of each), as the cost model predicts them.

    The model knows the dynamic cache only: every cached strategy (``--cache``) is counted as one.
    A batch is counted as ``batch`` times one sequence's cost: a first, conservative approximation
    (a batch shares each step's fixed costs, so it usually runs faster than that).
    """
    return batch * sum(cost.generate_seconds(prompt_tokens, new_tokens, use_cache=c) for c in caches)


def plan_within_budget(
    cost: CostModel, configs: Sequence[Config], *, repeat: int, warmup_tokens: int, max_seconds: float,
    caches: Sequence[bool] = PAIR,
) -> list[bool]:  # fmt: skip
    """Which configurations to measure (in order) so the predicted total stays within ``max_seconds``.

    A configuration that would pass the budget is skipped, and a later, cheaper one may still fit;
    a prompt length's warm-up is charged with its first measured configuration. 0: measure all.
    """
    plan, spent, warmed = [], 0.0, set()
    for config in configs:
        prompt_tokens, new_tokens = config[0], config[1]
        cost_s = repeat * round_seconds(cost, prompt_tokens, new_tokens, caches, config.batch)
        if warmup_tokens and prompt_tokens not in warmed:
            cost_s += round_seconds(cost, prompt_tokens, warmup_tokens, caches)
        fits = not max_seconds or spent + cost_s <= max_seconds
        if fits:
            spent += cost_s
            warmed.add(prompt_tokens)
        plan.append(fits)
    return plan
