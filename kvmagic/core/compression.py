"""A compressed cache's name and what its ratio promises: ``press:METHOD:RATIO``, and a sweep over ratios.

A press (kvpress's word for a compression method) drops a share of the prompt's positions from the
cache once the prompt is in it (the prefill): ``press:snapkv:0.5`` keeps half of them, and every new
token's as it comes. ``press:snapkv:0.25-0.75+0.25`` is one strategy per ratio, as the length grammar's
``A-B+S`` runs from A by S while the value stays <= B. Pure functions, checkable by hand; which methods
exist is asked of kvpress itself (:mod:`kvmagic.measure.press`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvmagic.errors import KVMagicError

__all__ = ["PRESS", "PRESS_FORM", "PressName", "expand_presses"]

PRESS = "press"
PRESS_FORM = (
    "press:METHOD:RATIO, the share of the prompt's positions to drop (0 to below 1), e.g. press:snapkv:0.5, "
    "or a sweep press:snapkv:0.25-0.75+0.25"
)
MAX_RATIOS = 100  # more ratios than a table or a curve needs; a typo like 0-0.99+0.0001 fails at once
_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
_RATIO = re.compile(rf"^{_NUMBER}$")
_SWEEP = re.compile(rf"^{_NUMBER}-{_NUMBER}\+{_NUMBER}$")
_DIGITS = 9  # ratios are rounded to this many decimals, so 0.1 + 0.2 names the strategy 0.3


@dataclass(frozen=True)
class PressName:
    """One compressed-cache strategy: kvpress's method, by its snake_case name, and its compression ratio."""

    method: str
    ratio: float

    @property
    def name(self) -> str:
        return f"{PRESS}:{self.method}:{self.ratio:g}"

    def kept(self, prompt_tokens: int) -> int:
        """Prompt positions the ratio keeps, counted as kvpress counts them: int(P * (1 - ratio))."""
        return int(prompt_tokens * (1 - self.ratio))

    def promised_positions(self, prompt_tokens: int, new_tokens: int) -> int:
        """Positions the cache holds at the end if it keeps what the ratio says: the kept prompt and every new
        token but the last (whose keys and values are never computed)."""
        return self.kept(prompt_tokens) + new_tokens - 1


def expand_presses(name: str) -> list[PressName]:
    """``press:snapkv:0.25-0.75+0.25`` -> the three strategies; ``press:snapkv:0.5`` -> itself."""
    _, method, ratios = [*name.split(":", 2), "", ""][:3]
    if not method:
        raise KVMagicError(f"{name!r} needs a method and a ratio: write {PRESS_FORM}")
    if not ratios:
        raise KVMagicError(f"{name!r} needs a compression ratio: write {PRESS_FORM.replace('METHOD', method)}")
    return [PressName(method, ratio) for ratio in _ratios(ratios, name)]


def _ratios(text: str, name: str) -> list[float]:
    if _RATIO.match(text):
        values = [float(text)]
    elif match := _SWEEP.match(text):
        values = _sweep(*(float(part) for part in match.groups()), name=name)
    else:
        raise KVMagicError(f"cannot read the ratio {text!r} in {name!r}: write {PRESS_FORM}")
    outside = [value for value in values if not 0 <= value < 1]
    if outside:
        raise KVMagicError(f"the ratio {outside[0]:g} in {name!r} is not a share to drop: use 0 to below 1")
    return values


def _sweep(first: float, last: float, step: float, *, name: str) -> list[float]:
    if last < first:
        raise KVMagicError(f"the ratios {name!r} end below their start: write the smaller ratio first")
    if step <= 0:
        raise KVMagicError(f"the ratios {name!r} never grow: add a step above 0")
    count = int((last - first) / step + 1e-9) + 1  # the tolerance lets 0.25-0.75+0.25 reach 0.75
    if count > MAX_RATIOS:
        raise KVMagicError(f"{name!r} gives more than {MAX_RATIOS} ratios: use a coarser step")
    return [round(first + index * step, _DIGITS) for index in range(count)]
