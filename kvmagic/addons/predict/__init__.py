"""``--predict``: a cost model probed before the first timed run, its predicted times and speed-up beside the
measured ones, with an explanation; the rows too costly for ``--max-seconds`` are predicted only.

:mod:`~kvmagic.addons.predict.costmodel` holds the cost model's arithmetic, :mod:`~kvmagic.addons.predict.budget`
which rows it puts within the budget, :mod:`~kvmagic.addons.predict.costmodel_probe` the probes,
:mod:`~kvmagic.addons.predict.predict_run` what the run does with them, and
:mod:`~kvmagic.addons.predict.predictions` what a result keeps and shows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from kvmagic.addons.predict.costmodel import CostModel
from kvmagic.addons.predict.predictions import (
    NAME,
    PREDICT_PAIR,
    Predicted,
    Prediction,
    predicted,
    predicted_rows,
    prediction_notes,
)
from kvmagic.core.addon import AddOn, Field
from kvmagic.core.spec import flag
from kvmagic.errors import KVMagicError
from kvmagic.frontends.option import Option
from kvmagic.results.serialize import seconds_back

if TYPE_CHECKING:
    from kvmagic.addons.predict.costmodel import Probes
    from kvmagic.core.config import Config
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement
    from kvmagic.runner.plan import Plan

__all__ = ["ADDON"]

_WEIGHTS = "weight_bytes"  # the run's facts keep the weights' bytes: a file keeps them there


class _Predict(AddOn):
    name = NAME
    fields = (Field(NAME, False, flag),)
    options = (
        Option(("--predict",), "Probe a cost model first (one forward without cache and one cached step at a few "
               "lengths) and add its predicted times and speed-up beside the measured ones, with an explanation; "
               "rows too costly for --max-seconds are predicted only (measured=False).", NAME, action="store_true",
               examples=("",), purpose="scale"),
    )  # fmt: skip
    pair_columns = PREDICT_PAIR
    attributes: ClassVar[Mapping[str, Callable[[Any], Any]]] = {
        "predictions": lambda record: list(predicted(record).predictions),
        "cost_model": lambda record: predicted(record).cost_model,
        _WEIGHTS: lambda record: predicted(record).weight_bytes,
    }

    def used(self, spec: BenchSpec) -> bool:
        return bool(spec.option(NAME))

    def refuse(self, spec: BenchSpec) -> None:
        if spec.option(NAME) and spec.cache is not None:
            raise KVMagicError(
                "{predict} compares the cache off against on: drop it, or drop {cache}", "predict", "cache"
            )

    def recorded(self, spec: BenchSpec) -> dict[str, Any]:
        """Its rows past the budget are predicted, not measured: the budget decides which rows a baseline has."""
        return {"max_seconds": spec.max_seconds} if spec.option(NAME) else {}

    def before(self, plan: Plan) -> Probes:
        """The cost model's probes, before any run (the deadline holds the run from after them)."""
        from kvmagic.addons.predict.predict_run import probed

        return probed(plan)

    def todo(self, plan: Plan, todo: list[Config], before: Probes) -> list[Config]:
        from kvmagic.addons.predict.predict_run import within_budget

        return within_budget(plan, todo, before)

    def after(self, plan: Plan, measurements: list[Measurement], before: Probes) -> Predicted:
        """Every configuration's prediction, measured or not."""
        from kvmagic.addons.predict.predict_run import predicted_run

        return predicted_run(plan, before)

    def shows(self, record: BenchmarkRecord) -> bool:
        return bool(predicted(record).predictions)

    def pair_rows(self, record: BenchmarkRecord, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return predicted_rows(record, rows)

    def notes(self, record: BenchmarkRecord) -> list[str]:
        return prediction_notes(record)

    def facts(self, data: Predicted) -> dict[str, Any]:
        return {} if data.weight_bytes is None else {_WEIGHTS: data.weight_bytes}

    def dump(self, data: Predicted | None) -> dict[str, Any]:
        """The predictions and the cost model as the file's own fields, the weights' bytes among the run's facts."""
        kept = data or Predicted()
        cost = None if kept.cost_model is None else kept.cost_model.to_dict()
        predictions = [dataclasses.asdict(p) for p in kept.predictions]
        return {"predictions": predictions, "cost_model": cost, "facts": {_WEIGHTS: kept.weight_bytes}}

    def load(self, saved: Mapping[str, Any]) -> Predicted | None:
        predictions = tuple(Prediction(**seconds_back(p)) for p in saved.get("predictions", []))
        cost = None if saved.get("cost_model") is None else CostModel.from_dict(saved["cost_model"])
        weights = (saved.get("facts") or {}).get(_WEIGHTS)
        return None if not predictions and cost is None and weights is None else Predicted(cost, predictions, weights)

    def upgrade(self, saved: Mapping[str, Any]) -> Mapping[str, Any]:
        """Formats 1 and 2 kept the weights' bytes in the metadata, with the run's other facts."""
        metadata = dict(saved.get("metadata", {}))
        if _WEIGHTS not in metadata:
            return saved
        facts = {**saved.get("facts", {}), _WEIGHTS: metadata.pop(_WEIGHTS)}
        return {**saved, "metadata": metadata, "facts": facts}


ADDON = _Predict()
