"""The memory frontier's arithmetic: how long a context, or how large a batch, each cache strategy holds in the
memory free, and what a result keeps of it.

Memory a ``generate`` takes beyond the weights, per strategy, for a prompt of P tokens and N new
tokens (E = P + N - 1 positions are cached at the end; the last token's are never computed), its keys and values
as :mod:`~kvmagic.addons.frontier.cache_layout` counts them:

- ``off``: the last forward's activations over E tokens; nothing is kept between steps;
- a dynamic cache (a quantized one, a press): the larger of the prefill (activations over P, plus the prompt's
  keys and values) and the last decode step (the keys and values of E positions, plus that step's activations,
  plus a quantized cache's dequantized copies of one layer);
- a static cache: E positions preallocated before the prefill, plus the larger activations (a decode
  step's fixed part only: the part per position comes from growing a cache by concatenation).

A press's own scoring work at the prefill is not counted. Sliding-window layers are windowed except right after
the prefill: a dynamic cache's window is then a slice of the whole prompt's keys and values, which stay allocated
until the first decode step (transformers 5), or it keeps them all anyway (4.55). Activations come
from a probe (:mod:`~kvmagic.addons.frontier.frontier_probe`): a fixed part plus a part per token, per sequence.
All of it counts tensors, as CUDA's allocator does; a CPU process's resident memory exceeds them by what its
C heap keeps of freed blocks (``FitCheck.overhead``).
Pure Python, checkable by hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kvmagic.addons.frontier.cache_layout import CacheLayout, kv_bytes, layer_positions
from kvmagic.core.config import Config
from kvmagic.core.shape import ModelShape
from kvmagic.core.strategy import ByStrategy, Strategy

__all__ = ["Activations", "FitCheck", "Frontier", "FrontierRow", "frontier", "largest", "peak_bytes"]

_FAR = 1 << 40


@dataclass(frozen=True)
class Activations:
    """Memory a forward takes beyond the weights and the cache it keeps, as probed: fixed plus per token."""

    forward_fixed: float
    forward_per_token: float  # an uncached forward (or a prefill), per token of its input
    decode_fixed: float = 0.0
    decode_per_position: float = 0.0  # a cached decode step, per position it attends to

    def forward(self, tokens: int, batch: int = 1) -> float:
        return self.forward_fixed + batch * self.forward_per_token * tokens

    def decode(self, context: int, batch: int = 1) -> float:
        return self.decode_fixed + batch * self.decode_per_position * context


def peak_bytes(
    shape: ModelShape, cache: CacheLayout, activations: Activations, prompt_tokens: int, new_tokens: int,
    batch: int = 1,
) -> float:  # fmt: skip
    """Peak memory beyond the weights of one ``generate`` of ``new_tokens`` after ``prompt_tokens``."""
    end = prompt_tokens + new_tokens - 1
    if cache.kind == "none":
        return activations.forward(end, batch)
    prefill = activations.forward(prompt_tokens, batch)
    if cache.kind == "static":
        in_place = activations.decode(0, batch) if new_tokens > 1 else 0.0
        return kv_bytes(shape, cache, end, batch) + max(prefill, in_place)
    whole = replace(cache, windowed=False)  # the prompt, until the first step slides the window on
    at_prefill = prefill + kv_bytes(shape, whole, prompt_tokens, batch, prompt_tokens=prompt_tokens)
    if new_tokens == 1:
        return at_prefill
    held = kv_bytes(shape, cache, end, batch, prompt_tokens=prompt_tokens)
    layer = max(layer_positions(shape, cache, end)) * 2 * shape.kv_heads * shape.head_dim * shape.dtype_bytes
    return max(at_prefill, held + activations.decode(end, batch) + cache.dequantized_layers * batch * layer)


def largest(fits: Callable[[int], bool], start: int = 1, cap: int = _FAR) -> int:
    """The largest n in [start, cap] with ``fits(n)``, for ``fits`` true up to a point and false after; 0 if none."""
    if not fits(start):
        return 0
    low, step = start, 1
    while low + step <= cap and fits(low + step):  # gallop, then bisect
        low, step = low + step, step * 2
    high = min(low + step, cap + 1)  # fits(low), not fits(high) (or high past the cap)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


@dataclass(frozen=True)
class _StrategyAt:
    """A strategy at one configuration: the fields a frontier row and a check run share."""

    strategy: Strategy
    prompt_tokens: int
    new_tokens: int
    batch: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", Strategy.of(self.strategy))

    @property
    def config(self) -> Config:
        return Config(self.prompt_tokens, self.new_tokens, self.batch)


@dataclass(frozen=True)
class FrontierRow(_StrategyAt):
    """One strategy's reach in the memory free, around one configuration (prompt, new tokens, batch)."""

    kv_bytes_per_token: float  # per sequence, averaged over the configuration's cached positions
    peak_bytes: float  # the configuration's predicted peak beyond the weights
    max_new_tokens: int  # after the given prompt; 0 if not even one fits
    max_prompt: int  # that still leaves room for the given new tokens; 0 if none does
    max_batch: int  # at the given prompt and new tokens
    limited_by: str  # "memory", or "positions" where the model's position limit comes first

    @property
    def max_context(self) -> int:
        """The longest prompt plus new tokens, generating from the given prompt."""
        return self.prompt_tokens + self.max_new_tokens if self.max_new_tokens else 0


def frontier(
    shape: ModelShape, free_bytes: float, activations: Activations, layouts: Sequence[CacheLayout], *,
    prompt_tokens: int, new_tokens: int, batch: int = 1,
) -> list[FrontierRow]:  # fmt: skip
    """Per strategy: the most new tokens, the longest prompt, the largest batch that fit in ``free_bytes``."""
    positions = shape.max_positions or _FAR
    rows = []
    for cache in layouts:

        def fits(p: int, n: int, b: int, cache: CacheLayout = cache) -> bool:
            return peak_bytes(shape, cache, activations, p, n, b) <= free_bytes

        max_new = largest(lambda n: fits(prompt_tokens, n, batch), cap=max(positions - prompt_tokens, 1))
        max_prompt = largest(lambda p: fits(p, new_tokens, batch), cap=max(positions - new_tokens, 1))
        capped = max_new == positions - prompt_tokens or max_prompt == positions - new_tokens
        end = prompt_tokens + new_tokens - 1
        rows.append(
            FrontierRow(
                strategy=cache.strategy,
                prompt_tokens=prompt_tokens,
                new_tokens=new_tokens,
                batch=batch,
                kv_bytes_per_token=kv_bytes(shape, cache, end, prompt_tokens=prompt_tokens) / end,
                peak_bytes=peak_bytes(shape, cache, activations, prompt_tokens, new_tokens, batch),
                max_new_tokens=max_new,
                max_prompt=max_prompt,
                max_batch=largest(lambda b: fits(prompt_tokens, new_tokens, b)),
                limited_by="positions" if capped else "memory",
            )
        )
    return rows


@dataclass(frozen=True)
class FitCheck(_StrategyAt):
    """A run at a predicted frontier: the predicted peak beside the measured ones, against the budget."""

    budget_bytes: float
    predicted_bytes: float
    measured_bytes: float  # the device's peak: CUDA's allocator, else the process's resident memory
    tensor_bytes: float  # live tensors alone (the same as measured on CUDA): what the prediction counts

    @property
    def fitted(self) -> bool:
        """The device's peak stayed within the budget."""
        return self.measured_bytes <= self.budget_bytes

    @property
    def error(self) -> float:
        """The prediction's own error, on tensors: +0.05 = they took 5% more than predicted."""
        return self.tensor_bytes / self.predicted_bytes - 1 if self.predicted_bytes else math.nan

    @property
    def overhead(self) -> float:
        """What the device's peak adds to the tensors' (a CPU heap's retained blocks): 0.3 = 30% more."""
        return self.measured_bytes / self.tensor_bytes - 1 if self.tensor_bytes else math.nan


@dataclass(frozen=True)
class Frontier:
    """Every strategy's reach around one configuration, the memory it was predicted in, and any check run."""

    rows: list[FrontierRow]
    checks: list[FitCheck]
    free_bytes: float
    unchecked: dict[Strategy, float]  # strategy -> estimated seconds of a check run past the budget

    def __post_init__(self) -> None:
        object.__setattr__(self, "unchecked", ByStrategy({Strategy.of(s): v for s, v in self.unchecked.items()}))
