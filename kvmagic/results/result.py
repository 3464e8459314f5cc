"""What a benchmark found, with its renderings at hand: the table, the notes, HTML and files, each a function of the
record in its own module (:mod:`~kvmagic.results.report` rows, :mod:`~kvmagic.results.notes`,
:mod:`~kvmagic.results.stored` JSON, :mod:`~kvmagic.results.display` HTML); what an add-on draws or says of it, its
attributes (``result.plot()``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvmagic.results.benchmark_record import BenchmarkRecord
from kvmagic.results.measurement import Measurement, Pair
from kvmagic.results.serialize import Kept

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BenchmarkResult", "Measurement", "Pair"]


class BenchmarkResult(BenchmarkRecord, Kept):
    """What ``%%kvbench`` found (:class:`~kvmagic.results.benchmark_record.BenchmarkRecord`), shown as a table in a
    notebook and a terminal, and kept as JSON, CSV or Markdown. Each method hands the record to the module that
    renders it: pandas and the file formats load only when asked for."""

    def to_dataframe(self) -> pd.DataFrame:
        from kvmagic.results.report import table

        return table(self)

    def notes(self) -> list[str]:
        """Plain-language remarks a reader of the table should not miss."""
        from kvmagic.results.notes import notes

        return notes(self)

    def __str__(self) -> str:
        """The shown table (``to_dataframe()`` has every column) and the notes."""
        from kvmagic.results.shown import shown_text

        return shown_text(self.to_dataframe(), self.notes())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else f"{self!r}\n{self}")  # -o: what it is, then its table

    def _repr_html_(self) -> str:
        from kvmagic.results.display import to_html

        return to_html(self.to_dataframe(), {"model": self.model, **self.setup()}, self.notes(), title=repr(self))

    def to_dict(self) -> dict[str, Any]:
        """Everything measured, the request and the environment: what :meth:`from_dict` reads back."""
        from kvmagic.results.stored import result_to_dict

        return result_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchmarkResult:
        """What :meth:`to_dict` (or ``--save run.json``) wrote, an older kvmagic's files included."""
        from kvmagic.results.stored import result_fields

        return cls(**result_fields(data))
