"""What the KV cache holds: counted from the cache object, and predicted from the model config and what the
installed transformers keeps of a sliding-window layer (probed)."""

from __future__ import annotations

import functools
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kvmagic.core.kvbytes import KVSizes, SlidingKeep

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

__all__ = ["cache_nbytes", "kv_sizes", "sliding_keep"]

_WINDOW = 4  # the probe's sliding window


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


def kv_sizes(config: PretrainedConfig, dtype: torch.dtype) -> KVSizes:
    """The KV cache sizes of a model with ``config`` at ``dtype``: per layer, one position's keys and values
    (KV heads x head_dim x element size, twice) and its window, kept as the installed dynamic cache keeps it."""
    import torch

    text = config.get_text_config()
    layers = text.num_hidden_layers
    kv_heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    window = getattr(text, "sliding_window", None)
    layer_types = getattr(text, "layer_types", None) or ["full_attention"] * layers
    element = torch.empty((), dtype=dtype).element_size()
    windows = tuple(window if kind == "sliding_attention" and window else None for kind in layer_types[:layers])
    return KVSizes(2 * kv_heads * head_dim * element, windows, sliding_keep() if any(windows) else SlidingKeep())


@functools.cache
def sliding_keep() -> SlidingKeep:
    """How the dynamic cache ``generate`` builds from a config keeps a sliding-window layer, found by writing a
    six-token prefill and then one token into a layer of window 4 and reading what it holds."""
    import torch
    from transformers import DynamicCache, LlamaConfig

    sizes: dict[str, Any] = dict(vocab_size=4, hidden_size=8, intermediate_size=8, num_hidden_layers=1, head_dim=8)
    sliding: dict[str, Any] = dict(layer_types=["sliding_attention"], sliding_window=_WINDOW)
    config = LlamaConfig(**sizes, num_attention_heads=1, num_key_value_heads=1, **sliding)
    try:
        cache = DynamicCache(config=config)
    except TypeError:  # it takes no config, so it cannot know which layers slide
        return SlidingKeep()
    for length in (6, 1):
        states = torch.zeros(1, 1, length, 8)
        cache.update(states, states, 0)
    layer: Any = cache.layers[0]
    visible, stored = layer.keys.shape[-2], layer.keys.untyped_storage().nbytes() // states[0, 0].nbytes
    if stored >= 7:  # every position written
        return SlidingKeep()
    tensors = cache_nbytes(layer.keys) + cache_nbytes(layer.values)
    return SlidingKeep(True, visible - _WINDOW, stored > visible, cache_nbytes(layer) - tensors)
