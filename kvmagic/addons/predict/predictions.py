"""The cost model's prediction beside what was measured (``predict``): what a result keeps, its columns, the rows it
adds for the configurations the budget left unmeasured, and its notes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvmagic.core.config import Config
from kvmagic.results.columns import Column, declare

if TYPE_CHECKING:
    from kvmagic.addons.predict.costmodel import CostModel
    from kvmagic.results.benchmark_record import BenchmarkRecord

__all__ = ["NAME", "PREDICT_PAIR", "Predicted", "Prediction", "predicted", "predicted_rows", "prediction_notes"]

NAME = "predict"  # the request's field, the option's, and the add-on's: its data in a result


@dataclass(frozen=True)
class Prediction:
    """What the cost model expects of one configuration, measured or not (``--predict``)."""

    prompt_tokens: int
    new_tokens: int
    uncached_s: float
    cached_s: float
    kv_bytes: int | None = None  # the cache at its longest, predicted from the config, for the whole batch
    batch: int = 1

    @property
    def config(self) -> Config:
        return Config(self.prompt_tokens, self.new_tokens, self.batch)

    @property
    def speedup(self) -> float:
        return self.uncached_s / self.cached_s if self.cached_s > 0 else math.nan


@dataclass(frozen=True)
class Predicted:
    """What a result keeps of ``--predict``: the typical cost model, its figures for every configuration (those the
    budget left unmeasured included), and the weights' bytes its explanation sets the cache against."""

    cost_model: CostModel | None = None
    predictions: tuple[Prediction, ...] = ()
    weight_bytes: int | None = None


def predicted(result: BenchmarkRecord) -> Predicted:
    """What ``result`` keeps of ``--predict`` (nothing, where it was measured without it)."""
    found: Predicted | None = result.addons.get(NAME)
    return Predicted() if found is None else found


def _predicted(result: BenchmarkRecord, config: Config) -> Prediction | None:
    return next((p for p in predicted(result).predictions if p.config == config), None)


def _of(name: str) -> Any:
    return lambda row: getattr(_predicted(row.record, row.config), name)


PREDICT_PAIR = declare(
    Column[Any]("predicted_uncached_s", "`--predict`: the cost model's seconds per run, cache off", "s",
                      read_pair=_of("uncached_s")),
    Column[Any]("predicted_cached_s", "`--predict`: the cost model's seconds per run, cache on", "s",
                      read_pair=_of("cached_s")),
    Column[Any]("predicted_speedup", "`--predict`: the speed-up the cost model predicts", "times faster",
                      "speedup", read_pair=_of("speedup"), shown=True, after="identical"),
    Column[Any]("measured", "`--predict`: False for a row left unmeasured because measuring it would pass "
                      "`--max-seconds`", read_pair=lambda row: True),
)  # fmt: skip


def predicted_rows(result: BenchmarkRecord, measured: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A row per configuration predicted, in order: the measured row where there is one, else the prediction alone
    (``measured`` False)."""
    by_config = {(row["prompt_tokens"], row["new_tokens"], row["batch"]): row for row in measured}
    rows = []
    for p in predicted(result).predictions:
        found = by_config.get((p.prompt_tokens, p.new_tokens, p.batch))
        if found is None:
            found = {**p.config._asdict(), "predicted_uncached_s": p.uncached_s, "predicted_cached_s": p.cached_s,
                     "predicted_speedup": p.speedup, "measured": False}  # fmt: skip
        rows.append(found)
    return rows


def prediction_notes(result: BenchmarkRecord) -> list[str]:
    """The rows left unmeasured (unless the run stopped early), then the cost model's explanation at the largest
    configuration predicted."""
    kept = predicted(result)
    if not kept.predictions or kept.cost_model is None:
        return []
    found = []
    measured = set(result.configs)
    skipped = [p for p in kept.predictions if p.config not in measured]
    if skipped and not result.partial:
        rows = ", ".join(str(p.config) for p in skipped)
        found.append(
            f"predicted only (measured=False): {rows}; measuring them would pass the {result.spec.max_seconds:g} s "
            "budget (--max-seconds)"
        )
    largest = max(kept.predictions, key=lambda p: p.prompt_tokens + p.new_tokens)
    found += kept.cost_model.explain(
        largest.prompt_tokens, largest.new_tokens, kv_bytes=largest.kv_bytes, weight_bytes=kept.weight_bytes
    )
    return found
