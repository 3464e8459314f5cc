"""The run ``--replay FILE`` reruns, read back: a result saved as JSON (of any format kvmagic still reads), or a
report page that embeds its record; each refusal names the file and says what to give instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvmagic.core.strategy import parse
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from kvmagic.results.result import BenchmarkResult

__all__ = ["read_saved", "unreadable"]

_PAGES = (".html", ".htm")


def read_saved(path: str) -> tuple[BenchmarkResult, dict[str, str]]:
    """The saved run, and the strategies it names that this kvmagic cannot even read (each with why), left out of it."""
    from kvmagic.results.result import BenchmarkResult

    shown = repr(path)
    if Path(path).expanduser().is_dir():
        raise KVMagicError(f"{{replay}} {shown} is a folder: give a run saved with {{save}}.json", "replay", "save")
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, ValueError) as error:  # ValueError: a NUL in the path
        reason = error.strerror if isinstance(error, OSError) and error.strerror else "not text"
        raise KVMagicError(f"{{replay}} cannot read {shown}: {reason}: give a run saved with {{save}}.json", "replay",
                           "save") from None  # fmt: skip
    data = _recorded(text, path) if Path(path).suffix.lower() in _PAGES else _json(text, path)
    data, unread = unreadable(data)
    saved = BenchmarkResult.from_dict(data)  # what is not a run of one model is refused, saying what reads it
    if not saved.measurements:
        raise KVMagicError(f"{{replay}} {shown} holds no measured rows to compare with: replay a finished run",
                           "replay")  # fmt: skip
    return saved, unread


def _json(text: str, path: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError:
        raise KVMagicError(f"{{replay}} {path!r} is not JSON: give a run saved with {{save}}.json", "replay",
                           "save") from None  # fmt: skip
    if not isinstance(data, dict):
        raise KVMagicError(f"{{replay}} {path!r} is not a kvmagic run: give one saved with {{save}}.json", "replay",
                           "save")  # fmt: skip
    return data


def _recorded(page: str, path: str) -> dict[str, Any]:
    """The record a report page embeds (:func:`~kvmagic.addons.html_report.page.recorded`)."""
    from kvmagic.addons.html_report.page import recorded

    try:
        return recorded(page)
    except (KVMagicError, ValueError):
        raise KVMagicError(f"{{replay}} {path!r} is a page that holds no kvmagic run: replay the run's JSON "
                           "(saved with {save}.json)", "replay", "save") from None  # fmt: skip


def unreadable(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``data`` less the strategies whose names this kvmagic cannot read (a name edited into the file, one an older
    kvmagic had), each with why: they cannot run here, and the rest of the file still reads."""
    found = data.get("spec")
    spec: dict[str, Any] = found if isinstance(found, dict) else {}
    named = [*(spec.get("cache") or []), *(data.get("strategies") or [])]
    unread = {}
    for name in dict.fromkeys(n for n in named if isinstance(n, str)):
        try:
            parse(name)
        except KVMagicError:
            unread[name] = "unknown to this kvmagic"
    if not unread:
        return data, {}
    kept = {**data, "spec": {**spec, "cache": [n for n in spec.get("cache") or [] if n not in unread] or None}}
    kept["strategies"] = [n for n in data.get("strategies") or [] if n not in unread]
    kept["measurements"] = [m for m in data.get("measurements", []) if m.get("strategy") not in unread]
    for key in ("skipped", "remarks"):
        kept[key] = {k: v for k, v in (data.get(key) or {}).items() if k not in unread}
    return kept, unread
