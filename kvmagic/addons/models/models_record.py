"""Models side by side, as data: one request measured on each of several models in turn, a result per model and the
shape its KV cache follows. The model is one more axis of the same rows: each model's rows are its result's, a
(configuration, strategy) each, drawn from the same column registry. It knows no rendering: the one table, its notes,
the shapes and the figure are functions of it (:mod:`~kvmagic.addons.models.models_table`,
:mod:`~kvmagic.addons.models.models_plot`), and :class:`~kvmagic.addons.models.models_result.ModelsResult` adds them
as methods."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvmagic.core.shape import ModelShape
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from kvmagic.results.measurement import Measurement
    from kvmagic.results.result import BenchmarkResult

__all__ = ["ModelsRecord"]


@dataclass(repr=False)
class ModelsRecord:
    """Each model's result, in the order they ran, and the shape each was measured at (by model name).

    ``left`` names the models asked for but not measured, and ``stopped`` why (``interrupted``).
    """

    results: list[BenchmarkResult]
    shapes: dict[str, ModelShape] = field(default_factory=dict)
    stopped: str = ""
    left: list[str] = field(default_factory=list)

    @property
    def models(self) -> list[str]:
        return [r.model for r in self.results]

    @property
    def model(self) -> str:
        """The models, as a title names them."""
        return ", ".join(self.models)

    @property
    def measurements(self) -> list[Measurement]:
        """Every model's measurements, in the order the models ran (``result(model)`` holds one model's)."""
        return [m for r in self.results for m in r.measurements]

    def result(self, model: str) -> BenchmarkResult:
        """``model``'s own result: every measurement, its request and where it ran."""
        found = next((r for r in self.results if r.model == model), None)
        if found is None:
            raise KVMagicError(f"no model {model!r} was measured here: name one of {', '.join(self.models)}")
        return found

    @property
    def identical(self) -> bool:
        return all(r.identical for r in self.results)

    @property
    def partial(self) -> bool:
        """Some model unmeasured, or stopped before its last configuration: the rows here are complete."""
        return bool(self.stopped) or any(r.partial for r in self.results)

    def setup(self) -> dict[str, Any]:
        """How the runs were set up: a setting every model shares once, one that differs as ``{model: value}``."""
        setups = [r.setup() for r in self.results]
        keys = list(dict.fromkeys(key for setup in setups for key in setup))
        found: dict[str, Any] = {}
        for key in keys:
            values = {r.model: setup.get(key) for r, setup in zip(self.results, setups)}
            first = next(iter(values.values()))
            found[key] = first if all(value == first for value in values.values()) else values
        return found

    def __repr__(self) -> str:
        rows = sum(len(r.measurements) for r in self.results)
        partial = "; partial" if self.partial else ""
        return f"<{type(self).__name__} {self.model}: {rows} measurements; identical={self.identical}{partial}>"
