"""What a benchmark is asked to measure: one frozen, validated request that every layer reads.

The front ends (magic, command) and the plain :func:`kvmagic.run_benchmark` all build a
:class:`BenchSpec`; the runner measures what it says and the result carries it, as a
``torch.utils.benchmark`` ``Measurement`` carries its ``TaskSpec``. Every check lives here,
per field and across fields, and speaks in parameter names: a front end spells them as its flags.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from kvmagic.core.addon import addons
from kvmagic.core.lengths import parse_lengths
from kvmagic.core.strategy import BACKENDS, REFERENCE, Strategy, parse_list
from kvmagic.errors import KVMagicError

__all__ = [
    "KV_BITS",
    "MIN_AUTO_PAIRS",
    "BenchSpec",
    "Repeat",
    "check_field",
    "flag",
    "names",
]

MIN_AUTO_PAIRS = 5  # -r auto's floor: the time cap can stop it no sooner
KV_BITS = {b.name: b.widths for b in BACKENDS.values() if b.widths}  # the widths a quantized backend takes
Repeat = int | Literal["auto"]


@dataclass(frozen=True)
class BenchSpec:
    """The request: lengths, warm-up, repeats and their stop rule, budget, strategies, what to add.

    ``new_tokens``/``prompt_tokens``/``batch`` take a number, a sequence or the length grammar
    (``"16-256*4"``) and are kept as tuples; ``cache`` takes ``"off,dynamic"`` or a sequence. ``addons`` holds
    the fields every add-on adds (:class:`~kvmagic.core.addon.Field`), by name, each checked by its add-on and
    filled with its default: ``BenchSpec.of(limits=True)`` sets one, ``spec.option("limits")`` reads it.
    """

    new_tokens: tuple[int, ...] = (64,)
    prompt_tokens: tuple[int, ...] | None = None
    warmup_tokens: int = 4
    repeat: Repeat = 1
    ci_target: float = 0.05
    auto_cap: float = 60.0
    chat: bool = False
    max_seconds: float = 600.0
    cache: tuple[Strategy, ...] | None = None
    kv_bits: int | None = None
    compile: bool = False
    steps: bool = False
    threads: int | None = None  # torch's CPU threads for the run; None: torch's own
    batch: tuple[int, ...] = (1,)  # sequences per generate: the prompt's ids in every row
    quality: bool = True  # with cache: each strategy's logits against the full cache's, teacher-forced (untimed)
    quality_text: str | None = None  # with cache: judge quality along this text instead of the greedy tokens
    addons: Mapping[str, Any] = field(default_factory=dict)  # every add-on's fields, by name

    def __post_init__(self) -> None:
        for found in dataclasses.fields(self):
            if found.name != "addons":
                object.__setattr__(self, found.name, check_field(found.name, getattr(self, found.name)))
        object.__setattr__(self, "addons", _addon_fields(self.addons))
        _check_across(self)
        for addon in addons():
            addon.refuse(self)

    @classmethod
    def of(cls, spec: BenchSpec | None = None, **changes: Any) -> BenchSpec:
        """``spec`` (or the defaults) with ``changes``, the centre's fields and any add-on's alike; an unknown name
        is refused, not ignored."""
        unknown = sorted(set(changes) - set(names()))
        if unknown:
            raise KVMagicError(f"unknown benchmark option {unknown[0]!r}: use one of {', '.join(names())}")
        own = {name: value for name, value in changes.items() if name in _CHECKS}
        base = spec or cls()
        added = {**base.addons, **{name: value for name, value in changes.items() if name not in _CHECKS}}
        return dataclasses.replace(base, **own, addons=added)

    def option(self, name: str) -> Any:
        """The value of an add-on's field ``name``."""
        return self.addons[name]

    if not TYPE_CHECKING:  # a notebook's ``spec.limits``: the centre reads an add-on's field with option()

        def __getattr__(self, name: str) -> Any:
            fields = self.__dict__.get("addons", {})
            if name in fields:
                return fields[name]
            raise AttributeError(f"{type(self).__name__!r} has no field {name!r}")

    @property
    def rounds(self) -> int:
        """Timed rounds per configuration the budget counts (``auto`` at the fewest pairs its interval can stop
        at), plus the hooked one of ``steps`` and the teacher-forced one that reads quality."""
        from kvmagic.core.sequential import first_stop

        return (
            (first_stop() if self.repeat == "auto" else self.repeat)
            + (1 if self.steps else 0)
            + (1 if self.judged else 0)
        )

    @property
    def plain(self) -> bool:
        """The cache off against on, side by side: no comparison of strategies (``cache``, or one an add-on's
        fields make)."""
        return self.cache is None and not any(addon.compares(self.addons) for addon in addons())

    @property
    def judged(self) -> bool:
        """Whether each strategy's quality is read: a comparison of strategies, unless told not to."""
        return self.cache is not None and self.quality

    def recorded(self) -> dict[str, Any]:
        """The request as a result's metadata records it (what a comparison with a baseline reads)."""
        record: dict[str, Any] = {"chat": self.chat, "warmup_tokens": self.warmup_tokens, "repeat": self.repeat}
        record["steps"] = self.steps
        if self.repeat == "auto":
            record.update(ci_target=self.ci_target, auto_cap=self.auto_cap)
        if self.cache is not None:
            record["kv_bits"] = self.kv_bits
            record["quality"] = "off" if not self.quality else "text" if self.quality_text else "greedy"
        for addon in addons():
            record.update(addon.recorded(self))
        return record

    def to_dict(self) -> dict[str, Any]:
        """Every field by its name, an add-on's beside the centre's, as a file keeps it."""
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "addons"}
        found = {k: list(v) if isinstance(v, tuple) else v for k, v in {**own, **self.addons}.items()}
        found["cache"] = None if self.cache is None else [str(s) for s in self.cache]
        return found

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchSpec:
        """What :meth:`to_dict` wrote, an add-on's field read as it takes it now (:attr:`Field.saved
        <kvmagic.core.addon.Field.saved>`); a field no longer known (an add-on not installed) is left out."""
        known, saved = set(names()), {f.name: f.saved for addon in addons() for f in addon.fields}
        return cls.of(**{k: saved[k](v) if k in saved else v for k, v in data.items() if k in known})


def names() -> tuple[str, ...]:
    """Every field's name: the centre's, then each add-on's."""
    return (*_CHECKS, *(f.name for addon in addons() for f in addon.fields))


def _addon_fields(given: Mapping[str, Any]) -> dict[str, Any]:
    """Each add-on's fields, checked, those not given at their defaults; a name no add-on has is refused."""
    declared = {f.name: f for addon in addons() for f in addon.fields}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise KVMagicError(f"unknown benchmark option {unknown[0]!r}: use one of {', '.join(names())}")
    return {name: f.check(name, given.get(name, f.default)) for name, f in declared.items()}


def _check_across(spec: BenchSpec) -> None:
    """Refuse options that contradict each other, naming only those given; each message, spelled by a front
    end, fits one line of a 100-column terminal."""
    if spec.cache is None and spec.kv_bits is not None:
        backend = next((name for name, widths in KV_BITS.items() if spec.kv_bits in widths), "quanto")
        raise KVMagicError(f"{{kv_bits}} is the width of a quantized cache: add e.g. {{cache}} off,quantized:{backend}",
                           "kv_bits", "cache")  # fmt: skip
    if spec.cache is None and spec.compile:
        raise KVMagicError("{compile} compiles a static cache: add e.g. {cache} off,static", "compile", "cache")
    if spec.cache is not None and spec.kv_bits is not None:
        _check_bits(spec.cache, spec.kv_bits)
    if spec.cache is not None and spec.compile and not any(s.static and not s.compiled for s in spec.cache):
        raise KVMagicError(
            "{compile} compiles a static cache: add static to {cache} (e.g. off,dynamic,static)", "compile", "cache"
        )
    if spec.cache is not None and spec.repeat == "auto":
        raise KVMagicError(
            "{repeat} auto compares the cache off against on: drop it, or drop {cache}", "repeat", "cache"
        )
    if spec.quality_text is not None and spec.cache is None:
        raise KVMagicError(
            "{quality_text} judges cache strategies: add e.g. {cache} dynamic,quantized:quanto", "quality_text", "cache"
        )
    if spec.quality_text is not None and not spec.quality:
        raise KVMagicError("{quality_text} needs {quality}: drop {quality_text}, or turn {quality} back on",
                           "quality_text", "quality")  # fmt: skip
    if spec.chat and spec.prompt_tokens is not None:
        raise KVMagicError(
            "{prompt_tokens} sets the plain prompt's length; {chat} would wrap it: drop one of them",
            "prompt_tokens",
            "chat",
        )


def _check_bits(strategies: Sequence[Strategy], kv_bits: int) -> None:
    chosen = [s for s in strategies if s.quantized and BACKENDS[s.backend].widths]
    for strategy in chosen:
        allowed = BACKENDS[strategy.backend].widths
        if kv_bits not in allowed:
            raise KVMagicError(
                f"{{kv_bits}} {kv_bits} is not a width {strategy.backend} takes: use one of "
                f"{', '.join(map(str, allowed))}",
                "kv_bits",
            )
    if not chosen:
        takes = [b.name for b in BACKENDS.values() if b.widths]
        raise KVMagicError(f"{{kv_bits}} is the width of a {' or '.join(takes)} cache: add quantized:{takes[0]} to "
                           "{cache}", "kv_bits", "cache")  # fmt: skip


def check_field(name: str, value: Any) -> Any:
    """``value`` as field ``name`` (the centre's or an add-on's) keeps it, or a :class:`KVMagicError` that says what
    it takes."""
    if name in _CHECKS:
        return _CHECKS[name](name, value)
    declared = next(f for addon in addons() for f in addon.fields if f.name == name)
    return declared.check(name, value)


def _lengths(name: str, value: Any) -> tuple[int, ...]:
    if isinstance(value, str):
        return tuple(parse_lengths(value))
    values = list(value) if isinstance(value, (Sequence, range)) else [value]  # one value: checked below
    if not values:
        raise KVMagicError(f"{{{name}}} needs at least one length", name)
    for item in values:
        _count(name, item, 1)
    return tuple(dict.fromkeys(values))


def _count(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise KVMagicError(f"{{{name}}} must be a whole number >= {minimum}, got {value!r}", name)
    return value


def _repeat(name: str, value: Any) -> Repeat:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise KVMagicError(f"{{{name}}} must be a whole number >= 1 or 'auto', got {value!r}", name)
    return value


def _seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or math.isinf(value):
        zero = " (0: no limit)" if name == "max_seconds" else ""
        raise KVMagicError(f"{{{name}}} must be a number of seconds >= 0{zero}, got {value!r}", name)
    return float(value)


def _fraction(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise KVMagicError(f"{{{name}}} must be a fraction between 0 and 1, e.g. 0.05 for ±5%, got {value!r}", name)
    return float(value)


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise KVMagicError(f"{{{name}}} must be True or False, got {value!r}", name)
    return value


def _names(name: str, value: Any) -> tuple[Strategy, ...] | None:
    if value is None:
        return None
    names = parse_list(value)
    if not names:
        raise KVMagicError(f"{{{name}}} needs at least one strategy, e.g. off,dynamic,static", name)
    if set(names) == {REFERENCE}:
        raise KVMagicError(f"{{{name}}} {REFERENCE} alone compares nothing: add a strategy to set against it, "
                           f"e.g. {REFERENCE},dynamic", name)  # fmt: skip
    return names


def _text(name: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise KVMagicError(f"{{{name}}} must be a text to judge quality along, got {value!r}", name)
    return value


def _threads(name: str, value: Any) -> int | None:
    """torch's CPU threads, or None for its own: more than the machine has cores only make them wait on each other."""
    if value is None:
        return None
    cores, threads = os.cpu_count() or 1, _count(name, value, 1)
    if threads > cores:
        raise KVMagicError(f"{{{name}}} {threads} is more than the {cores} cores here: use at most {cores}", name)
    return threads


_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "new_tokens": _lengths,
    "prompt_tokens": lambda name, value: None if value is None else _lengths(name, value),
    "warmup_tokens": lambda name, value: _count(name, value, 0),
    "repeat": _repeat,
    "ci_target": _fraction,
    "auto_cap": _seconds,
    "chat": flag,
    "max_seconds": _seconds,
    "cache": _names,
    "kv_bits": lambda name, value: None if value is None else _count(name, value, 1),  # None: the backend's own width
    "compile": flag,
    "steps": flag,
    "threads": _threads,
    "batch": _lengths,
    "quality": flag,
    "quality_text": _text,
}
