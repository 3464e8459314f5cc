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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvmagic.core.config import Config
from kvmagic.core.intervals import significant_change
from kvmagic.core.strategy import PAIR, REFERENCE, Strategy
from kvmagic.errors import KVMagicError
from kvmagic.results.columns import Column, declare, moved, names
from kvmagic.results.measurement import Pair
from kvmagic.results.result import BenchmarkResult

if TYPE_CHECKING:
    import pandas as pd

    from kvmagic.results.serialize import Kept

__all__ = ["COMPARED", "Comparison", "Judged", "compare", "row_key", "verdict"]

# Facts about the run itself rather than about what it measured.
_RUN_ONLY = frozenset({"estimated_s", "configurations", "stopped", "left_out", "fitting_s"})
# Settings that add only untimed runs, after a configuration's timed rounds: the hooked run of ``steps`` (which
# ``--plot`` turns on) and the teacher-forced one that reads ``quality``. The rounds a comparison compares are
# the same with them or without.
_UNTIMED = frozenset({"steps", "quality"})
_NO_DIFFERENCE = _RUN_ONLY | _UNTIMED
# What a comparison adds to either table, per row matched by configuration and strategy (filled by Comparison.rows).
COMPARED = declare(
    Column[Any]("speedup_was", "`--compare`: the baseline's speed-up for the same configuration and strategy; the "
                "shown table writes it, the new one and the change in one cell, `speedup saved -> now`: `3.18 -> "
                "2.67 (-16%)`", "times faster", "speedup"),
    Column[Any]("speedup_change", "`--compare`: `speedup / speedup_was - 1` (0.25: the speed-up grew by a quarter); "
                "shown in whole per cent in the `speedup saved -> now` cell", "change", "change"),
    Column[Any]("significant", "`--compare`: a test of the two runs' per-round speed-ups finds a change at 5% "
                "(docs/statistics.md); empty when either run timed one round", shown=True, after="speedup"),
)  # fmt: skip


@dataclass
class Comparison:
    """``result`` next to ``baseline``: the result's table plus, per row, how its speed-up moved.

    A row is matched with the baseline's of the same configuration and strategy (the plain run's row is its
    ``dynamic`` strategy against ``off``)."""

    result: BenchmarkResult
    baseline: BenchmarkResult
    name: str = "the saved run"  # the baseline as the verdict names it: the file it was read from, where there is one

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

        return pd.DataFrame(self.rows(), columns=[*self.result.to_dataframe().columns, *names(COMPARED)])

    def to_dict(self) -> dict[str, Any]:
        """The result's record, still loadable as a baseline, with the comparison riding along (``comparison``: its
        rows and notes), as the command's ``--format json`` writes it."""
        return {**self.result.to_dict(), "comparison": {"rows": self.rows(), "notes": self.notes()}}

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

    def verdict(self) -> str:
        """One line: against which baseline and how many rounds a side, which rows' speed-ups moved beyond the runs'
        noise and how, and how many did not or cannot be told (:func:`verdict`)."""
        return verdict(self.name, self._judged())

    def _judged(self) -> list[Judged]:
        """Each row the baseline also measured, with both sides' speed-ups, rounds and the test's answer."""
        judged = []
        named = not (self.result.plain and self.baseline.plain)
        for row in self.rows():
            config, strategy = row_key(row)
            now, was = (_pair(r, config, strategy) for r in (self.result, self.baseline))
            if now is not None and was is not None:
                where = _name((config, strategy), named)
                judged.append(Judged(where, was.speedup, now.speedup, len(was.rounds), len(now.rounds),
                                     row["significant"]))  # fmt: skip
        return judged

    def notes(self) -> list[str]:
        notes = [self.verdict()]
        differences = self.differences()
        if differences:  # one line: a comparison set up unlike its baseline is the first thing to doubt
            notes.append(f"differs from the saved run: {'; '.join(differences)}")
        notes += self.result.notes()
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
        return notes

    def __str__(self) -> str:
        from kvmagic.results.shown import shown_text

        return shown_text(self.to_dataframe(), self.notes())

    def __repr__(self) -> str:
        return f"<Comparison of {self.result!r} with {self.name}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else f"{self!r}\n{self}")

    def _repr_html_(self) -> str:
        from kvmagic.results.display import to_html

        return to_html(self.to_dataframe(), {"model": self.result.model, **self.result.setup()}, self.notes(),
                       title=repr(self))  # fmt: skip


def compare(result: Kept, baseline: Kept, name: str = "the saved run") -> Comparison:
    """``result`` against ``baseline`` (e.g. ``BenchmarkResult.read_json("before.json")``), which the verdict calls
    ``name`` (the file's name, say); each one run's :class:`~kvmagic.results.result.BenchmarkResult`, a result of
    another kind refused."""
    return Comparison(_one_run(result, "result"), _one_run(baseline, "baseline"), name)


def _one_run(found: Kept, side: str) -> BenchmarkResult:
    if not isinstance(found, BenchmarkResult):
        raise KVMagicError(f"compare sets one run against another: the {side} is a {type(found).__name__}, not one "
                           "run's BenchmarkResult: pass one of the runs it holds")  # fmt: skip
    return found


@dataclass(frozen=True)
class Judged:
    """One row both runs measured: where it is, each side's speed-up and rounds, and whether the change is beyond
    the runs' noise (None: a side timed one round, too few to tell)."""

    where: str
    was: float
    now: float
    rounds_was: int
    rounds_now: int
    significant: bool | None

    @property
    def moved(self) -> str:
        """Both speed-ups and the change, written as the table writes them (:func:`~kvmagic.results.columns.moved`)."""
        return moved(self.was, self.now)


SHOWN_MOVES = 2  # rows whose move the verdict spells out; the rest it counts


def verdict(name: str, judged: Sequence[Judged]) -> str:
    """The comparison in one line, in the words the test allows: a row is said to have risen or fallen only where
    the test found its change beyond noise, one within noise is counted as such, and one a side timed in a single
    round is said to be beyond telling, with what would tell."""
    if not judged:
        return f"against {name}: no row matches a saved one, so nothing is compared"
    rounds = f"{_rounds([j.rounds_was for j in judged])} saved, {_rounds([j.rounds_now for j in judged], False)} now"
    parts = []
    for rose in (True, False):
        moved = [j for j in judged if j.significant and (j.now > j.was) == rose]
        if moved:
            spelled = [f"{j.where} {j.moved}" for j in moved[:SHOWN_MOVES]]
            more = f", and {len(moved) - SHOWN_MOVES} more" if len(moved) > SHOWN_MOVES else ""
            parts.append(f"the speed-up {'rose' if rose else 'fell'} beyond noise at {', '.join(spelled)}{more}")
    within = [j for j in judged if j.significant is False]
    if within and not parts and len(judged) == 1:
        parts.append(f"the speed-up moved {within[0].moved}, within noise")
    elif within:
        parts.append(f"{_count(len(within), 'other row' if parts else 'row')} within noise"
                     if parts else f"no speed-up changed beyond noise ({_count(len(within), 'row')})")  # fmt: skip
    unknown = [j for j in judged if j.significant is None]
    if unknown:
        parts.append(f"{_count(len(unknown), 'row')} timed in one round on a side, which cannot tell a change from "
                     "noise: time both runs with -r 2 or more")  # fmt: skip
    return f"against {name} ({rounds}): {'; '.join(parts)}"


def _rounds(counts: Sequence[int], unit: bool = True) -> str:
    """``3 rounds``, or their range where rows differ (``2-5 rounds``, as ``-r auto`` leaves them)."""
    low, high = min(counts), max(counts)
    number = str(low) if low == high else f"{low}-{high}"
    return f"{number} round{'' if high == 1 else 's'}" if unit else number


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _pair(result: BenchmarkResult, config: Config, strategy: Strategy) -> Pair | None:
    """``strategy`` against the reference at ``config`` in ``result``; None where either did not run. Rows are
    matched by name: a width two runs chose differently is a difference of their requests, said as one."""
    return None if strategy == REFERENCE else result.pair(config, str(strategy))


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
