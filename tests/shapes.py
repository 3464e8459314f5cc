"""A model small enough to work its bytes and FLOPs out by hand: the limits and the frontier are checked on it."""

from __future__ import annotations

from kvmagic.core.shape import ModelShape

__all__ = ["SHAPE"]

# 2 layers (the second with a window of 3), hidden 8, MLP 16, 2 heads of 4 sharing 1 KV head (4 elements),
# vocab 10, a 2-byte dtype: 8 key and value elements per position and layer, 16 bytes.
SHAPE = ModelShape(
    layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10, dtype_bytes=2,
    weight_bytes=1000, windows=(None, 3),
)  # fmt: skip
