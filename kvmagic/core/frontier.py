"""The memory frontier: how long a context, or how large a batch, each cache strategy holds in the memory free.

Memory a ``generate`` takes beyond the weights, per strategy, for a prompt of P tokens and N new
tokens (E = P + N - 1 positions are cached at the end; the last token's are never computed):

- ``off``: the last forward's activations over E tokens; nothing is kept between steps;
- a dynamic cache: the larger of the prefill (activations over P, plus the prompt's keys and values)
  and the last decode step (the keys and values of E positions, plus that step's activations);
- a static cache: E positions preallocated before the prefill, plus the larger activations (a decode
  step's fixed part only: the part per position comes from growing a cache by concatenation);
- a quantized cache: as dynamic, its positions at the quantized width (plus a scale and a zero point
  per group) except up to ``residual`` - 1 recent tokens, kept in full precision until they are
  quantized together; reading a layer dequantizes it whole, so about two full-precision copies of
  one layer's keys and values live while it is read;
- an offloaded cache keeps only the layer in use and the next one on the device;
- a press (``press:METHOD:RATIO``) is a dynamic cache whose prompt is whole while the prefill writes it and
  cut to the share its ratio keeps after it; a press that masks positions instead of freeing them is counted
  whole (its ``pruned`` is 0), and a method's own scoring work at the prefill is not counted.

Sliding-window layers hold min(positions, window), where the cache windows them, except right after the
prefill: a dynamic cache's window is then a slice of the whole prompt's keys and values, which stay allocated
until the first decode step (transformers 5), or it keeps them all anyway (4.55). Activations come
from a probe (kvmagic.measure.frontier_probe): a fixed part plus a part per token, per sequence. All of it
counts tensors, as CUDA's allocator does; a CPU process's resident memory exceeds them by what its
C heap keeps of freed blocks (``FitCheck.overhead``).
Pure Python, checkable by hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kvmagic.core.config import Config
from kvmagic.core.shape import ModelShape
from kvmagic.core.strategy import BACKENDS, Strategy

__all__ = [
    "Activations", "CacheLayout", "FitCheck", "Frontier", "FrontierRow", "frontier", "kv_bytes", "largest",
    "layout", "peak_bytes",
]  # fmt: skip

QUANTIZED_RESIDUAL = 128  # transformers' default residual_length: recent tokens kept unquantized
QUANTIZED_GROUP = 64  # transformers' default q_group_size
OFFLOADED_LAYERS = 2  # the layer in use and the one being prefetched
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


@dataclass(frozen=True)
class CacheLayout:
    """How a strategy keeps keys and values in the device's memory."""

    strategy: Strategy
    kind: str  # "none", "dynamic", "static" or "quantized"
    bits: int = 0  # quantized: the stored width
    group_size: int = 0  # quantized: elements sharing one scale and zero point; 0 = one per tensor
    residual: int = 0  # quantized: recent tokens kept in full precision
    windowed: bool = True  # sliding-window layers held at their window
    device_layers: int | None = None  # offloaded: layers on the device at once; None = all
    dequantized_layers: float = 0.0  # full-precision copies of one layer's keys and values while it is read
    pruned: float = 0.0  # a press: the share of the prompt's positions freed after the prefill

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", Strategy.of(self.strategy))


def layout(
    strategy: Strategy | str, *, kv_bits: int | None = None, windowed_dynamic: bool = True, pruned: float = 0.0
) -> CacheLayout:
    """How ``strategy`` keeps keys and values. transformers 4.55's dynamic cache keeps sliding layers
    whole (``windowed_dynamic=False``); 5.x windows them. ``pruned``: a press's share of the prompt freed.
    A warm twin holds what its cold self holds."""
    strategy = Strategy.of(strategy).with_bits(kv_bits)
    if not strategy.caches:
        return CacheLayout(strategy, "none")
    if strategy.quantized:
        backend = BACKENDS[strategy.backend]
        grouped = {"group_size": QUANTIZED_GROUP, "residual": QUANTIZED_RESIDUAL} if backend.widths else {}
        return CacheLayout(
            strategy, "quantized", bits=strategy.stored_bits, windowed=False, dequantized_layers=2.0, **grouped
        )
    offloaded = OFFLOADED_LAYERS if strategy.offloaded else None
    if strategy.static or strategy.cache_implementation in ("sliding_window", "hybrid"):
        return CacheLayout(strategy, "static", device_layers=offloaded)
    return CacheLayout(strategy, "dynamic", windowed=windowed_dynamic, device_layers=offloaded, pruned=pruned)


def _layer_positions(shape: ModelShape, cache: CacheLayout, positions: int) -> list[int]:
    held = [
        positions if window is None or not cache.windowed else min(positions, window) for window in shape.layer_windows
    ]
    if cache.device_layers is not None:
        held = sorted(held, reverse=True)[: cache.device_layers]
    return held


def kv_bytes(
    shape: ModelShape, cache: CacheLayout, positions: int, batch: int = 1, *, prompt_tokens: int | None = None
) -> float:
    """Most bytes of keys and values the cache holds on the device while ``positions`` are cached.

    A quantized cache quantizes the prompt at once and then gathers new tokens in full precision
    until ``residual`` of them are quantized together: at most min(positions - prompt, residual - 1)
    recent ones are in full precision (all but the prompt when ``prompt_tokens`` is not given).
    """
    if cache.kind == "none":
        return 0.0
    if cache.pruned and prompt_tokens is not None and positions > prompt_tokens:  # past the prefill
        positions -= prompt_tokens - int(prompt_tokens * (1 - cache.pruned))  # kept as kvpress counts them
    elements = 2 * shape.kv_heads * shape.head_dim  # per position and layer
    recent = positions - (prompt_tokens or 0)
    total = 0.0
    for held in _layer_positions(shape, cache, positions):
        if cache.kind == "quantized":
            full = max(0, min(held, recent, cache.residual - 1))
            overhead = 2 * shape.dtype_bytes / cache.group_size if cache.group_size else 0.0  # scale, zero point
            total += elements * (full * shape.dtype_bytes + (held - full) * (cache.bits / 8 + overhead))
        else:
            total += elements * held * shape.dtype_bytes
    return batch * total


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
    layer = max(_layer_positions(shape, cache, end)) * 2 * shape.kv_heads * shape.head_dim * shape.dtype_bytes
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
        object.__setattr__(self, "unchecked", {Strategy.of(s): v for s, v in self.unchecked.items()})
