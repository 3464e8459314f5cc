"""What a benchmark found, with its renderings at hand: the table, the notes, HTML, figures and files, each a
function of the record in its own module (:mod:`~kvmagic.results.report` rows, :mod:`~kvmagic.results.notes`,
:mod:`~kvmagic.results.stored` JSON, :mod:`~kvmagic.results.display` HTML, :mod:`~kvmagic.results.plot`
figures)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvmagic.results.benchmark_record import BenchmarkRecord
from kvmagic.results.measurement import Measurement, Pair

if TYPE_CHECKING:
    import pandas as pd

    from kvmagic.results.choice import Choice
    from kvmagic.results.plot import SweepFigure

__all__ = ["BenchmarkResult", "Measurement", "Pair"]


class BenchmarkResult(BenchmarkRecord):
    """What ``%%kvbench`` found (:class:`~kvmagic.results.benchmark_record.BenchmarkRecord`), shown as a table in a
    notebook and a terminal, and kept as JSON, CSV or Markdown. Each method hands the record to the module that
    renders it: pandas, matplotlib and the file formats load only when asked for."""

    def to_dataframe(self) -> pd.DataFrame:
        from kvmagic.results.report import table

        return table(self)

    def notes(self) -> list[str]:
        """Plain-language remarks a reader of the table should not miss."""
        from kvmagic.results.notes import notes

        return notes(self)

    def choice(self) -> Choice:
        """Which strategy to choose at the largest configuration of a comparison of three strategies or more: the
        trade-off frontier, the crossovers along the sweep with their checks, the reach in memory; ``str()`` of it
        is the paragraph the notes end with."""
        from kvmagic.results.choice import choice

        return choice(self)

    def __str__(self) -> str:
        """The shown table (``to_dataframe()`` has every column) and the notes."""
        from kvmagic.results.shown import shown_text

        return shown_text(self.to_dataframe(), self.notes())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        from kvmagic.results.display import to_html

        return to_html(self.to_dataframe(), {"model": self.model, **self.setup()}, self.notes())

    def plot(self) -> SweepFigure:
        """Time and speed-up against length, and per-step latency when measured, and quality's cost where it
        was read: a matplotlib ``Figure`` that a notebook shows inline; ``.savefig(path)`` saves it."""
        from kvmagic.results.plot import plot_result

        return plot_result(self)

    def to_dict(self) -> dict[str, Any]:
        """Everything measured, the request and the environment: what :meth:`from_dict` reads back."""
        from kvmagic.results.stored import result_to_dict

        return result_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchmarkResult:
        """What :meth:`to_dict` (or ``--save run.json``) wrote, an older kvmagic's files included."""
        from kvmagic.results.stored import result_fields

        return cls(**result_fields(data))

    def to_json(self, path: str | Path | None = None) -> str | None:
        """The whole result as strict JSON (times, ids, request, environment); the text when no ``path`` is given."""
        from kvmagic.results.serialize import json_text, write_text

        return write_text(json_text(self.to_dict()), path)

    @classmethod
    def from_json(cls, text: str) -> BenchmarkResult:
        from kvmagic.results.serialize import parse_json

        return cls.from_dict(parse_json(text))

    @classmethod
    def read_json(cls, path: str | Path) -> BenchmarkResult:
        """Load what ``to_json(path)`` or ``save(path)`` wrote."""
        from kvmagic.results.serialize import read_text

        return cls.from_json(read_text(path))

    def to_csv(self, path: str | Path | None = None) -> str | None:
        """The table as CSV (no metadata: use to_json to keep everything)."""
        from kvmagic.results.serialize import write_text

        return write_text(self.to_dataframe().to_csv(index=False), path)

    def to_markdown(self, path: str | Path | None = None, *, short: bool = False) -> str | None:
        """The table as a Markdown pipe table, followed by the notes; ``short``: the columns the shown table keeps,
        written as it writes them (for a report), instead of every column."""
        from kvmagic.results.serialize import markdown_table, write_text
        from kvmagic.results.shown import shown_table

        frame = self.to_dataframe()
        table, footnotes = shown_table(frame) if short else (frame, [])
        return write_text(markdown_table(table, [*footnotes, *self.notes()]), path)

    def save(self, path: str | Path) -> None:
        """Write the format the suffix names: .csv, .json or .md."""
        from kvmagic.results.serialize import export_format

        getattr(self, f"to_{export_format(path)}")(path)
