"""Models side by side, with their renderings at hand: one table with a ``model`` column, its notes, each model's
shape, one figure, and the files, as a single model's :class:`~kvmagic.results.result.BenchmarkResult` has them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvmagic.core.shape import ModelShape
from kvmagic.errors import KVMagicError
from kvmagic.results.models_record import ModelsRecord
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.stored import MODELS_FORMAT

if TYPE_CHECKING:
    import pandas as pd

    from kvmagic.results.plot import SweepFigure

__all__ = ["ModelsResult"]

_VERSION = 1


class ModelsResult(ModelsRecord):
    """What ``kvbench -m A,B`` found (:class:`~kvmagic.results.models_record.ModelsRecord`): each model's
    ``BenchmarkResult`` (``result(model)``), shown as one table; kept as JSON, CSV or Markdown."""

    def to_dataframe(self) -> pd.DataFrame:
        from kvmagic.results.models_table import models_table

        return models_table(self)

    def shape_table(self) -> pd.DataFrame:
        """One row per model: layers, sliding windows, heads and KV heads, head size, dtype, KV bytes per token."""
        from kvmagic.results.models_table import shape_table

        return shape_table(self)

    def notes(self) -> list[str]:
        from kvmagic.results.models_table import models_notes

        return models_notes(self)

    def __str__(self) -> str:
        from kvmagic.results.shown import shown_text

        return shown_text(self.to_dataframe(), self.notes())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        from kvmagic.results.display import to_html

        return to_html(self.to_dataframe(), self.setup(), self.notes())

    def plot(self) -> SweepFigure:
        """Time, speed-up and KV cache against the context, one colour per model."""
        from kvmagic.results.models_plot import plot_models

        return plot_models(self)

    def to_dict(self) -> dict[str, Any]:
        """Each model's result as :meth:`BenchmarkResult.to_dict` writes it, with its shape."""
        return {
            "format": MODELS_FORMAT,
            "version": _VERSION,
            "results": [r.to_dict() for r in self.results],
            "shapes": {model: dataclasses.asdict(shape) for model, shape in self.shapes.items()},
            "stopped": self.stopped,
            "left": list(self.left),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelsResult:
        if not isinstance(data, dict) or data.get("format") != MODELS_FORMAT:
            raise KVMagicError("this is not a run of several models: read one model's with BenchmarkResult.read_json")
        if data.get("version", 0) > _VERSION:
            newer = data["version"]
            raise KVMagicError(f"these models were saved by a newer kvmagic (format {newer}): upgrade kvmagic")
        shapes = {model: ModelShape(**{**shape, "windows": tuple(shape["windows"])})
                  for model, shape in data.get("shapes", {}).items()}  # fmt: skip
        results = [BenchmarkResult.from_dict(r) for r in data["results"]]
        return cls(results, shapes, data.get("stopped", ""), list(data.get("left", [])))

    def to_json(self, path: str | Path | None = None) -> str | None:
        from kvmagic.results.serialize import json_text, write_text

        return write_text(json_text(self.to_dict()), path)

    @classmethod
    def from_json(cls, text: str) -> ModelsResult:
        from kvmagic.results.serialize import parse_json

        return cls.from_dict(parse_json(text))

    @classmethod
    def read_json(cls, path: str | Path) -> ModelsResult:
        """Load what ``to_json(path)`` or ``save(path)`` wrote."""
        from kvmagic.results.serialize import read_text

        return cls.from_json(read_text(path))

    def to_csv(self, path: str | Path | None = None) -> str | None:
        """The one table as CSV (no metadata: use to_json to keep everything)."""
        from kvmagic.results.serialize import write_text

        return write_text(self.to_dataframe().to_csv(index=False), path)

    def to_markdown(self, path: str | Path | None = None, *, short: bool = False) -> str | None:
        """The one table as a Markdown pipe table (``short``: the shown columns), followed by the notes."""
        from kvmagic.results.serialize import markdown_table, write_text
        from kvmagic.results.shown import shown_table

        frame = self.to_dataframe()
        table, footnotes = shown_table(frame) if short else (frame, [])
        return write_text(markdown_table(table, [*footnotes, *self.notes()]), path)

    def save(self, path: str | Path) -> None:
        """Write the format the suffix names: .csv, .json or .md."""
        from kvmagic.results.serialize import export_format

        getattr(self, f"to_{export_format(path)}")(path)
