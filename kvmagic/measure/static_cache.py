"""The static cache transformers keeps on the model between ``generate`` calls, and forgetting it.

transformers 4.55 keeps the cache itself (``model._cache``) and reuses it for any later call it fits that asks
for its class or a parent of it; transformers 5 keeps the longest length so far (``_previous_max_cache_length``)
and sizes every later static cache to at least that. Which attributes hold that state is read from
``generate``'s own source, never from a version number, once per process (``functools.cache``).
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any

__all__ = ["reset_static_cache_state", "static_cache_state"]

_STATE_PATTERN = re.compile(r"self\.(_\w*cache\w*)\s*[:=][^=]")  # an attribute generate keeps on the model


@functools.cache
def static_cache_state() -> tuple[str, ...]:
    """The attributes ``generate`` keeps on the model between calls about its static cache, read from its source
    (4.55: the cache itself, ``_cache``; 5.x: the longest length so far, ``_previous_max_cache_length``)."""
    from transformers.generation import utils

    return tuple(sorted(set(_STATE_PATTERN.findall(inspect.getsource(utils)))))


def reset_static_cache_state(model: Any) -> None:
    """Forget the static cache transformers keeps on the model between ``generate`` calls.

    Kept, it would make a short run hold the cache of an earlier long one, and once ``offloaded_static`` has
    run on 4.55 (an ``OffloadedStaticCache`` is a ``StaticCache``), ``static`` would silently run on the
    offloaded cache. Call it before each configuration and strategy; a compiled forward stays (it belongs
    to ``torch.compile``'s own cache, keyed by shape).
    """
    for name in static_cache_state():
        if name in vars(model):
            delattr(model, name)
