"""What a benchmark found, kept apart from how it was measured and how it is shown."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import KVMagicError

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = [
    "COLUMNS",
    "EXPORTS",
    "BenchmarkResult",
    "Measurement",
    "Mismatch",
    "export_format",
    "first_mismatch",
    "markdown_table",
]

COLUMNS = ("prompt_tokens", "new_tokens", "uncached_s", "cached_s", "speedup", "identical")
EXPORTS = {".csv": "csv", ".json": "json", ".md": "markdown", ".markdown": "markdown"}  # suffix -> format
JSON_FORMAT = "kvmagic-benchmark"
JSON_VERSION = 1


def export_format(path: str | Path) -> str:
    """The format a file name asks for, checked before a long benchmark rather than after it."""
    kind = EXPORTS.get(Path(path).suffix.lower())
    if kind is None:
        raise KVMagicError(f"cannot tell a format from the name {str(path)!r}: end it with .csv, .json or .md")
    return kind


@dataclass(frozen=True)
class Mismatch:
    """Where one run's generated tokens first left the reference run's (the first uncached one)."""

    run: int  # index into Measurement.runs
    position: int  # index among the generated tokens
    expected_id: int
    actual_id: int
    expected_token: str = ""
    actual_token: str = ""

    def describe(self, runs: Sequence[str]) -> str:
        return (
            f"generated tokens differ from position {self.position}: {self.expected_token!r} "
            f"(id {self.expected_id}, first uncached run) vs {self.actual_token!r} "
            f"(id {self.actual_id}, {runs[self.run]} run)"
        )


def first_mismatch(reference: Sequence[int], others: Sequence[Sequence[int]]) -> tuple[int, int] | None:
    """Return ``(which, position)`` of the first token in ``others`` that differs from ``reference``."""
    for which, ids in enumerate(others):
        for position, (want, got) in enumerate(zip(reference, ids)):
            if want != got:
                return which, position
        if len(ids) != len(reference):
            return which, min(len(ids), len(reference))
    return None


@dataclass
class Measurement:
    """One configuration (prompt length, new tokens): every timed run of both conditions.

    ``runs`` names each timed run in the order it ran (``"uncached"``/``"cached"``, interleaved);
    ``seconds`` holds their times.
    """

    prompt_tokens: int
    new_tokens: int
    runs: tuple[str, ...]
    seconds: tuple[float, ...]
    generated_ids: tuple[int, ...]
    generated_text: str
    mismatch: Mismatch | None = None

    def times(self, condition: str) -> list[float]:
        return [s for run, s in zip(self.runs, self.seconds) if run == condition]

    @property
    def uncached_s(self) -> float:
        return statistics.median(self.times("uncached"))

    @property
    def cached_s(self) -> float:
        return statistics.median(self.times("cached"))

    @property
    def speedup(self) -> float:
        """How many times faster the cached run was: a ratio of medians."""
        return self.uncached_s / self.cached_s

    @property
    def identical(self) -> bool:
        return self.mismatch is None

    def row(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "new_tokens": self.new_tokens,
            "uncached_s": self.uncached_s,
            "cached_s": self.cached_s,
            "speedup": self.speedup,
            "identical": self.identical,
        }


@dataclass
class BenchmarkResult:
    """What ``%%kvbench`` found: one :class:`Measurement` per configuration, plus metadata."""

    model: str
    measurements: list[Measurement]
    metadata: dict[str, Any] = field(default_factory=dict)
    partial: bool = False  # a sweep interrupted before its last configuration: the rows here are complete

    def __getattr__(self, name: str) -> Any:
        # A single-configuration result reads like its one measurement: result.speedup.
        if name.startswith("_") or name not in Measurement.__dataclass_fields__ and not hasattr(Measurement, name):
            raise AttributeError(name)
        if len(self.measurements) != 1:
            raise AttributeError(f"{name!r} is per measurement: this result has {len(self.measurements)}; use .measurements")
        return getattr(self.measurements[0], name)

    @property
    def identical(self) -> bool:
        return all(m.identical for m in self.measurements)

    def to_dataframe(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([m.row() for m in self.measurements], columns=list(COLUMNS))

    def notes(self) -> list[str]:
        """Plain-language remarks a reader of the table should not miss."""
        return self._sweep_notes() + [
            f"{m.prompt_tokens}+{m.new_tokens} tokens: {m.mismatch.describe(m.runs)}"
            for m in self.measurements
            if m.mismatch is not None
        ]

    def __str__(self) -> str:
        return "\n".join([self.to_dataframe().to_string(index=False), *self.notes()])

    def __repr__(self) -> str:
        rows = ", ".join(
            f"{m.prompt_tokens}+{m.new_tokens} tokens: {m.speedup:.2f}x" for m in self.measurements
        )
        partial = "; partial" if self.partial else ""
        return f"<BenchmarkResult {self.model}: {rows}; identical={self.identical}{partial}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        from .display import to_html

        return to_html(self.to_dataframe(), {"model": self.model, **self.metadata}, self.notes())

    def _sweep_notes(self) -> list[str]:
        notes = []
        if self.partial:
            planned = self.metadata.get("configurations", "?")
            notes.append(
                f"partial: interrupted after {len(self.measurements)} of {planned} configurations; "
                "the rows shown are complete, the rest were not measured"
            )
        natural = self.metadata.get("natural_prompt_tokens")
        if self.metadata.get("prompt_stretched") and natural:
            lengths = ", ".join(str(n) for n in dict.fromkeys(m.prompt_tokens for m in self.measurements))
            notes.append(f"prompt stretched: the cell's {natural} tokens repeated (or cut) to {lengths} tokens")
        return notes

    def plot(self) -> Figure:
        """Time and speed-up against length, and per-step latency when measured; ``.savefig(path)`` saves it."""
        from .plot import plot_result

        return plot_result(self)

    def to_dict(self) -> dict[str, Any]:
        """Everything measured, plus the metadata: what :meth:`from_dict` reads back."""
        return {
            "format": JSON_FORMAT,
            "version": JSON_VERSION,
            "model": self.model,
            "partial": self.partial,
            "metadata": self.metadata,
            "measurements": [dataclasses.asdict(m) for m in self.measurements],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchmarkResult:
        if not isinstance(data, dict) or data.get("format") != JSON_FORMAT:
            raise KVMagicError("this is not a kvmagic benchmark: save one with `%%kvbench --save NAME.json`")
        if data.get("version", 0) > JSON_VERSION:
            raise KVMagicError(f"this benchmark was saved by a newer kvmagic (format {data['version']}): upgrade kvmagic")
        return cls(
            model=data["model"],
            measurements=[_measurement_from_dict(m) for m in data["measurements"]],
            metadata=dict(data.get("metadata", {})),
            partial=bool(data.get("partial", False)),
        )

    def to_json(self, path: str | Path | None = None) -> str | None:
        """The whole result as JSON (times, ids, metadata); returns the text when no ``path`` is given."""
        text = json.dumps(self.to_dict(), indent=1, ensure_ascii=False, default=str)
        return _write(text, path)

    @classmethod
    def from_json(cls, text: str) -> BenchmarkResult:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise KVMagicError(f"this is not a kvmagic benchmark (not JSON: {error})") from None
        return cls.from_dict(data)

    @classmethod
    def read_json(cls, path: str | Path) -> BenchmarkResult:
        """Load what ``to_json(path)`` or ``%%kvbench --save NAME.json`` wrote."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise KVMagicError(f"cannot read {str(path)!r}: {error.strerror or error}") from None
        return cls.from_json(text)

    def to_csv(self, path: str | Path | None = None) -> str | None:
        """The table as CSV (no metadata: use to_json to keep everything)."""
        return _write(self.to_dataframe().to_csv(index=False), path)

    def to_markdown(self, path: str | Path | None = None) -> str | None:
        """The table as a Markdown pipe table, followed by the notes."""
        return _write(markdown_table(self.to_dataframe(), self.notes()), path)

    def save(self, path: str | Path) -> None:
        """Write the format the suffix names: .csv, .json or .md."""
        kind = export_format(path)
        getattr(self, f"to_{kind}")(path)


def markdown_table(frame: pd.DataFrame, notes: Sequence[str] = ()) -> str:
    """A DataFrame as a Markdown pipe table (numbers right-aligned), followed by the notes as a list."""
    lines = [
        "| " + " | ".join(frame.columns) + " |",
        "| " + " | ".join("---:" if frame[c].dtype.kind in "iuf" else "---" for c in frame.columns) + " |",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines) + ("\n\n" + "\n".join(f"- {n}" for n in notes) if notes else "") + "\n"


def _measurement_from_dict(data: dict[str, Any]) -> Measurement:
    names = {f.name for f in dataclasses.fields(Measurement)}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in names}
    if values.get("mismatch") is not None:
        values["mismatch"] = Mismatch(**values["mismatch"])
    try:
        return Measurement(**values)
    except TypeError as error:
        raise KVMagicError(f"this kvmagic benchmark is incomplete: {error}") from None


def _cell(value: Any) -> str:
    if isinstance(value, float) and not isinstance(value, bool):
        return "" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def _write(text: str, path: str | Path | None) -> str | None:
    if path is None:
        return text
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as error:
        raise KVMagicError(f"cannot write {str(path)!r}: {error.strerror or error}") from None
    return None
