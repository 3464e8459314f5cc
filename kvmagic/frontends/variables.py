"""``%%kvbench -v NAME``: a name Python can assign, and nothing replaced unseen.

A name that is not an identifier, or is a keyword, is refused before the benchmark runs. A name that
already holds something other than an earlier result, or that is a builtin, is still assigned, with a
one-line note saying what it replaced: ``-v`` is an assignment, Python lets a notebook rebind any name,
and refusing would either throw away a finished run or turn a cell that worked once into an error on
its second run; the note is what keeps the replacement from being silent.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import MutableMapping
from typing import Any

from kvmagic.errors import KVMagicError

__all__ = ["check_name", "store"]

_NOTHING = object()


def _suggest(name: str) -> str:
    candidate = re.sub(r"\W+", "_", name).strip("_") or "result"
    return f"result_{candidate}" if candidate[0].isdigit() else candidate


def check_name(name: str | None) -> None:
    """Refuse a name no assignment could bind, before anything is measured."""
    if name is None or (name.isidentifier() and not keyword.iskeyword(name)):
        return
    if keyword.iskeyword(name):
        why, instead = "is a keyword: pick another name", f"{name}_"
    else:
        why, instead = "is not one: use letters, digits and underscores, not starting with a digit", _suggest(name)
    raise KVMagicError(f"{{var}} must name a Python variable, and {name!r} {why} (e.g. {{var}} {instead})", "var")


def store(namespace: MutableMapping[str, Any], name: str, value: Any) -> str | None:
    """Bind ``name`` to ``value``; return the note to show when that replaced or hid something."""
    from kvmagic.results.result import BenchmarkResult

    held = namespace.get(name, _NOTHING)
    namespace[name] = value
    kind = type(value).__name__
    if held is _NOTHING:
        if hasattr(builtins, name):
            return f"-v {name}: {name} now holds the {kind} and hides the builtin {name} (`del {name}` brings it back)"
        return None
    if isinstance(held, BenchmarkResult):
        return None
    return f"-v {name}: replaced the {type(held).__name__} that {name} held with the {kind}"
