"""kvpress's compression methods as cache strategies: which it exports, which a ratio alone builds, and how
one is applied around ``generate``.

A press is a context manager over the model (``with SnapKVPress(compression_ratio=0.5)(model): generate``):
its forward hooks on every attention layer cut the prompt's keys and values once the prefill has written
them, so the decoding steps attend to the positions kept. Which presses exist, what their constructors
take and whether they mask positions rather than free them is read from the installed kvpress, never
listed here. Importing kvpress wraps transformers' attention functions for the rest of the process (it
fakes head-wise compression that way); a wrapped function calls the original unchanged unless a press
has masked positions, so only a press strategy is asked for imports it.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from kvmagic.core.compression import PressName

__all__ = ["PressPlan", "method_name", "method_reason", "methods", "plan_press"]

_WORD = re.compile(r"(?<=[a-z])(?=[A-Z][a-z]|[A-Z]{3})")  # a word starts: Streaming|LLM, Expected|Attention


@dataclass(frozen=True)
class PressPlan:
    """What a press strategy needs beyond a dynamic cache's settings, or why it cannot run here."""

    reason: str = ""  # why it cannot run here; empty when it can
    note: str = ""  # what a reader of its rows should know though it runs
    pruned: float = 0.0  # the share of the prompt's positions it frees after the prefill (0 where it masks them)
    around: Callable[[Any], AbstractContextManager[None]] | None = None  # model -> the press applied to it


def method_name(class_name: str) -> str:
    """``SnapKVPress`` -> ``snapkv``, ``StreamingLLMPress`` -> ``streaming_llm``, ``KnormPress`` -> ``knorm``:
    "Press" dropped, lower case, a ``_`` where a lowercase letter meets a capitalised word or an acronym of
    three or more capitals (so KV stays with its word, as kvpress's own module names have it)."""
    return _WORD.sub("_", class_name.removesuffix("Press")).lower()


@functools.cache
def methods() -> Mapping[str, type]:
    """Every press the installed kvpress exports, by method name."""
    import kvpress

    exported = (getattr(kvpress, name) for name in kvpress.__all__)
    found = {method_name(c.__name__): c for c in exported if isinstance(c, type) and issubclass(c, kvpress.BasePress)}
    return dict(sorted(found.items()))


def method_reason(press: type) -> str:
    """Why ``press`` cannot be built from a compression ratio alone and applied around ``generate``; empty
    when it can. Read from its constructor's signature and from whether it replaces kvpress's context."""
    from kvpress import BasePress, ScorerPress

    name = press.__name__
    if press in (BasePress, ScorerPress):
        return f"{name} is kvpress's base for writing presses, not a method"
    parameters = inspect.signature(press).parameters
    if "compression_ratio" not in parameters:
        wrapped = [p for p in parameters if re.search(r"press(es)?$", p)]
        if wrapped:
            return f"{name} wraps another press ({wrapped[0]}=...): a ratio alone does not build it"
        return f"{name} takes no compression_ratio (it takes {', '.join(parameters) or 'nothing'})"
    required = [p for p, v in parameters.items() if v.default is inspect.Parameter.empty and p != "compression_ratio"]
    if required:
        return f"{name} needs {', '.join(required)} beside a ratio"
    if press.__call__ is not BasePress.__call__:
        return (
            f"{name} replaces kvpress's context with its own, made for kvpress's pipeline (prefill the context, "
            "compress, then answer): not for a generate inside it"
        )
    return ""


def _masks(press: type) -> bool:
    """Whether ``press`` hides positions from attention (kvpress's head-wise ``masked_key_indices``) rather
    than dropping them from the cache: read from its source and its kvpress parents'."""
    own = [c for c in press.__mro__ if c.__module__.startswith("kvpress.")]
    return any("masked_key_indices" in inspect.getsource(c) for c in own)


def plan_press(model: Any, press: PressName) -> PressPlan:
    """How ``press`` runs on ``model``, or why it cannot: a method kvpress has, built from the ratio alone, on
    a model whose attention layers its hooks can reach. The caller has checked kvpress works here."""
    import kvpress

    cls = methods().get(press.method)
    if cls is None:  # checked() refuses it first; resolve() called alone comes here
        return PressPlan(f"kvpress has no method {press.method!r}: docs/strategies.md lists those a ratio builds")
    reason = method_reason(cls) or _model_reason(model)
    if reason:
        return PressPlan(reason)
    note = ""
    if not isinstance(model, kvpress.SUPPORTED_MODELS):
        tested = ", ".join(re.sub(r"For\w+$", "", c.__name__) for c in kvpress.SUPPORTED_MODELS)
        note = f"kvpress has not tested {type(model).__name__} (only {tested})"
    make = functools.partial(cls, compression_ratio=press.ratio)
    return PressPlan("", note, 0.0 if _masks(cls) else press.ratio, functools.partial(_applied, make))


def _model_reason(model: Any) -> str:
    """What kvpress's context needs of a model: decoder layers whose ``self_attn`` knows its ``layer_idx``,
    and one rotary embedding (it hands it to each layer, to score keys before their rotation)."""
    inner = getattr(model, "model", None)
    language = getattr(inner, "language_model", inner)
    layers = getattr(language, "layers", None)
    hooked = layers is not None and all(hasattr(getattr(layer, "self_attn", None), "layer_idx") for layer in layers)
    if hooked and hasattr(language, "rotary_emb"):
        return ""
    return (
        f"kvpress cannot hook {type(model).__name__}: it needs model.model.layers[i].self_attn (with layer_idx) "
        "and model.model.rotary_emb"
    )


def _tested(record: logging.LogRecord) -> bool:
    """Drops kvpress's "not tested" warning, which it logs at every entry: the row's note says it once."""
    return "not tested" not in record.getMessage()


@contextmanager
def _applied(make: Callable[[], Any], model: Any) -> Iterator[None]:
    """A fresh press (some keep state between calls) over ``model`` for the duration."""
    log = logging.getLogger("kvpress.presses.base_press")
    log.addFilter(_tested)
    try:
        with make()(model):
            yield
    finally:
        log.removeFilter(_tested)
