"""The KV-cache strategies ``%%kvbench --cache`` compares, and why one cannot run here.

A strategy (:class:`~kvmagic.core.strategy.Strategy`, read once from its name) runs as a set of generation-config
settings (``use_cache``, ``cache_implementation``, ``cache_config``, ``compile_config``), its :class:`Setup`.
transformers lines spell and support some of them differently (the HQQ backend is ``"HQQ"`` in 4.55 and ``"hqq"``
in 5.x; ``fp8`` is in 5.24 but not 5.17), so each is resolved against what the installed transformers accepts,
asked of it by :mod:`kvmagic.measure.capabilities`. A strategy that cannot run comes back with ``reason`` set
instead of raising: the benchmark shows it as a row with a note. A static cache transformers keeps on the model
between calls is forgotten before each configuration and strategy, so that each runs on a cache of its own.
"""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvmagic.core.strategy import BACKENDS, PAIR, REFERENCE, STATIC, Backend, Strategy, choices, unknown
from kvmagic.errors import KVMagicError
from kvmagic.measure import capabilities, press
from kvmagic.measure.capabilities import cache_keyword, static_cache_state, transformers_version
from kvmagic.measure.greedy import greedy_config

if TYPE_CHECKING:
    from transformers import GenerationConfig

    from kvmagic.measure.loaded import LoadedModel

__all__ = [
    "Setup", "checked", "plain_pair", "reset_static_cache_state", "resolve", "setups", "strategy_config",
]  # fmt: skip


@dataclass(frozen=True)
class Setup:
    """A strategy resolved for this model and the installed libraries: how ``generate`` is told to cache, or why
    it cannot here."""

    strategy: Strategy
    settings: Mapping[str, Any] = field(default_factory=dict)  # generation-config attribute -> value
    reason: str = ""  # why it cannot run here; empty when it can
    note: str = ""  # what a reader of its rows should know though it runs
    pruned: float = 0.0  # the share of the prompt's positions its cache frees after the prefill (a press)
    wrap: Callable[[Any], AbstractContextManager[None]] | None = field(default=None, compare=False, repr=False)
    # A strategy that starts from a cache object of its own (a warm twin: a copy of its prefix's cache) makes a
    # fresh one here for every run, before the clock starts.
    start: Callable[[], Any] | None = field(default=None, compare=False, repr=False)

    def around(self, model: Any) -> AbstractContextManager[None]:
        """The context every ``generate`` of this strategy runs in: ``with setup.around(model):
        model.generate(...)``. A press strategy's registers kvpress's hooks on the model for the duration
        (they compress the prompt's cache at the prefill) and removes them after; every other strategy's
        does nothing. Enter it outside the timed region: only ``generate`` is timed."""
        return nullcontext() if self.wrap is None else self.wrap(model)

    def given(self, model: Any, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        """What ``generate`` gets: the inputs, and the cache object this strategy starts from, made now (call it
        outside the timed region)."""
        return inputs if self.start is None else {**inputs, cache_keyword(model): self.start()}

    @property
    def caches(self) -> bool:
        return self.strategy.caches

    @property
    def static(self) -> bool:
        """Whether transformers keeps this strategy's cache on the model between calls (see
        :func:`reset_static_cache_state`)."""
        return self.settings.get("cache_implementation") in STATIC


def reset_static_cache_state(model: Any) -> None:
    """Forget the static cache transformers keeps on the model between ``generate`` calls
    (:func:`~kvmagic.measure.capabilities.static_cache_state`).

    Kept, it would make a short run hold the cache of an earlier long one, and once ``offloaded_static`` has
    run on 4.55 (an ``OffloadedStaticCache`` is a ``StaticCache``), ``static`` would silently run on the
    offloaded cache. Call it before each configuration and strategy; a compiled forward stays (it belongs
    to ``torch.compile``'s own cache, keyed by shape).
    """
    for name in static_cache_state():
        if name in vars(model):
            delattr(model, name)


def strategy_config(
    loaded: LoadedModel, new_tokens: int, strategy: Setup, *, keep_cache: bool = False
) -> GenerationConfig:
    """The greedy config of one strategy: its settings applied to a fresh copy, never to the model's.

    ``keep_cache`` asks ``generate`` to return the cache it built (it builds it either way)."""
    settings = strategy.settings
    config = greedy_config(loaded.model, loaded.tokenizer, new_tokens, settings.get("use_cache", True))
    for key, value in settings.items():
        setattr(config, key, copy.deepcopy(value))  # generate may consume a cache_config dict
    config.return_dict_in_generate = keep_cache
    return config


def plain_pair(loaded: LoadedModel) -> tuple[Setup, Setup]:
    """The cache off and on: the plain run, the two-strategy case of a comparison."""
    reference, cached = (resolve(loaded, strategy) for strategy in PAIR)
    return reference, cached


def checked(strategies: Sequence[Strategy]) -> list[Strategy]:
    """The strategies asked for, de-duplicated, ``off`` first (it is the reference), each one the installed
    libraries know of by name: a ``cache_implementation`` transformers accepts, a method kvpress has."""
    if not strategies:
        raise KVMagicError(f"{{cache}} needs at least one strategy, e.g. off,dynamic,static ({choices()})", "cache")
    known = press.methods() if not capabilities.press_reason() else {}
    for strategy in strategies:
        implementation = strategy.implementation
        if implementation and implementation not in capabilities.cache_implementations():
            raise unknown(str(strategy))
        method = strategy.press.method if strategy.press is not None else None
        if known and method is not None and method not in known:
            built = [name for name, cls in known.items() if not press.method_reason(cls)]
            raise KVMagicError(f"kvpress has no method {method!r} in {str(strategy)!r}: use one of {', '.join(built)}")
    return list(dict.fromkeys([REFERENCE, *strategies]))


def setups(
    loaded: LoadedModel,
    strategies: Sequence[Strategy],
    *,
    kv_bits: int | None = None,
    compile: bool = False,
) -> list[Setup]:
    """Resolve each strategy for this model and the installed transformers; ``compile`` adds a compiled
    twin of each static cache named (``static+compile``) beside the plain one."""
    wanted = list(strategies)
    if compile:  # BenchSpec has checked that a plain static cache is named, and that kv_bits fits a strategy
        wanted += [s.twin(compiled=True) for s in wanted if s.static and not s.compiled]
    return [resolve(loaded, s, kv_bits=kv_bits) for s in dict.fromkeys(wanted)]


def resolve(loaded: LoadedModel, strategy: Strategy | str, *, kv_bits: int | None = None) -> Setup:
    """The settings ``strategy`` needs under the installed transformers, or the reason it cannot run.

    Every strategy states its cache implementation and whether transformers may compile: only a
    ``+compile`` strategy may (transformers compiles any static cache by itself on CUDA otherwise).
    """
    strategy = Strategy.of(strategy).with_bits(kv_bits)
    if strategy.cold in PAIR:
        return Setup(strategy, _settings(strategy.cache_implementation))
    if strategy.quantized:
        return _quantized(strategy)
    if strategy.press is not None:
        return _press(loaded, strategy)
    implementation = strategy.cache_implementation
    assert implementation is not None  # every strategy but off names one
    settings = _settings(implementation)
    reason = _implementation_reason(loaded, implementation)
    if strategy.compiled and not reason:
        from transformers import CompileConfig

        reason = _compile_reason(loaded)
        settings.update(compile_config=CompileConfig(), disable_compile=False)
    return Setup(strategy, settings, reason)


def _settings(implementation: str | None, **extra: Any) -> dict[str, Any]:
    """``use_cache``, ``cache_implementation`` and ``disable_compile`` always, so nothing falls back to the model's."""
    return {"use_cache": implementation is not None, "cache_implementation": implementation,
            "disable_compile": True, **extra}  # fmt: skip


def _quantized(strategy: Strategy) -> Setup:
    reason = capabilities.quantized_backend_reason(strategy.backend)
    if reason:
        return Setup(strategy, reason=reason)
    backend = BACKENDS[strategy.backend]
    if not _installed(backend):
        return Setup(strategy, reason=f"needs {backend.package}: pip install 'kvmagic[quantized]'")
    config: dict[str, Any] = {"backend": capabilities.quantized_backends()[strategy.backend]}
    if strategy.bits is not None:
        config["nbits"] = strategy.bits
    return Setup(strategy, _settings("quantized", cache_config=config))


def _installed(backend: Backend) -> bool:
    """Whether the package the backend needs is there, found without importing it."""
    return not backend.module or importlib.util.find_spec(backend.module) is not None


def _press(loaded: LoadedModel, strategy: Strategy) -> Setup:
    """A dynamic cache that kvpress compresses (:mod:`kvmagic.measure.press`), or why it cannot here."""
    assert strategy.press is not None  # resolve() sends only presses here
    reason = capabilities.press_reason()
    if reason:
        return Setup(strategy, reason=reason)
    plan = press.plan_press(loaded.model, strategy.press)
    settings = _settings("dynamic") if not plan.reason else {}
    return Setup(strategy, settings, plan.reason, note=plan.note, pruned=plan.pruned, wrap=plan.around)


def _implementation_reason(loaded: LoadedModel, implementation: str) -> str:
    if implementation not in capabilities.cache_implementations():
        return f"transformers {transformers_version()} has no cache_implementation={implementation!r}"
    if implementation.startswith("offloaded") and not any(d.type in ("cuda", "xpu") for d in loaded.devices):
        return "needs a GPU (CUDA or XPU): it offloads the cache from the accelerator to CPU memory"
    if implementation == "sliding_window" and capabilities.sliding_window_windows_every_layer():
        layer_types = getattr(loaded.model.config.get_text_config(), "layer_types", None) or ["full_attention"]
        if "full_attention" in layer_types:
            return (
                f"transformers {transformers_version()} windows every layer with sliding_window, and this model "
                "has full-attention layers: its output would be wrong"
            )
    fullgraph = getattr(loaded.model, "_can_compile_fullgraph", True)
    if implementation in STATIC and not fullgraph and capabilities.static_cache_needs_fullgraph():
        return f"{type(loaded.model).__name__} does not support a static cache in transformers {transformers_version()}"
    return ""


def _compile_reason(loaded: LoadedModel) -> str:
    """Why transformers will skip compiling, mirroring its ``_valid_auto_compile_criteria`` (its inputs are
    asked of it by :func:`kvmagic.measure.capabilities.compile_criteria`)."""
    model, criteria = loaded.model, capabilities.compile_criteria()
    if model.device.type not in criteria.devices:
        return (
            f"transformers {transformers_version()} compiles generate only on {'/'.join(criteria.devices)}, "
            f"not on {model.device.type}: not compiled"
        )
    if criteria.needs_fullgraph and not getattr(model, "_can_compile_fullgraph", True):
        return f"{type(model).__name__} cannot be compiled as one graph: not compiled"
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None and not getattr(quantizer, "is_compileable", False):
        return f"transformers does not compile weights quantized by {type(quantizer).__name__}: not compiled"
    places = {str(place) for place in (getattr(model, "hf_device_map", None) or {}).values()}
    if "disk" in places:
        return "the device map offloads layers to disk, and transformers does not compile that: not compiled"
    if "cpu" in places and len(places) > 1:
        return (
            "the device map puts layers on the CPU beside the accelerator, and transformers does not compile "
            "a model that spans both: not compiled"
        )
    return ""
