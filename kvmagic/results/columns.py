"""What a column is, declared once, and how its cells are written.

A :class:`Column` holds everything about one column: its name, what it means, its unit, how its cells are
written, how its value is read from a row, which strategy's row the plain run's view takes it from, whether and
where the short table shows it, and in what order it gives way when that table is too wide. The tables
(:mod:`~kvmagic.results.report`), the short table and ``--wide`` (:mod:`~kvmagic.results.shown`), files,
``--compare`` and docs/columns.md all read those declarations; the plain run's and a comparison's are in
:mod:`~kvmagic.results.rows`, an add-on's in its own folder.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from kvmagic.core.addon import addons
from kvmagic.core.strategy import Strategy

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DECLARING", "WIDTH", "Column", "Form", "GivesWay", "cell", "column", "declare", "interval", "missing", "moved",
    "names", "some_value",
]  # fmt: skip

WIDTH = 100  # the terminal width the shown table, its notes and any paragraph said of it are made to fit
Form = Literal["figure", "speedup", "change", "text"]
# Where a column stands among those the short table drops while it is wider than WIDTH, lowest first: in a table
# of lossless strategies, of some lossy one, and of some lossy one with the trade-off frontier marked. None: never.
GivesWay = tuple[int | None, int | None, int | None]
Context = TypeVar("Context")


@dataclass(frozen=True)
class Column(Generic[Context]):
    """One column of a table, declared once.

    ``read`` gives its value in a row (a :class:`~kvmagic.results.rows.Row` of a comparison, or the plain run's
    :class:`~kvmagic.results.rows.PairRow`); None where another reader fills it (``--compare``'s). In the plain
    run's view, ``side`` says which strategy's row and which of its columns it shows under this name
    (``uncached_s`` is ``off``'s ``seconds``), or ``read_pair`` reads the pair itself where that differs from
    ``read``. ``shown``: the short table keeps it, in declaration order or ``after`` the column named,
    where ``shown_when`` the table's data does not say otherwise; ``gives_way`` orders what the short table drops
    while it is too wide. ``identifies``: it says which row a line is, and leads every block of ``--wide``.
    ``shown_cells`` writes the short table's cells of the column together, where one depends on the others (names
    shortened only where they stay apart); without it each cell is written alone, by ``form``."""

    name: str
    meaning: str
    unit: str = ""
    form: Form = "figure"
    read: Callable[[Context], Any] | None = None
    side: tuple[Strategy, str] | None = None
    read_pair: Callable[[Any], Any] | None = None
    shown: bool = False
    after: str = ""
    shown_when: Callable[[pd.DataFrame], bool] | None = None
    gives_way: GivesWay = (None, None, None)
    identifies: bool = False
    shown_cells: Callable[[list[Any]], list[str]] | None = None


_DECLARED: dict[str, Column[Any]] = {}


def declare(*columns: Column[Any]) -> tuple[Column[Any], ...]:
    """Register ``columns`` for their names' forms and meanings (the first declaration of a name is its own: a table
    of another kind that reuses a name, an add-on's own table, writes its cells alike); returns them, in order,
    as the table they make up."""
    for found in columns:
        _DECLARED.setdefault(found.name, found)
    return columns


# The module that declares the centre's columns, imported by name on first use: every lookup of a column (how its
# cells are written, whether it is shown) then sees every declaration, whatever a caller imported before.
DECLARING = "kvmagic.results.rows"


def column(name: str) -> Column[Any]:
    """The declared column ``name`` (the centre's, or an add-on's); one a table shows without declaring it has no
    meaning, unit or form."""
    if name not in _DECLARED:
        importlib.import_module(DECLARING)
        addons()  # each add-on declares its columns as it loads
    return _DECLARED.get(name) or Column(name, "")


def names(columns: Iterable[Column[Any]]) -> tuple[str, ...]:
    return tuple(found.name for found in columns)


def some_value(name: str) -> Callable[[pd.DataFrame], bool]:
    """Whether some row of a table has a value in column ``name``: a figure read only for some strategies (their
    quality, a warm twin's saving) is shown only there."""
    return lambda frame: not all(missing(value) for value in frame.get(name, ()))


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _figure(value: Any) -> str:
    """4 significant digits, without an exponent for large numbers; a missing value is blank."""
    if missing(value):
        return ""
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return str(value)


def _ratio(value: float) -> str:
    """3 significant digits, trailing zeros kept so a column of ratios lines up (1.50, 15.3, 123)."""
    if missing(value):
        return ""
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:#.3g}".rstrip(".")


def _change(value: float) -> str:
    return "" if missing(value) else f"{value:+.1%}"


def cell(name: str) -> Callable[[Any], str]:
    """How column ``name``'s values read in every table kvmagic shows and in the notes under it, by its declared
    form: a change as a signed percentage, a speed-up (or its interval's ends) to 3 digits, any other number to 4,
    a missing value blank."""
    return {"change": _change, "speedup": _ratio}.get(column(name).form, _figure)


def moved(was: float, now: float) -> str:
    """A speed-up against its baseline's, as the comparison's table and verdict both write it: ``3.18 -> 2.67
    (-16%)``, the change in whole per cent so that the cell stays narrow (its column holds the exact change)."""
    return f"{_ratio(was)} -> {_ratio(now)} ({now / was - 1:+.0%})"


def interval(name: str, low: float, high: float) -> str:
    """An interval of column ``name``'s figure as the table writes it beside the figure (``[3.10, 3.90]``); blank
    where either end is missing."""
    return "" if missing(low) or missing(high) else f"[{cell(name)(low)}, {cell(name)(high)}]"
