"""The KV-cache strategies ``%%kvbench --cache`` compares, and why one cannot run here.

A strategy is a named set of generation-config settings (``use_cache``, ``cache_implementation``,
``cache_config``, ``compile_config``). transformers lines spell and support some of them differently
(the HQQ backend is ``"HQQ"`` in 4.55 and ``"hqq"`` in 5.x; ``fp8`` is in 5.24 but not 5.17), so the
catalogue resolves a user's name against what the installed transformers accepts, asked of it by
:mod:`kvmagic.measure.capabilities`. A strategy that cannot run comes back with ``reason`` set
instead of raising: the benchmark shows it as a row with a note.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvmagic.core.compression import PRESS, expand_presses, parse_press
from kvmagic.core.spec import KV_BITS, PAIR, REFERENCE
from kvmagic.errors import KVMagicError
from kvmagic.measure import capabilities, press
from kvmagic.measure.capabilities import QUANTIZED_SPELLINGS, transformers_version

if TYPE_CHECKING:
    from kvmagic.model.loading import LoadedModel

__all__ = [
    "COMPILE_SUFFIX",
    "KNOWN",
    "PREFIX_SUFFIX",
    "REFERENCE",
    "Strategy",
    "parse_names",
    "plain_pair",
    "resolve",
    "strategies",
]

COMPILE_SUFFIX = "+compile"
PREFIX_SUFFIX = "+prefix"  # a strategy's warm twin: it starts from the cache of the prompt's shared prefix
QUANTIZED = "quantized"
_PACKAGES = {"quanto": "optimum-quanto", "hqq": "hqq"}  # backend -> the pip package it needs; fp8 needs none
_BACKEND_MODULES = {"optimum-quanto": "optimum.quanto", "hqq": "hqq"}
_STATIC = ("static", "offloaded_static")  # the caches torch.compile can work with
KNOWN = (
    "off",
    "dynamic",
    "static",
    "offloaded",
    "offloaded_static",
    *(f"{QUANTIZED}:{b}" for b in QUANTIZED_SPELLINGS),
)


@dataclass(frozen=True)
class Strategy:
    """One column of the comparison: how ``generate`` is told to cache, or why it cannot here."""

    name: str
    settings: Mapping[str, Any] = field(default_factory=dict)  # generation-config attribute -> value
    reason: str = ""  # why it cannot run here; empty when it can
    compiled: bool = False
    note: str = ""  # what a reader of its rows should know though it runs
    pruned: float = 0.0  # the share of the prompt's positions its cache frees after the prefill (a press)
    warm: str = ""  # a warm twin: the strategy whose cache of the prompt's prefix it starts from
    wrap: Callable[[Any], AbstractContextManager[None]] | None = field(default=None, compare=False, repr=False)

    def around(self, model: Any) -> AbstractContextManager[None]:
        """The context every ``generate`` of this strategy runs in: ``with strategy.around(model):
        model.generate(...)``. A press strategy's registers kvpress's hooks on the model for the duration
        (they compress the prompt's cache at the prefill) and removes them after; every other strategy's
        does nothing. Enter it outside the timed region: only ``generate`` is timed."""
        return nullcontext() if self.wrap is None else self.wrap(model)

    @property
    def caches(self) -> bool:
        """Whether ``generate`` keeps keys and values at all (every strategy but ``off``)."""
        return bool(self.settings.get("use_cache", True))

    @property
    def static(self) -> bool:
        """Whether transformers keeps this strategy's cache on the model between calls (see
        :func:`~kvmagic.measure.static_cache.reset_static_cache_state`)."""
        return self.settings.get("cache_implementation") in _STATIC


def plain_pair(loaded: LoadedModel) -> tuple[Strategy, Strategy]:
    """The cache off and on: the plain run, the two-strategy case of a comparison."""
    reference, cached = (resolve(loaded, name) for name in PAIR)
    return reference, cached


def parse_names(text: str | Sequence[str]) -> list[str]:
    """``off,dynamic,quantized:hqq`` -> the names, de-duplicated, ``off`` first (it is the reference); a sweep
    of press ratios (``press:snapkv:0.25-0.75+0.25``) becomes one name per ratio."""
    items = text.split(",") if isinstance(text, str) else list(text)
    names = [name for item in items if item.strip() for name in _expanded(item.strip())]
    if not names:
        raise KVMagicError(f"{{cache}} needs at least one strategy, e.g. off,dynamic,static ({_choices()})", "cache")
    for name in names:
        base = name.removesuffix(COMPILE_SUFFIX)
        if base.startswith(PRESS + ":"):
            continue  # read by _expanded
        if base == QUANTIZED:
            raise KVMagicError(f"{name!r} needs a backend: write quantized:quanto, quantized:hqq or quantized:fp8")
        if base.startswith(QUANTIZED + ":") and base not in KNOWN:
            raise KVMagicError(f"unknown quantization backend in {name!r}: use one of {', '.join(QUANTIZED_SPELLINGS)}")
        if base not in KNOWN and base not in capabilities.cache_implementations():
            raise KVMagicError(f"unknown cache strategy {name!r}: use {_choices()}")
    return list(dict.fromkeys([REFERENCE, *names]))


def _expanded(name: str) -> list[str]:
    """A press name, each ratio of its sweep, its method checked where kvpress can list them; any other as is."""
    if name != PRESS and not name.startswith(PRESS + ":"):
        return [name]
    presses = expand_presses(name)
    known = press.methods() if not capabilities.press_reason() else {}
    if known and presses[0].method not in known:
        built = [method for method, cls in known.items() if not press.method_reason(cls)]
        raise KVMagicError(f"kvpress has no method {presses[0].method!r} in {name!r}: use one of {', '.join(built)}")
    return [p.name for p in presses]


def strategies(
    loaded: LoadedModel,
    names: Sequence[str],
    *,
    kv_bits: int | None = None,
    compile: bool = False,
    prefix: bool = False,
) -> list[Strategy]:
    """Resolve each name for this model and the installed transformers; ``compile`` adds a compiled
    twin of each static cache named (``static+compile``) beside the plain one, ``prefix`` a warm twin
    of each strategy that caches (``dynamic+prefix``), after all of them."""
    if kv_bits is not None:
        _check_bits(names, kv_bits)
    wanted = list(names)
    if compile:
        plain = [n for n in wanted if n in _STATIC]
        if not plain:
            raise KVMagicError(
                "{compile} compiles a static cache: add static to {cache} (e.g. off,dynamic,static)", "compile", "cache"
            )
        wanted += [n + COMPILE_SUFFIX for n in plain]
    found = [resolve(loaded, name, kv_bits=kv_bits) for name in dict.fromkeys(wanted)]
    return found + [warm_twin(s) for s in found if s.caches] if prefix else found


def warm_twin(strategy: Strategy) -> Strategy:
    """``strategy`` started from the cache of the prompt's prefix, which the runner builds with ``strategy`` itself
    and passes in (so ``generate`` is told no cache implementation of its own); a static cache and a press get
    one that says why it cannot run."""
    name = strategy.name + PREFIX_SUFFIX
    if parse_press(strategy.name) is not None:
        return Strategy(name, reason="kvpress compresses only at a prefill, and the rest of a prompt after a reused "
                        "prefix is not one: its cache would stay whole")  # fmt: skip
    if strategy.reason:
        return Strategy(name, reason=strategy.reason)
    if strategy.static or strategy.compiled:
        return Strategy(name, reason="a reused prefix needs a cache that grows: a static one is sized by the call "
                        "that builds it")  # fmt: skip
    settings = {k: v for k, v in strategy.settings.items() if k != "cache_config"}
    return Strategy(name, {**settings, "cache_implementation": None}, warm=strategy.name)


def resolve(loaded: LoadedModel, name: str, *, kv_bits: int | None = None) -> Strategy:
    """The settings ``name`` needs under the installed transformers, or the reason it cannot run.

    Every strategy states its cache implementation and whether transformers may compile: only a
    ``+compile`` strategy may (transformers compiles any static cache by itself on CUDA otherwise).
    """
    compiled = name.endswith(COMPILE_SUFFIX)
    base = name.removesuffix(COMPILE_SUFFIX)
    if base == "off":
        return Strategy(name, _settings(None))
    if base == "dynamic":
        return Strategy(name, _settings("dynamic"))
    if base.startswith(QUANTIZED + ":"):
        return _quantized(name, base.split(":", 1)[1], kv_bits)
    if base.startswith(PRESS + ":"):
        return _press(loaded, name)
    settings = _settings(base)
    reason = _implementation_reason(loaded, base)
    if compiled and not reason:
        reason = _compile_reason(loaded)
        settings.update(compile_config=_compile_config(), disable_compile=False)
    return Strategy(name, settings, reason, compiled)


def _settings(implementation: str | None, **extra: Any) -> dict[str, Any]:
    """``use_cache``, ``cache_implementation`` and ``disable_compile`` always, so nothing falls back to the model's."""
    return {"use_cache": implementation is not None, "cache_implementation": implementation,
            "disable_compile": True, **extra}  # fmt: skip


def _quantized(name: str, backend: str, kv_bits: int | None) -> Strategy:
    reason = capabilities.quantized_backend_reason(backend)
    if reason:
        return Strategy(name, reason=reason)
    package = _PACKAGES.get(backend)
    if package is not None and not _installed(package):
        return Strategy(name, reason=f"needs {package}: pip install 'kvmagic[quantized]'")
    config: dict[str, Any] = {"backend": capabilities.quantized_backends()[backend]}
    if kv_bits is not None and backend in KV_BITS:
        config["nbits"] = kv_bits
    return Strategy(name, _settings(QUANTIZED, cache_config=config))


def _press(loaded: LoadedModel, name: str) -> Strategy:
    """A dynamic cache that kvpress compresses (:mod:`kvmagic.measure.press`), or why it cannot here."""
    parsed = parse_press(name)
    assert parsed is not None  # resolve() sends only press names here
    reason = capabilities.press_reason()
    if reason:
        return Strategy(name, reason=reason)
    plan = press.plan_press(loaded.model, parsed)
    settings = _settings("dynamic") if not plan.reason else {}
    return Strategy(name, settings, plan.reason, note=plan.note, pruned=plan.pruned, wrap=plan.around)


def _installed(package: str) -> bool:
    return importlib.util.find_spec(_BACKEND_MODULES[package]) is not None


def _implementation_reason(loaded: LoadedModel, implementation: str) -> str:
    if implementation not in capabilities.cache_implementations():
        return f"transformers {transformers_version()} has no cache_implementation={implementation!r}"
    if implementation.startswith("offloaded") and not any(d.type in ("cuda", "xpu") for d in loaded.devices):
        return "needs a GPU (CUDA or XPU): it offloads the cache from the accelerator to CPU memory"
    windows_all = implementation == "sliding_window" and capabilities.sliding_window_windows_every_layer()
    if windows_all and "full_attention" in _layer_types(loaded):
        return (
            f"transformers {transformers_version()} windows every layer with sliding_window, and this model has "
            "full-attention layers: its output would be wrong"
        )
    fullgraph = getattr(loaded.model, "_can_compile_fullgraph", True)
    if implementation in _STATIC and not fullgraph and capabilities.static_cache_needs_fullgraph():
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


def _compile_config() -> Any:
    from transformers import CompileConfig

    return CompileConfig()


def _check_bits(names: Sequence[str], kv_bits: int) -> None:
    for name in names:
        backend = name.removesuffix(COMPILE_SUFFIX).partition(QUANTIZED + ":")[2]
        allowed = KV_BITS.get(backend)
        if allowed is not None and kv_bits not in allowed:
            raise KVMagicError(
                f"{{kv_bits}} {kv_bits} is not a width {backend} takes: use one of {', '.join(map(str, allowed))}",
                "kv_bits",
            )
    if not any(n.removesuffix(COMPILE_SUFFIX).partition(QUANTIZED + ":")[2] in KV_BITS for n in names):
        raise KVMagicError(
            "{kv_bits} is the width of a quanto or hqq cache: add quantized:quanto to {cache}", "kv_bits", "cache"
        )


def _layer_types(loaded: LoadedModel) -> list[str]:
    text = loaded.model.config.get_text_config()
    return list(getattr(text, "layer_types", None) or ["full_attention"])


def _choices() -> str:
    return ", ".join((*KNOWN, f"{PRESS}:METHOD:RATIO"))
