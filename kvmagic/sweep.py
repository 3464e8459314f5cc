"""Sweeps: the llama-bench style length grammar, prompt stretching and the time budget.

Pure functions only (no torch): what a sweep is made of can be tested against hand-computed
numbers, and the budget can refuse a sweep before it costs anything.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import KVMagicError

__all__ = [
    "LENGTH_FORMS",
    "MAX_LENGTHS",
    "StepCost",
    "check_budget",
    "configurations",
    "estimate_seconds",
    "format_seconds",
    "generate_seconds",
    "parse_lengths",
    "stretch_ids",
]

LENGTH_FORMS = "N, a list N,M,... or a range A-B*F (multiply by F) or A-B+S (add S), e.g. 16,64,256 or 16-256*4 or 32-128+32"
MAX_LENGTHS = 1000  # more lengths than anyone reads in a table; a typo like 1-1000000+1 fails at once

_RANGE = re.compile(r"^(\d+)-(\d+)([*+])(\d+)$")


def parse_lengths(text: str, *, minimum: int = 1) -> list[int]:
    """``"16-256*4"`` -> ``[16, 64, 256]``: lengths in the order written, duplicates dropped.

    A range runs from A while the value stays <= B, so B itself appears only when a step lands on it
    (as in llama-bench).
    """
    lengths: list[int] = []
    for item in str(text).replace(" ", "").split(","):
        lengths.extend(_parse_item(item, text))
        if len(lengths) > MAX_LENGTHS:
            raise KVMagicError(f"{text!r} gives more than {MAX_LENGTHS} lengths: use a coarser range")
    unique = list(dict.fromkeys(lengths))
    too_small = [n for n in unique if n < minimum]
    if too_small:
        raise KVMagicError(f"lengths must be >= {minimum}, got {too_small[0]} in {text!r}")
    return unique


def _parse_item(item: str, text: str) -> list[int]:
    if item.isdigit():
        return [int(item)]
    match = _RANGE.match(item)
    if match is None:
        raise KVMagicError(f"cannot read {item!r} in {text!r} as lengths: write {LENGTH_FORMS}")
    first, last, op, step = int(match[1]), int(match[2]), match[3], int(match[4])
    if last < first:
        raise KVMagicError(f"the range {item!r} ends below its start: write the smaller length first")
    if op == "*" and (step < 2 or first < 1):
        raise KVMagicError(f"the range {item!r} never grows: multiply a start >= 1 by a factor >= 2")
    if op == "+" and step < 1:
        raise KVMagicError(f"the range {item!r} never grows: add a step >= 1")
    values = []
    value = first
    while value <= last:
        values.append(value)
        if len(values) > MAX_LENGTHS:
            break
        value = value * step if op == "*" else value + step
    return values


def configurations(prompt_tokens: Sequence[int], new_tokens: Sequence[int]) -> list[tuple[int, int]]:
    """The sweep's cross product, prompt length outermost, in the order the lengths were given."""
    return list(itertools.product(prompt_tokens, new_tokens))


def stretch_ids(prefix: Sequence[int], body: Sequence[int], suffix: Sequence[int], tokens: int) -> list[int]:
    """Exactly ``tokens`` ids: the text's own ``body`` repeated (or cut) between its special tokens.

    Repeating ids rather than text keeps the count exact whatever the tokenizer does at the seams.
    """
    room = tokens - len(prefix) - len(suffix)
    if room < 1:
        raise KVMagicError(
            f"a prompt of {tokens} tokens leaves no room for text next to the tokenizer's "
            f"{len(prefix) + len(suffix)} special tokens: use -p {len(prefix) + len(suffix) + 1} or more"
        )
    if not body:
        raise KVMagicError("the prompt has no text tokens to repeat: write some text in the cell")
    repeats = -(-room // len(body))
    return [*prefix, *(list(body) * repeats)[:room], *suffix]


@dataclass(frozen=True)
class StepCost:
    """What one forward pass over ``length`` tokens costs: ``overhead_s + per_token_s * length``.

    Fitted from two probe runs; a model's step cost is close to linear in the tokens it processes,
    so the uncached cost of a whole generation grows with the square of its length.
    """

    overhead_s: float
    per_token_s: float

    @classmethod
    def fit(cls, short: tuple[int, float], long: tuple[int, float] | None = None) -> StepCost:
        """From ``(length, seconds)`` probes; noise never makes a cost negative."""
        (n1, t1) = short
        if long is None or long[0] == n1:
            return cls(0.0, max(t1, 0.0) / max(n1, 1))
        (n2, t2) = long
        per_token = max((t2 - t1) / (n2 - n1), 0.0)
        return cls(max(t1 - per_token * n1, 0.0), per_token)

    def forward(self, length: int) -> float:
        return self.overhead_s + self.per_token_s * length


def generate_seconds(cost: StepCost, prompt_tokens: int, new_tokens: int, *, use_cache: bool) -> float:
    """Estimated time of one greedy generate.

    Uncached, step i reprocesses all ``prompt_tokens + i`` tokens; cached, only the first step
    processes the prompt and each later step one token.
    """
    if use_cache:
        return cost.forward(prompt_tokens) + (new_tokens - 1) * cost.forward(1)
    n = new_tokens
    return n * cost.overhead_s + cost.per_token_s * (n * prompt_tokens + n * (n - 1) / 2)


def estimate_seconds(
    cost: StepCost, configs: Sequence[tuple[int, int]], *, repeat: int, warmup_tokens: int
) -> float:
    """The whole sweep: ``repeat`` pairs per configuration plus one warm-up pair per prompt length."""
    total = 0.0
    for prompt_tokens, new_tokens in configs:
        pair = sum(generate_seconds(cost, prompt_tokens, new_tokens, use_cache=c) for c in (False, True))
        total += repeat * pair
    if warmup_tokens:
        for prompt_tokens in dict.fromkeys(p for p, _ in configs):
            total += sum(generate_seconds(cost, prompt_tokens, warmup_tokens, use_cache=c) for c in (False, True))
    return total


def check_budget(estimate_s: float, max_seconds: float) -> None:
    """Refuse a sweep estimated to run past ``max_seconds`` (0 means no limit)."""
    if max_seconds and estimate_s > max_seconds:
        raise KVMagicError(
            f"this benchmark would take about {format_seconds(estimate_s)} (estimated from a short probe), "
            f"over the {format_seconds(max_seconds)} budget: raise max_seconds (--max-seconds, or "
            f"`%config KVMagics.max_seconds = ...`; 0 means no limit), or measure fewer or shorter lengths (-n, -p, -r)"
        )


def format_seconds(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.3g} s"
