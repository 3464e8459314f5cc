"""Models side by side, with their renderings at hand: one table with a ``model`` column, its notes, each model's
shape, one figure, and the files, as a single model's :class:`~kvmagic.results.result.BenchmarkResult` has them.

Whatever else a single model's result answers (its ``choice()``, a strategy's ``pair()``, its ``limits``) is that
model's: asked of the models together, it is refused in one line that names where to ask it, rather than missing.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import TYPE_CHECKING, Any

from kvmagic.addons.models.models_record import ModelsRecord
from kvmagic.core.addon import addons
from kvmagic.core.shape import ModelShape
from kvmagic.errors import KVMagicError
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.serialize import Kept

if TYPE_CHECKING:
    import pandas as pd

    from kvmagic.addons.plot.sweep_plot import SweepFigure

__all__ = ["FORMAT", "ModelsResult", "OneModels"]

FORMAT = "kvmagic-models"  # what its files say they are: one result per model
_VERSION = 1


class OneModels(KVMagicError, AttributeError):
    """What one model's result answers, asked of several models' together: a mistake that says where to ask it, and
    still an attribute they lack (``hasattr`` is false)."""


@functools.cache
def _one_model_names() -> frozenset[str]:
    """The names a single model's result answers: its fields and methods, and what each add-on says of its data."""
    own = {f.name for f in dataclasses.fields(BenchmarkResult)} | set(dir(BenchmarkResult))
    return frozenset(name for name in own | {n for a in addons() for n in a.attributes} if not name.startswith("_"))


class ModelsResult(ModelsRecord, Kept):
    """What ``kvbench -m A,B`` found (:class:`~kvmagic.addons.models.models_record.ModelsRecord`): each model's
    ``BenchmarkResult`` (``result(model)``), shown as one table; kept as JSON, CSV or Markdown."""

    if not TYPE_CHECKING:  # one model's own attribute, refused in one line (mypy sees the attributes there are)

        def __getattr__(self, name: str) -> Any:
            if name.startswith("_") or name not in _one_model_names():
                raise AttributeError(f"{type(self).__name__!r} has no attribute {name!r}")
            answered = getattr(self.results[0], name, None) if self.results else None  # an add-on's may be a method
            own = inspect.getattr_static(BenchmarkResult, name, None)
            called = "()" if callable(own) or (own is None and callable(answered)) else ""
            first = repr(self.results[0].model) if self.results else "MODEL"
            raise OneModels(f"{name}{called} is one model's: name that model's result, e.g. "
                            f"models.result({first}).{name}{called} (models.models lists them)")  # fmt: skip

    def to_dataframe(self) -> pd.DataFrame:
        from kvmagic.addons.models.models_table import models_table

        return models_table(self)

    def shape_table(self) -> pd.DataFrame:
        """One row per model: layers, sliding windows, heads and KV heads, head size, dtype, KV bytes per token."""
        from kvmagic.addons.models.models_table import shape_table

        return shape_table(self)

    def notes(self) -> list[str]:
        from kvmagic.addons.models.models_table import models_notes

        return models_notes(self)

    def __str__(self) -> str:
        from kvmagic.results.shown import shown_text

        return shown_text(self.to_dataframe(), self.notes())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else f"{self!r}\n{self}")  # -o: what it is, then its table

    def _repr_html_(self) -> str:
        from kvmagic.results.display import to_html

        return to_html(self.to_dataframe(), self.setup(), self.notes(), title=repr(self))

    def plot(self) -> SweepFigure:
        """Time, speed-up and KV cache against the context, one colour per model."""
        from kvmagic.addons.models.models_plot import plot_models

        return plot_models(self)

    def to_dict(self) -> dict[str, Any]:
        """Each model's result as :meth:`BenchmarkResult.to_dict` writes it, with its shape."""
        return {
            "format": FORMAT,
            "version": _VERSION,
            "results": [r.to_dict() for r in self.results],
            "shapes": {model: dataclasses.asdict(shape) for model, shape in self.shapes.items()},
            "stopped": self.stopped,
            "left": list(self.left),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelsResult:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise KVMagicError("this is not a run of several models: read one model's with BenchmarkResult.read_json")
        if data.get("version", 0) > _VERSION:
            newer = data["version"]
            raise KVMagicError(f"these models were saved by a newer kvmagic (format {newer}): upgrade kvmagic")
        shapes = {model: ModelShape(**{**shape, "windows": tuple(shape["windows"])})
                  for model, shape in data.get("shapes", {}).items()}  # fmt: skip
        results = [BenchmarkResult.from_dict(r) for r in data["results"]]
        return cls(results, shapes, data.get("stopped", ""), list(data.get("left", [])))
