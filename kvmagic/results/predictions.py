"""The cost model's prediction beside what was measured (``predict``): its columns, and the rows it adds for the
configurations the budget left unmeasured."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvmagic.results.columns import Column, declare

if TYPE_CHECKING:
    from kvmagic.core.config import Config
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.records import Prediction

__all__ = ["PREDICT_PAIR", "predicted_rows"]


def _predicted(result: BenchmarkRecord, config: Config) -> Prediction | None:
    return next((p for p in result.predictions if p.config == config), None)


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
    for p in result.predictions:
        found = by_config.get((p.prompt_tokens, p.new_tokens, p.batch))
        if found is None:
            found = {**p.config._asdict(), "predicted_uncached_s": p.uncached_s, "predicted_cached_s": p.cached_s,
                     "predicted_speedup": p.speedup, "measured": False}  # fmt: skip
        rows.append(found)
    return rows
