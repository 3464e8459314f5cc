"""A result as files: strict JSON (missing numbers as ``null``), CSV, Markdown; reading and writing them.

Strict, because a bare ``NaN`` is not JSON: a parser that follows the standard rejects it. Numbers
that are missing (an interval too few runs allow, an unmeasured column) are written as ``null``
and read back as NaN by :meth:`kvmagic.results.result.BenchmarkResult.from_dict`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "EXPORTS", "Kept", "export_format", "floats_back", "json_text", "markdown_table", "parse_json", "read_text",
    "seconds_back", "writable", "write_text",
]  # fmt: skip

_Kept = TypeVar("_Kept", bound="Kept")


class Kept:
    """A result kept as files (JSON, CSV, Markdown) through what it says of itself: ``to_dict`` and ``from_dict``,
    its table (``to_dataframe``) and its ``notes``, which each result defines."""

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_dict(cls: type[_Kept], data: dict[str, Any]) -> _Kept:
        raise NotImplementedError

    def to_dataframe(self) -> pd.DataFrame:
        raise NotImplementedError

    def notes(self) -> list[str]:
        raise NotImplementedError

    def to_json(self, path: str | Path | None = None) -> str | None:
        """The whole result as strict JSON (times, ids, request, environment); the text when no ``path`` is given."""
        return write_text(json_text(self.to_dict()), path)

    @classmethod
    def from_json(cls: type[_Kept], text: str) -> _Kept:
        return cls.from_dict(parse_json(text))

    @classmethod
    def read_json(cls: type[_Kept], path: str | Path) -> _Kept:
        """Load what ``to_json(path)`` or ``save(path)`` wrote."""
        return cls.from_json(read_text(path))

    def to_csv(self, path: str | Path | None = None) -> str | None:
        """The table as CSV (no metadata: use to_json to keep everything)."""
        return write_text(self.to_dataframe().to_csv(index=False), path)

    def to_markdown(self, path: str | Path | None = None, *, short: bool = False) -> str | None:
        """The table as a Markdown pipe table, followed by the notes; ``short``: the columns the shown table keeps,
        written as it writes them (for a report), instead of every column."""
        from kvmagic.results.shown import shown_table

        frame = self.to_dataframe()
        table, footnotes = shown_table(frame) if short else (frame, [])
        return write_text(markdown_table(table, [*footnotes, *self.notes()]), path)

    def save(self, path: str | Path) -> None:
        """Write the format the suffix names: .csv, .json, .md, or one an add-on writes (.html)."""
        kind = export_format(path)
        writer = _written().get(kind)
        if writer is not None:
            writer(self, Path(path).expanduser())
        else:
            getattr(self, f"to_{kind}")(path)


EXPORTS = {".csv": "csv", ".json": "json", ".md": "markdown", ".markdown": "markdown"}  # suffix -> format


def _written() -> dict[str, Callable[[Any, Path], None]]:
    """The files the add-ons write, by suffix."""
    from kvmagic.core.addon import addons

    return {suffix: writer for addon in addons() for suffix, writer in addon.exports.items()}


def export_format(path: str | Path) -> str:
    """The format a file name asks for, checked before a long benchmark rather than after it: the suffix of a
    format an add-on writes, or the name of one of :data:`EXPORTS`."""
    suffix = Path(path).suffix.lower()
    if suffix in _written():
        return suffix
    kind = EXPORTS.get(suffix)
    if kind is None:
        named = [".csv", ".json", ".md", *_written()]  # .markdown is .md's longer spelling
        known = f"{', '.join(named[:-1])} or {named[-1]}"
        raise KVMagicError(f"cannot tell a format from the name {str(path)!r}: end it with {known}")
    return kind


def writable(path: str | Path) -> None:
    """Refuse a file that cannot be written before a long benchmark rather than after it: a folder that is
    not there, a name that is a folder, or a folder that takes no file (opening the file to append, which changes
    nothing in one that is there)."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise KVMagicError(
            f"cannot write {str(path)!r}: it is a folder; name a file in it, e.g. {str(target / 'run.json')!r}"
        )
    folder = target.parent
    if not folder.is_dir():
        raise KVMagicError(f"cannot write {str(path)!r}: there is no folder {str(folder)!r}; create it or name another")
    existed = target.exists()
    try:  # a folder may take no file at all (read-only, or a kernel's): only trying tells
        with target.open("a", encoding="utf-8"):
            pass
    except OSError as error:
        raise KVMagicError(
            f"cannot write {str(path)!r}: {error.strerror or error}; name a file in a folder you can write to"
        ) from None
    finally:
        if not existed and target.exists():
            target.unlink()  # only the file the try made: nothing is left behind before the run


def json_text(data: Any) -> str:
    """``data`` as strict JSON: NaN and infinities become ``null``, and nothing else can sneak one in. Text is kept
    as written (a Korean prompt stays readable), unless some of it is no UTF-8 (a lone surrogate a prompt may hold):
    then every character outside ASCII is escaped, which reads back the same."""
    text = json.dumps(_finite(data), indent=1, ensure_ascii=False, default=str, allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(_finite(data), indent=1, ensure_ascii=True, default=str, allow_nan=False)
    return text


def parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise KVMagicError(f"this is not a kvmagic benchmark (not JSON: {error})") from None


def read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise KVMagicError(f"cannot read {str(path)!r}: {error.strerror or error}") from None


def write_text(text: str, path: str | Path | None) -> str | None:
    """Write ``text`` to ``path``; with no path, return it."""
    if path is None:
        return text
    try:
        Path(path).expanduser().write_text(text, encoding="utf-8")
    except OSError as error:
        raise KVMagicError(f"cannot write {str(path)!r}: {error.strerror or error}") from None
    return None


def seconds_back(values: dict[str, Any]) -> dict[str, Any]:
    """Seconds JSON kept as null, back as NaN (a missing id or size stays None)."""
    return {k: math.nan if v is None and k.endswith("_s") else v for k, v in values.items()}


def floats_back(values: Any) -> Any:
    """A list JSON wrote, back as a tuple with NaN for its nulls; anything else as it is."""
    return tuple(math.nan if v is None else v for v in values) if isinstance(values, list) else values


# What would start a block of its own (a quote, a list, a heading) at the head of an item's next line: escaped.
_BLOCK = re.compile(r"^(  (?:\d+)?)([>#*+.)-])(?=\s|$)", re.MULTILINE)


def markdown_table(frame: pd.DataFrame, notes: Sequence[str] = ()) -> str:
    """A DataFrame as a Markdown pipe table (numbers right-aligned), followed by the notes as a list, each item
    wrapped as the notes under a shown table are (a long warning reads in a terminal and renders the same)."""
    from kvmagic.results.shown import wrapped_notes

    lines = [
        "| " + " | ".join(frame.columns) + " |",
        "| " + " | ".join("---:" if frame[c].dtype.kind in "iuf" else "---" for c in frame.columns) + " |",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    items = [_BLOCK.sub(r"\1\\\2", item) for item in wrapped_notes(notes, bullet="- ")]
    return "\n".join(lines) + ("\n\n" + "\n".join(items) if notes else "") + "\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _cell(value: Any) -> str:
    if isinstance(value, float) and not isinstance(value, bool):
        return "" if math.isnan(value) else f"{value:.4g}"
    return str(value)
