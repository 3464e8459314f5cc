"""What the KV cache holds: counted from the cache object, and predicted from the model config."""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

__all__ = ["cache_nbytes", "predicted_kv_nbytes"]


def cache_nbytes(cache: Any) -> int:
    """Bytes of every tensor a cache object holds, each storage once.

    The walk follows attributes, lists, tuples and dicts, so it needs no knowledge of the cache
    class: dynamic, static and quantized caches of either transformers line keep their tensors in
    different places (``layers[i].keys``, ``cache_processor``, ``layer._quantized_keys``). Views of
    one storage (a sliding window sliced from a larger tensor) count the storage once, at its full
    size, because that is what stays allocated.
    """
    import torch

    seen_objects: set[int] = set()
    seen_storages: set[tuple[str, int]] = set()
    total = 0
    stack: list[Any] = [cache]
    while stack:
        item = stack.pop()
        if id(item) in seen_objects:
            continue
        seen_objects.add(id(item))
        if isinstance(item, torch.Tensor) and hasattr(item, "__tensor_flatten__"):
            names, _ = item.__tensor_flatten__()  # a wrapper (quanto's packed tensors): its storage is not real
            stack.extend(getattr(item, name) for name in names)
        elif isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            key = (str(item.device), storage.data_ptr())
            if storage.nbytes() and key not in seen_storages:
                seen_storages.add(key)
                total += storage.nbytes()
        elif isinstance(item, (torch.nn.Module, types.ModuleType)):
            continue  # a cache never owns weights; a reference to a model is not its size
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        else:
            stack.extend(_attributes(item))
    return total


def _attributes(item: Any) -> Iterator[Any]:
    if isinstance(item, (str, bytes, int, float, complex, bool, type)) or item is None:
        return
    yield from getattr(item, "__dict__", {}).values()
    for cls in type(item).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(item, slot):
                yield getattr(item, slot)


def predicted_kv_nbytes(config: PretrainedConfig, tokens: int, dtype: torch.dtype) -> int:
    """Bytes a full-precision cache needs for ``tokens`` positions, from the model config alone.

    Keys and values, per layer: KV heads x head_dim x positions x element size. Sliding-window
    layers are counted at their window, which is what transformers 5's dynamic cache holds once
    decoding has begun; transformers 4.55's dynamic cache keeps them whole, so there the count
    from the cache object exceeds this prediction for models with sliding layers.
    """
    import torch

    text = config.get_text_config()
    layers = text.num_hidden_layers
    kv_heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    window = getattr(text, "sliding_window", None)
    layer_types = getattr(text, "layer_types", None) or ["full_attention"] * layers
    element = torch.empty((), dtype=dtype).element_size()
    positions = sum(
        min(tokens, window) if kind == "sliding_attention" and window else tokens for kind in layer_types[:layers]
    )
    return int(2 * kv_heads * head_dim * positions * element)
