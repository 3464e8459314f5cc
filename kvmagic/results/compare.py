"""A run against a saved baseline: did the speed-up move by more than the runs' own noise?

Rows are matched by (prompt_tokens, new_tokens, batch). A change counts as significant when a test of the
two runs' per-round speed-ups (each interleaved uncached/cached pair divided) rejects "no change" at
5%, so that with no change it fires one time in twenty at most (see
:func:`kvmagic.core.intervals.significant_change`); a run with one round says nothing about its own
noise, and then the question has no answer (None) rather than a made-up one. Whatever metadata
both runs record is compared, and every difference is reported: a baseline measured on another
device or dtype is still shown, but not silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvmagic.core.intervals import significant_change
from kvmagic.core.spec import CACHED, UNCACHED
from kvmagic.results.report import COLUMNS, row
from kvmagic.results.result import BenchmarkResult, Measurement

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COMPARE_COLUMNS", "Comparison", "compare"]

COMPARE_COLUMNS = ("speedup_was", "speedup_change", "significant")
# Facts about the run itself rather than about the conditions it measured.
_RUN_ONLY = frozenset({"estimated_s", "configurations", "stopped"})


def _significant(now: Measurement, was: Measurement) -> bool | None:
    now_pairs, was_pairs = (list(zip(m.times(UNCACHED), m.times(CACHED))) for m in (now, was))
    return significant_change(now_pairs, was_pairs)


@dataclass
class Comparison:
    """``result`` next to ``baseline``: the result's table plus, per row, how its speed-up moved."""

    result: BenchmarkResult
    baseline: BenchmarkResult

    def _pairs(self) -> list[tuple[Measurement, Measurement | None]]:
        saved = {(m.prompt_tokens, m.new_tokens, m.batch): m for m in self.baseline.measurements}
        return [(m, saved.get((m.prompt_tokens, m.new_tokens, m.batch))) for m in self.result.measurements]

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for now, was in self._pairs():
            values = row(now)
            if was is None:
                values.update(speedup_was=math.nan, speedup_change=math.nan, significant=None)
            else:
                values.update(
                    speedup_was=was.speedup,
                    speedup_change=now.speedup / was.speedup - 1,
                    significant=_significant(now, was),
                )
            rows.append(values)
        return rows

    def to_dataframe(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows(), columns=[*COLUMNS, *COMPARE_COLUMNS])

    def differences(self) -> list[str]:
        """How the two runs were set up differently, from the metadata both record."""
        found = []
        if self.result.model != self.baseline.model:
            found.append(f"model: {self.baseline.model!r} saved, {self.result.model!r} now")
        now, was = self.result.metadata, self.baseline.metadata
        for key in sorted((now.keys() & was.keys()) - _RUN_ONLY):
            if now[key] != was[key]:
                if key == "prompt_sha256":
                    found.append("the prompt differs (its SHA-256 does not match)")
                else:
                    found.append(f"{key}: {_show(was[key])} saved, {_show(now[key])} now")
        for key in sorted((was.keys() - now.keys()) - _RUN_ONLY):
            found.append(f"{key}: {_show(was[key])} saved, not recorded now")
        for key in sorted((now.keys() - was.keys()) - _RUN_ONLY):
            found.append(f"{key}: not recorded in the saved run, {_show(now[key])} now")
        return found

    def notes(self) -> list[str]:
        notes = list(self.result.notes())
        notes += [f"differs from the saved run: {d}" for d in self.differences()]
        pairs = self._pairs()
        unmatched = [f"{m.prompt_tokens}+{m.new_tokens}" for m, was in pairs if was is None]
        if unmatched:
            notes.append(f"no saved row to compare with for {', '.join(unmatched)} tokens (prompt+new)")
        measured = {(m.prompt_tokens, m.new_tokens, m.batch) for m in self.result.measurements}
        missing = [f"{m.prompt_tokens}+{m.new_tokens}" for m in self.baseline.measurements
                   if (m.prompt_tokens, m.new_tokens, m.batch) not in measured]  # fmt: skip
        if missing:
            notes.append(f"saved rows not measured now: {', '.join(missing)} tokens (prompt+new)")
        if self.baseline.partial:
            notes.append("the saved run was interrupted: it has only the rows it finished")
        if any(was is not None and _significant(now, was) is None for now, was in pairs):
            notes.append(
                "significant is empty where a run timed a single round: with -r 2 or more in both runs, a change "
                "counts when a test of the runs' per-round speed-ups finds one at 5% (false alarms: 1 in 20 at most)"
            )
        return notes

    def __str__(self) -> str:
        from kvmagic.results.shown import shown_text

        return shown_text(self.to_dataframe(), self.notes())

    def __repr__(self) -> str:
        return f"<Comparison of {self.result!r} with {self.baseline!r}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        from kvmagic.results.display import to_html

        return to_html(self.to_dataframe(), {"model": self.result.model, **self.result.metadata}, self.notes())


def compare(result: BenchmarkResult, baseline: BenchmarkResult) -> Comparison:
    """``result`` against ``baseline`` (e.g. ``BenchmarkResult.read_json("before.json")``)."""
    return Comparison(result, baseline)


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)
