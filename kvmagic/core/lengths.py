"""Sweeps: the llama-bench style length grammar, their cross product, and prompt stretching.

Pure functions only (no torch): what a sweep is made of can be tested against hand-computed numbers.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from kvmagic.core.config import Config
from kvmagic.errors import KVMagicError

__all__ = ["LENGTH_FORMS", "MAX_LENGTHS", "configurations", "parse_lengths", "stretch_ids"]

LENGTH_FORMS = (
    "N, a list N,M,... or a range A-B*F (multiply by F) or A-B+S (add S), e.g. 16,64,256 or 16-256*4 or 32-128+32"
)
MAX_LENGTHS = 1000  # more lengths than anyone reads in a table; a typo like 1-1000000+1 fails at once

_RANGE = re.compile(r"^(\d+)-(\d+)([*+])(\d+)$")


def parse_lengths(text: str, *, minimum: int = 1) -> list[int]:
    """``"16-256*4"`` -> ``[16, 64, 256]``: lengths in the order written; a length a range holds too is kept once,
    an item written twice is refused.

    A range runs from A while the value stays <= B, so B itself appears only when a step lands on it
    (as in llama-bench).
    """
    lengths: list[int] = []
    items = str(text).replace(" ", "").split(",")
    repeated = next((item for i, item in enumerate(items) if item and item in items[:i]), None)
    if repeated is not None:
        raise KVMagicError(f"{text!r} lists {repeated} twice: give each length once")
    for item in items:
        lengths.extend(_parse_item(item, text))
        if len(lengths) > MAX_LENGTHS:
            raise KVMagicError(f"{text!r} gives more than {MAX_LENGTHS} lengths: use a coarser range")
    unique = list(dict.fromkeys(lengths))
    too_small = [n for n in unique if n < minimum]
    if too_small:
        where = "" if str(text).strip() == str(too_small[0]) else f" in {text!r}"
        raise KVMagicError(f"lengths must be >= {minimum}, got {too_small[0]}{where}")
    return unique


def _parse_item(item: str, text: str) -> list[int]:
    if item.isdigit():
        return [int(item)]
    match = _RANGE.match(item)
    if match is None:
        _unstepped(item)
        where = "" if item == text else f" in {text!r}"
        raise KVMagicError(f"cannot read {item!r}{where} as lengths: write {LENGTH_FORMS}")
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


def _unstepped(item: str) -> None:
    """``16-64`` is a range without its step: say how to write one (and which end goes first)."""
    ends = re.fullmatch(r"(\d+)-(\d+)", item)
    if ends is None:
        return
    low, high = sorted(int(end) for end in ends.groups())
    below = " ends below its start and" if int(ends[1]) > int(ends[2]) else ""
    raise KVMagicError(
        f"the range {item!r}{below} needs a step: e.g. {low}-{high}*2 (doubling) or {low}-{high}+{max(low, 1)} (adding)"
    )


def configurations(
    prompt_tokens: Sequence[int], new_tokens: Sequence[int], batch: Sequence[int] = (1,)
) -> list[Config]:
    """The sweep's cross product (prompt, new, batch), prompt length outermost, in the order the lengths were
    given: one prompt length's configurations run together, so each is warmed up once."""
    return [Config(*values) for values in itertools.product(prompt_tokens, new_tokens, batch)]


def stretch_ids(prefix: Sequence[int], body: Sequence[int], suffix: Sequence[int], tokens: int) -> list[int]:
    """Exactly ``tokens`` ids: the text's own ``body`` repeated (or cut) between its special tokens.

    Repeating ids rather than text keeps the count exact whatever the tokenizer does at the seams.
    """
    room = tokens - len(prefix) - len(suffix)
    if room < 1:
        raise KVMagicError(
            f"a prompt of {tokens} tokens leaves no room for text next to the tokenizer's "
            f"{len(prefix) + len(suffix)} special tokens: raise {{prompt_tokens}} to {len(prefix) + len(suffix) + 1} "
            "or more",
            "prompt_tokens",
        )
    if not body:
        raise KVMagicError("the prompt has no text tokens to repeat: write some text in it")
    repeats = -(-room // len(body))
    return [*prefix, *(list(body) * repeats)[:room], *suffix]
