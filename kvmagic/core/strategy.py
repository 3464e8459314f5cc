"""A cache strategy as a value: what ``--cache`` names, read once, and carried by every layer.

``off``, ``dynamic``, ``static``, ``offloaded``, ``offloaded_static``, ``quantized:BACKEND``,
``press:METHOD:RATIO`` or any other ``cache_implementation`` the installed transformers accepts, each with
``+compile`` (a compiled twin of a static cache) and ``+prefix`` (a warm twin, started from the cache of
the prompt's prefix). :func:`parse` is the only reader of that spelling; ``str(strategy)`` writes it back
for tables and files. Whether the installed libraries can run a strategy is asked below this value, in
:mod:`kvmagic.measure.strategies`; what it is, here, with no torch.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from kvmagic.core.compression import PRESS, PressName, expand_presses
from kvmagic.errors import KVMagicError, did_you_mean

__all__ = [
    "BACKENDS", "DYNAMIC", "FULL_CACHE", "KNOWN", "OFF", "PAIR", "REFERENCE", "STATIC", "Backend", "ByStrategy", "Kind",
    "Strategy",
    "choices", "parse", "parse_list", "unknown",
]  # fmt: skip

COMPILE_SUFFIX = "+compile"
PREFIX_SUFFIX = "+prefix"
QUANTIZED = "quantized"
NAMED = ("off", "dynamic", "static", "offloaded", "offloaded_static")  # the kinds named by their spelling alone
STATIC = ("static", "offloaded_static")  # the caches transformers keeps on the model, and torch.compile works with
_IMPLEMENTATION = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Backend:
    """A quantized cache's backend: how transformers lines spell it, the package it needs, the widths it takes."""

    name: str
    spellings: tuple[str, ...]  # as a transformers line may spell it (4.55 wrote "HQQ")
    package: str = ""  # the pip package it needs; empty: none
    module: str = ""  # what that package installs, to find it without importing it
    widths: tuple[int, ...] = ()  # the bits `kv_bits` may choose; empty: one width only
    bits: int = 4  # the width stored when none is chosen (transformers' default nbits)


BACKENDS = {
    b.name: b
    for b in (
        Backend("quanto", ("quanto",), "optimum-quanto", "optimum.quanto", widths=(2, 4)),
        Backend("hqq", ("hqq", "HQQ"), "hqq", "hqq", widths=(1, 2, 3, 4, 8)),
        Backend("fp8", ("fp8",), bits=8),
    )
}
KNOWN = (*NAMED, *(f"{QUANTIZED}:{b}" for b in BACKENDS))  # every spelling but a press's and a passed-through one


class Kind(str, Enum):
    """What kind of cache a strategy keeps: one of the named ones, a quantized one (with a backend), a kvpress method
    (with a press), or any other ``cache_implementation`` the installed transformers takes (by its name)."""

    OFF = "off"
    DYNAMIC = "dynamic"
    STATIC = "static"
    OFFLOADED = "offloaded"
    OFFLOADED_STATIC = "offloaded_static"
    QUANTIZED = "quantized"
    PRESS = "press"
    IMPLEMENTATION = "implementation"


@dataclass(frozen=True)
class Strategy:
    """How ``generate`` keeps keys and values: one row of a comparison, one side of the plain run's pair.

    Two strategies are equal where everything that makes their runs differ is: ``bits``, a quantized cache's chosen
    width, included. A strategy is no string: a lookup by name says so (``result.measurement("static")``,
    ``result.skipped["offloaded"]``, ``Strategy.of("static")``), and reads the name as written, which leaves a
    width out (rows and files name a strategy without it, and keep the width the request chose).
    """

    kind: Kind
    backend: str = ""
    press: PressName | None = None
    implementation: str = ""
    compiled: bool = False
    warm: bool = False
    bits: int | None = None

    def __post_init__(self) -> None:  # a kind given by its name (``Strategy("static")``) is that kind, hashed alike
        object.__setattr__(self, "kind", Kind(self.kind))

    def __str__(self) -> str:
        return self._spelling

    @functools.cached_property
    def _spelling(self) -> str:
        if self.kind is Kind.QUANTIZED:
            base = f"{QUANTIZED}:{self.backend}"
        elif self.press is not None:
            base = self.press.name
        else:
            base = self.implementation or self.kind.value
        return base + (COMPILE_SUFFIX if self.compiled else "") + (PREFIX_SUFFIX if self.warm else "")

    def named(self, name: str | Strategy) -> bool:
        """Whether ``name`` names this strategy, as rows and files spell it (its width left out)."""
        return self._spelling == str(name)

    @classmethod
    def of(cls, value: Strategy | str, bits: int | None = None) -> Strategy:
        """``value`` as a strategy: itself, or its spelling read. One that names no width (a name never does: rows
        and files spell a strategy without it) is read at ``bits``, the width its request chose."""
        found = value if isinstance(value, Strategy) else parse(value)
        return found if found.bits is not None else found.with_bits(bits)

    @property
    def caches(self) -> bool:
        """Whether ``generate`` keeps keys and values at all (every strategy but ``off``)."""
        return self.kind is not Kind.OFF

    @property
    def static(self) -> bool:
        """A cache sized once for the call, which transformers keeps on the model between calls."""
        return self.kind.value in STATIC

    @property
    def quantized(self) -> bool:
        return self.kind is Kind.QUANTIZED

    @property
    def offloaded(self) -> bool:
        """Its cache moves between the accelerator and CPU memory, a few layers on the device at a time."""
        return self.kind in (Kind.OFFLOADED, Kind.OFFLOADED_STATIC)

    @property
    def cold(self) -> Strategy:
        """The strategy a warm twin twins (itself for any other)."""
        return dataclasses.replace(self, warm=False)

    @property
    def lossless(self) -> bool:
        """Keeps every key and value at full precision: its tokens and logits are the full cache's."""
        return self.kind not in (Kind.QUANTIZED, Kind.PRESS)

    @property
    def cache_implementation(self) -> str | None:
        """What ``generate``'s ``cache_implementation`` is told: None with the cache off; a press runs on a
        dynamic cache."""
        if self.kind is Kind.OFF:
            return None
        if self.kind is Kind.PRESS:
            return Kind.DYNAMIC.value
        return self.implementation or self.kind.value

    def twin(self, *, compiled: bool = False, warm: bool = False) -> Strategy:
        """Its compiled twin (``static+compile``) or its warm twin (``dynamic+prefix``)."""
        return dataclasses.replace(self, compiled=self.compiled or compiled, warm=self.warm or warm)

    def with_bits(self, bits: int | None) -> Strategy:
        """A quantized cache whose backend takes a choice of width, stored at ``bits``; any other as it is."""
        backend = BACKENDS.get(self.backend)
        chosen = self.quantized and bits is not None and backend is not None and bool(backend.widths)
        return dataclasses.replace(self, bits=bits) if chosen else self

    @property
    def stored_bits(self) -> int:
        """The width a quantized cache stores its keys and values at; 0 for any other."""
        backend = BACKENDS.get(self.backend)
        return 0 if backend is None else self.bits or backend.bits


V = TypeVar("V")


class ByStrategy(dict[Strategy, V]):
    """A mapping by strategy that a notebook may also ask by name (``result.skipped["offloaded"]``): a name is read
    as rows and files spell a strategy, its width left out."""

    def __getitem__(self, key: Strategy | str) -> V:
        found = self._key(key)
        if found is None:
            raise KeyError(key)
        return super().__getitem__(found)

    def __contains__(self, key: object) -> bool:
        found = self._key(key) if isinstance(key, (Strategy, str)) else None
        return found is not None and super().__contains__(found)

    def get(self, key: Strategy | str, default: Any = None) -> Any:
        found = self._key(key)
        return default if found is None else super().get(found, default)

    def _key(self, key: Strategy | str) -> Strategy | None:
        if isinstance(key, Strategy):
            return key
        try:
            spelled = str(parse(key))  # as written back: "press:knorm:.5" is "press:knorm:0.5"
        except KVMagicError:
            return None
        return next((found for found in self if found.named(spelled)), None)


OFF = Strategy(Kind.OFF)
DYNAMIC = Strategy(Kind.DYNAMIC)
REFERENCE = OFF  # the strategy every other one is measured against
FULL_CACHE = DYNAMIC  # the strategy every other one's quality is judged against: full precision, nothing dropped
PAIR = (OFF, DYNAMIC)  # the plain run: the cache off and on


def parse(text: str) -> Strategy:
    """One strategy from its spelling (a press names one ratio, not a sweep of them)."""
    found = _read(text)
    if len(found) > 1:
        raise KVMagicError(f"{text!r} is a sweep of ratios: name one ratio, e.g. {found[0]}")
    return found[0]


def parse_list(text: str | Iterable[str | Strategy]) -> tuple[Strategy, ...]:
    """``off,dynamic,press:snapkv:0.25-0.75+0.25`` -> each strategy, a press sweep one per ratio, in order; a
    strategy named twice (``press:knorm:0.5,press:knorm:.5``) is refused."""
    items = text.split(",") if isinstance(text, str) else list(text)
    found: list[Strategy] = []
    for item in items:
        if isinstance(item, Strategy):
            found.append(item)
        elif isinstance(item, str) and item.strip():
            found += _read(item.strip())
    repeated = next((s for i, s in enumerate(found) if s in found[:i]), None)
    if repeated is not None:
        raise KVMagicError(f"{{cache}} names {repeated} twice: name each strategy once", "cache")
    return tuple(found)


def _read(text: str) -> Sequence[Strategy]:
    name, compiled, warm = text, False, False
    while name.endswith((COMPILE_SUFFIX, PREFIX_SUFFIX)):  # one suffix at a time, in either order
        if name.endswith(COMPILE_SUFFIX):
            compiled, name = True, name.removesuffix(COMPILE_SUFFIX)
        else:
            warm, name = True, name.removesuffix(PREFIX_SUFFIX)
    if name == PRESS or name.startswith(PRESS + ":"):
        return [Strategy(Kind.PRESS, press=press, compiled=compiled, warm=warm) for press in expand_presses(name)]
    if name == QUANTIZED:
        spellings = " or ".join(spelling for spelling in KNOWN if spelling.startswith(QUANTIZED))
        raise KVMagicError(f"{text!r} needs a backend: write {spellings}")
    if name.startswith(QUANTIZED + ":"):
        backend = name.split(":", 1)[1]
        if backend not in BACKENDS:
            raise KVMagicError(f"unknown quantization backend in {text!r}: use one of {', '.join(BACKENDS)}")
        return [Strategy(Kind.QUANTIZED, backend=backend, compiled=compiled, warm=warm)]
    if name in NAMED:
        return [Strategy(Kind(name), compiled=compiled, warm=warm)]
    if not _IMPLEMENTATION.match(name):
        raise unknown(text)
    return [Strategy(Kind.IMPLEMENTATION, implementation=name, compiled=compiled, warm=warm)]


def unknown(text: str) -> KVMagicError:
    """The refusal of a spelling that names no strategy, the likely one first (``dynamc``: dynamic)."""
    return KVMagicError(f"unknown cache strategy {text!r}: {did_you_mean(text, KNOWN)}use {choices()}")


def choices() -> str:
    """Every spelling ``--cache`` takes, for help and errors."""
    return ", ".join((*KNOWN, f"{PRESS}:METHOD:RATIO"))
