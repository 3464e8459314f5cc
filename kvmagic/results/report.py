"""A result as a table: one row per (configuration, strategy), each one measurement against the reference's at the
same configuration; the plain run's table is one function of those rows, its two strategies side by side.

Every column is declared once (:mod:`~kvmagic.results.rows`, and each option's own beside its code); this module
only reads the declarations. The notes beneath the table live in :mod:`~kvmagic.results.notes`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvmagic.core.addon import addons
from kvmagic.core.strategy import PAIR, REFERENCE, Strategy
from kvmagic.results.columns import Column, names
from kvmagic.results.pareto_marks import pareto_marks
from kvmagic.results.rows import PAIR as PAIR_COLUMNS
from kvmagic.results.rows import ROWS, PairRow, Row

if TYPE_CHECKING:
    import pandas as pd

    from kvmagic.results.benchmark_record import BenchmarkRecord

__all__ = ["COLUMNS", "STRATEGY_COLUMNS", "Addition", "added", "additions", "columns", "rows", "table"]

COLUMNS = names(PAIR_COLUMNS)  # the plain run's table
STRATEGY_COLUMNS = names(ROWS)  # a comparison's table


@dataclass(frozen=True)
class Addition:
    """The columns an option adds, in order, to a comparison's rows (``row_columns``) and to the plain run's view
    (``pair_columns``), where ``used`` says a result was measured with it; ``about`` is what the columns page says
    of it."""

    option: str
    used: Callable[[BenchmarkRecord], bool]
    row_columns: tuple[Column[Any], ...] = ()
    pair_columns: tuple[Column[Any], ...] = ()
    about: str = ""

    @property
    def rows(self) -> tuple[str, ...]:
        return names(self.row_columns)

    @property
    def pair(self) -> tuple[str, ...]:
        return names(self.pair_columns)


def additions() -> list[Addition]:
    """What the options add, in the order their columns follow the table's own: what each add-on adds, in the
    registry's order."""
    return [
        Addition(a.options[0].flags[0], a.shows, a.row_columns, a.pair_columns, a.about)
        for a in addons()
        if a.row_columns or a.pair_columns
    ]


def added(option: str) -> Addition:
    """What ``option`` adds to the tables."""
    return next(addition for addition in additions() if addition.option == option)


def row_columns(result: BenchmarkRecord) -> tuple[Column[Any], ...]:
    return (*ROWS, *(c for a in additions() if a.used(result) for c in a.row_columns))


def columns(result: BenchmarkRecord) -> tuple[Column[Any], ...]:
    """The columns of ``result``'s table, in order: a comparison's rows or the plain run's view, each followed by
    what the options it was measured with add."""
    if not result.plain:
        return row_columns(result)
    return (*PAIR_COLUMNS, *(c for a in additions() if a.used(result) for c in a.pair_columns))


def rows(result: BenchmarkRecord) -> list[dict[str, Any]]:
    """One dict per (configuration, strategy asked for), in the order they ran, with every column of a comparison's
    table. A strategy that did not run at a configuration has its row all the same, its note saying why."""
    marks, declared = pareto_marks(result), [c for c in row_columns(result) if c.read is not None]
    found = []
    for config in result.configs:
        reference = result.measurement(REFERENCE, config)
        for name in result.strategies:  # names set by hand (a notebook's) are read here, at the request's width
            strategy = Strategy.of(name, result.spec.kv_bits)
            row = Row(result, config, strategy, result.measurement(strategy, config), reference, marks)
            found.append({c.name: c.read(row) for c in declared if c.read is not None})
    return found


def pair_view(result: BenchmarkRecord) -> list[dict[str, Any]]:
    """The plain run's view: per configuration, ``off``'s and ``dynamic``'s rows side by side, each column the one
    its declaration names (a side's column, or its own reading of the pair)."""
    by_key = {(row["prompt_tokens"], row["new_tokens"], row["batch"], row["strategy"]): row for row in rows(result)}
    shown = columns(result)
    found = []
    for pair in result.pairs():
        prompt_tokens, new_tokens, batch = pair.config
        sides = {strategy: by_key[(prompt_tokens, new_tokens, batch, str(strategy))] for strategy in PAIR}
        context = PairRow(result, pair, sides)
        found.append({c.name: _paired(c, sides, context) for c in shown})
    return found


def _paired(declared: Column[Any], sides: dict[Strategy, dict[str, Any]], context: PairRow) -> Any:
    """A column of the plain run's view: a side's column, the pair's own reading, or the column's row reading."""
    if declared.side is not None:
        return sides[declared.side[0]][declared.side[1]]
    read = declared.read_pair or declared.read
    return None if read is None else read(context)


def table(result: BenchmarkRecord) -> pd.DataFrame:
    """The result's table: one row per configuration (per strategy, in a cache comparison)."""
    import pandas as pd

    found = pair_view(result) if result.plain else rows(result)
    if result.plain:  # an add-on's rows of the plain run's view (of a configuration not measured, say)
        for addon in addons():
            if addon.shows(result):
                found = addon.pair_rows(result, found)
    return pd.DataFrame(found, columns=list(names(columns(result))))
