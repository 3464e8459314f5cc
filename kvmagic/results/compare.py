"""A run against a saved baseline: did the speed-up move by more than the runs' own noise?

Rows are matched by configuration and strategy. A change counts as significant when a test of the
two runs' per-round speed-ups (each round's reference time over the strategy's) rejects "no change" at
5%, so that with no change it fires one time in twenty at most (see
:func:`kvmagic.core.intervals.significant_change`); a run with one round says nothing about its own
noise, and then the question has no answer (None) rather than a made-up one. Whatever setup
both runs record is compared, and every difference that could change the timed rounds is reported: a
baseline measured on another device or dtype is still shown, but not silently (a setting that adds
only untimed runs, such as ``--plot``'s hooked one, is no difference).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvmagic.core.config import Config
from kvmagic.core.intervals import significant_change
from kvmagic.core.strategy import PAIR, REFERENCE, Strategy
from kvmagic.results.columns import added
from kvmagic.results.measurement import Pair
from kvmagic.results.result import BenchmarkResult

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Comparison", "compare", "row_key"]

# Facts about the run itself rather than about what it measured.
_RUN_ONLY = frozenset({"estimated_s", "configurations", "stopped", "left_out", "fitting_s"})
# Settings that add only untimed runs, after a configuration's timed rounds: the hooked run of ``steps`` (which
# ``--plot`` turns on) and the teacher-forced one that reads ``quality``. The rounds a comparison compares are
# the same with them or without.
_UNTIMED = frozenset({"steps", "quality"})
_NO_DIFFERENCE = _RUN_ONLY | _UNTIMED


@dataclass
class Comparison:
    """``result`` next to ``baseline``: the result's table plus, per row, how its speed-up moved.

    A row is matched with the baseline's of the same configuration and strategy (the plain run's row is its
    ``dynamic`` strategy against ``off``)."""

    result: BenchmarkResult
    baseline: BenchmarkResult

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for values in self.result.to_dataframe().to_dict("records"):
            config, strategy = row_key(values)
            now, was = (_pair(r, config, strategy) for r in (self.result, self.baseline))
            if now is None or was is None:
                values.update(speedup_was=math.nan, speedup_change=math.nan, significant=None)
            else:
                values.update(
                    speedup_was=was.speedup,
                    speedup_change=now.speedup / was.speedup - 1,
                    significant=significant_change(now.rounds, was.rounds),
                )
            rows.append(values)
        return rows

    def saved_rows(self) -> dict[tuple[Config, Strategy], dict[str, Any]]:
        """The baseline's table rows, by configuration and strategy."""
        return {row_key(row): row for row in self.baseline.to_dataframe().to_dict("records")}

    def to_dataframe(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows(), columns=[*self.result.to_dataframe().columns, *added("--compare").pair])

    def differences(self) -> list[str]:
        """How the two runs were set up differently, from the metadata both record."""
        found = []
        if self.result.model != self.baseline.model:
            found.append(f"model: {self.baseline.model!r} saved, {self.result.model!r} now")
        now, was = self.result.setup(), self.baseline.setup()
        for key in sorted((now.keys() & was.keys()) - _NO_DIFFERENCE):
            if now[key] != was[key]:
                if key == "prompt_sha256":
                    found.append("the prompt differs (its SHA-256 does not match)")
                else:
                    found.append(f"{key}: {_show(was[key])} saved, {_show(now[key])} now")
        # A setting one run records as None (kv_bits, unchosen) and the other has no use for is set alike in both.
        unset = {
            k
            for k in self.result.spec.recorded().keys() | self.baseline.spec.recorded().keys()
            if now.get(k) is None and was.get(k) is None
        }
        for key in sorted((was.keys() - now.keys()) - _NO_DIFFERENCE - unset):
            found.append(f"{key}: {_show(was[key])} saved, not recorded now")
        for key in sorted((now.keys() - was.keys()) - _NO_DIFFERENCE - unset):
            found.append(f"{key}: not recorded in the saved run, {_show(now[key])} now")
        return found

    def notes(self) -> list[str]:
        notes = list(self.result.notes())
        notes += [f"differs from the saved run: {d}" for d in self.differences()]
        rows, saved = self.rows(), self.saved_rows()
        # Strategies are named where either run compared them; two plain runs' rows differ only in configuration.
        named = not (self.result.plain and self.baseline.plain)
        held = _held(saved.values())
        unmatched = [_name(key, named) for key in map(row_key, rows) if key not in held]
        if unmatched:
            notes.append(f"no saved row to compare with for {', '.join(dict.fromkeys(unmatched))}")
        measured = _held(rows)
        missing = [_name(key, named) for key in saved if key not in measured]
        if missing:
            notes.append(f"saved rows not measured now: {', '.join(dict.fromkeys(missing))}")
        if self.baseline.partial:
            notes.append("the saved run was interrupted: it has only the rows it finished")
        if any(row["significant"] is None and not math.isnan(row["speedup_was"]) for row in rows):
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

        return to_html(self.to_dataframe(), {"model": self.result.model, **self.result.setup()}, self.notes())


def compare(result: BenchmarkResult, baseline: BenchmarkResult) -> Comparison:
    """``result`` against ``baseline`` (e.g. ``BenchmarkResult.read_json("before.json")``)."""
    return Comparison(result, baseline)


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _pair(result: BenchmarkResult, config: Config, strategy: Strategy) -> Pair | None:
    """``strategy`` against the reference at ``config`` in ``result``; None where either did not run."""
    return None if strategy == REFERENCE else result.pair(config, strategy)


def row_key(row: Mapping[str, Any]) -> tuple[Config, Strategy]:
    """A table row's configuration and strategy (the plain run's row is its cached side's)."""
    return Config.of(row), Strategy.of(row.get("strategy", PAIR[1]))


def _held(rows: Iterable[dict[str, Any]]) -> set[tuple[Config, Strategy]]:
    """What a run's rows measured: each row's strategy, and the reference too where a plain run's row holds it as
    its uncached side (the plain run is ``off,dynamic`` shown as one row)."""
    return {row_key(row) for row in rows} | {(Config.of(row), REFERENCE) for row in rows if "strategy" not in row}


def _name(key: tuple[Config, Strategy], named: bool) -> str:
    """A row as a note names it: ``static at 12+8 tokens``, or its configuration alone where no run compared
    strategies."""
    config, strategy = key
    return f"{strategy} at {config}" if named else str(config)
