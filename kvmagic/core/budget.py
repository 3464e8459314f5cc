"""The time budget of a sweep: what the cost model predicts it costs, and what fits.

Pure functions only (no torch), so a sweep can be refused before it costs anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kvmagic.core.config import Config
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from kvmagic.core.costmodel import CostModel

__all__ = [
    "check_budget", "estimate_seconds", "floor_seconds", "format_seconds",
    "plan_within_budget", "round_seconds", "scaled_seconds",
]  # fmt: skip

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


def estimate_seconds(
    cost: CostModel, configs: Sequence[Config], *, repeat: int, warmup_tokens: int,
    caches: Sequence[bool] = PAIR,
) -> float:  # fmt: skip
    """The whole sweep: ``repeat`` rounds per configuration plus one warm-up round (of one sequence) per
    prompt length."""
    total = sum(repeat * round_seconds(cost, c[0], c[1], caches, c.batch) for c in configs)
    if warmup_tokens:
        total += sum(round_seconds(cost, p, warmup_tokens, caches) for p in dict.fromkeys(c[0] for c in configs))
    return total


def floor_seconds(
    prefill_s: Mapping[int, float], short_s: float, configs: Sequence[Config], *, repeat: int, warmup_tokens: int,
    caches: Sequence[bool] = PAIR,
) -> float:  # fmt: skip
    """A lower bound of :func:`estimate_seconds` from single forwards: F(P) at each prompt length P
    (``prefill_s``) and F at a few tokens (``short_s``), so a hopeless sweep is refused before the probes.

    F(L) = a + bL + cL^2 with a, b, c >= 0 (a fixed cost, the layers, attention) is convex, so past P it
    grows at least at its slope there, b + 2cP >= (F(P) - a) / P >= (F(P) - F(s)) / P for any s. An
    uncached generate of N tokens is then at least N F(P) + that slope N(N - 1) / 2; a cached one at
    least its prefill F(P), its decode steps and ``generate``'s own work counted as nothing. Counts
    rounds, warm-ups and batches as :func:`estimate_seconds` does.
    """

    def generate(prompt_tokens: int, new_tokens: int) -> float:
        prefill = prefill_s[prompt_tokens]
        slope = max(prefill - short_s, 0.0) / prompt_tokens
        uncached = new_tokens * prefill + slope * new_tokens * (new_tokens - 1) / 2
        return sum(prefill if use_cache else uncached for use_cache in caches)

    total = sum(repeat * c.batch * generate(c[0], c[1]) for c in configs)
    if warmup_tokens:
        total += sum(generate(p, warmup_tokens) for p in dict.fromkeys(c[0] for c in configs))
    return total


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


def scaled_seconds(prefill_s: float, two_tokens_s: float, prompt_tokens: int, tokens: int, *, use_cache: bool) -> float:
    """One generate of ``tokens`` after ``prompt_tokens``, scaled from short runs: a cost model in two numbers.

    ``prefill_s`` is one forward over the prompt (a one-token run without the cache, F(P));
    ``two_tokens_s`` the strategy's own two-token run. Uncached, every step is a forward over the
    whole sequence, taken to grow in proportion to its length: F(P + i) = F(P) (P + i) / P. Cached,
    the prefill and then steps as long as the second token took (at least 1% of the prefill).
    Short prompts and long generations make the uncached figure an over-estimate, which is the
    safe side for a budget.
    """
    if tokens < 1:
        return 0.0
    if not use_cache:
        return prefill_s * (tokens + tokens * (tokens - 1) / (2 * prompt_tokens))
    return prefill_s + (tokens - 1) * max(two_tokens_s - prefill_s, 0.01 * prefill_s)


def check_budget(estimate_s: float, max_seconds: float) -> None:
    """Refuse a sweep estimated to run past ``max_seconds`` (0 means no limit)."""
    if max_seconds and estimate_s > max_seconds:
        raise KVMagicError(  # one line of a 100-column terminal, spelled with the flags
            f"would take about {format_seconds(estimate_s)}, over {{max_seconds}} {format_seconds(max_seconds)}: "
            "raise it or lower {new_tokens}, {prompt_tokens} or {repeat}",
            *("max_seconds", "new_tokens", "prompt_tokens", "repeat"),
        )


def format_seconds(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.3g} s"
