"""How each cache strategy keeps keys and values in the device's memory, and the bytes that makes.

- ``off`` keeps nothing between steps;
- a dynamic cache grows by one position a step;
- a static cache preallocates every position before the prefill;
- a quantized cache keeps its positions at the quantized width (plus a scale and a zero point per group) except up
  to ``residual`` - 1 recent tokens, kept in full precision until they are quantized together; reading a layer
  dequantizes it whole, so about two full-precision copies of one layer's keys and values live while it is read;
- an offloaded cache keeps only the layer in use and the next one on the device;
- a press (``press:METHOD:RATIO``) is a dynamic cache whose prompt is whole while the prefill writes it and cut to
  the share its ratio keeps after it; a press that masks positions instead of freeing them is counted whole (its
  ``pruned`` is 0).

Sliding-window layers hold min(positions, window) where the cache windows them. A new strategy's layout is one
branch of :func:`layout`. Pure Python, checkable by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvmagic.core.shape import ModelShape
from kvmagic.core.strategy import BACKENDS, Strategy

__all__ = ["CacheLayout", "kv_bytes", "layer_positions", "layout"]

QUANTIZED_RESIDUAL = 128  # transformers' default residual_length: recent tokens kept unquantized
QUANTIZED_GROUP = 64  # transformers' default q_group_size
OFFLOADED_LAYERS = 2  # the layer in use and the one being prefetched


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

    def __post_init__(self) -> None:  # a name leaves the width out: it is the one this layout stores
        object.__setattr__(self, "strategy", Strategy.of(self.strategy, self.bits or None))


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


def layer_positions(shape: ModelShape, cache: CacheLayout, positions: int) -> list[int]:
    """The positions each layer on the device holds while ``positions`` are cached."""
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
    for held in layer_positions(shape, cache, positions):
        if cache.kind == "quantized":
            full = max(0, min(held, recent, cache.residual - 1))
            overhead = 2 * shape.dtype_bytes / cache.group_size if cache.group_size else 0.0  # scale, zero point
            total += elements * (full * shape.dtype_bytes + (held - full) * (cache.bits / 8 + overhead))
        else:
            total += elements * held * shape.dtype_bytes
    return batch * total
