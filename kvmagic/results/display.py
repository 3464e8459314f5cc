"""How a result looks in Jupyter and in a terminal: the shown table, styled, with how it was measured folded
into the caption.

Both show :mod:`~kvmagic.results.shown`'s columns unless asked for every one (``wide``); the data stays
whole either way. Only the HTML a notebook asks for is styled: the speed-up is set in bold, a row whose
runs did not generate the same tokens is flagged red, and a significant change against a baseline is
marked. Imports pandas: import this module only to render.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pandas as pd

from kvmagic.results.columns import missing
from kvmagic.results.shown import (
    COMPARED_HEADER,
    INTERVAL_HEADER,
    brief,
    shown_table,
    shown_text,
    wide_cells,
    wide_text,
)

__all__ = ["StyledTable", "TablePlot", "styled_table", "to_html"]

_FLAGGED = "background-color: #f8d7da; color: #842029; font-weight: bold"
_MARKED = "background-color: #fff3cd; font-weight: bold"


def _differs(identical: Any) -> bool:
    """False, not merely missing (a strategy that could not run has no verdict)."""
    return not missing(identical) and not identical


def _readable(key: str, value: Any) -> str:
    """A metadata value as a reader takes it in: 4 significant digits, bytes in MiB or GiB, a digest cut short."""
    if isinstance(value, float) and key.endswith("_bytes"):
        return f"{value / 2**30:.4g} GiB" if value >= 2**30 else f"{value / 2**20:.4g} MiB"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_readable(str(k), v)}" for k, v in value.items())
    if key.endswith("sha256"):
        return f"{str(value)[:12]}..."
    return str(value)


def _caption(metadata: Mapping[str, Any]) -> str:
    """How the result was measured, each value readable; what is unknown or empty is left out, as are the CPU where
    the device already names it and the TF32 flags without CUDA (they act only on an NVIDIA GPU)."""
    said = str(metadata.get("device"))
    left_out = {"cpu"} if f"({metadata.get('cpu')})" in said else set()
    left_out |= set() if metadata.get("cuda") else {"allow_tf32_matmul", "allow_tf32_cudnn"}
    rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(str(key))}</th><td style='text-align:left'>"
        f"{html.escape(_readable(key, value))}</td></tr>"
        for key, value in metadata.items()
        if value is not None and value != {} and value != [] and key not in left_out
    )
    return f"<details><summary>how this was measured</summary><table>{rows}</table></details>"


def to_html(
    frame: pd.DataFrame,
    metadata: Mapping[str, Any],
    notes: Sequence[str] = (),
    wide: bool = False,
    title: str = "",
    uuid: str = "",
) -> str:
    """The shown table (every column if ``wide``) styled, the metadata in a collapsed caption, then the notes: the
    first few (:func:`~kvmagic.results.shown.brief`), the rest folded beneath them, unless ``wide``. A ``title`` (the
    object's repr, where the object is shown rather than its table) leads it. ``uuid`` names the table's styles
    (pandas draws a random name otherwise): a page made twice of one result is then the same page."""
    shown, footnotes = wide_cells(frame) if wide else shown_table(frame)
    styler = shown.style.hide(axis="index").set_caption(_caption(metadata))
    if uuid:
        styler = styler.set_uuid(uuid)
    styler = styler.set_table_styles([{"selector": "caption", "props": "text-align: left"}])  # a wide table's too
    bold = [c for c in ("speedup", INTERVAL_HEADER) if c in shown.columns]
    if bold:
        styler = styler.set_properties(subset=bold, **{"font-weight": "bold"})
    # Flags come from the data, whatever the shown cells read.
    if "identical" in shown.columns:
        flags = frame["identical"].map(lambda v: _FLAGGED if _differs(v) else "")
        styler = styler.apply(lambda _: flags.to_numpy(), subset=["identical"], axis=0)
    marked = [c for c in (COMPARED_HEADER, "speedup_change") if c in shown.columns]
    if marked:
        marks = frame["significant"].map(lambda v: _MARKED if v is True else "").to_numpy()
        styler = styler.apply(lambda _: marks, subset=marked, axis=0)
    kept, left = (list(notes), []) if wide else brief(notes)
    paragraphs = "".join(f"<p>{html.escape(note)}</p>" for note in [*footnotes, *kept])
    if left:  # every note stays one click away, folded as the caption is
        rest = "".join(f"<p>{html.escape(note)}</p>" for note in left)
        paragraphs += f"<details><summary>{len(left)} more note{'s' if len(left) > 1 else ''}</summary>{rest}</details>"
    heading = f"<p><code>{html.escape(title)}</code></p>" if title else ""
    return heading + str(styler.to_html()) + paragraphs


class StyledTable(pd.DataFrame):
    """A DataFrame that shows the shown table (every column if ``kvmagic_wide``), styled in Jupyter, with its
    notes beneath it; it holds every column, and anything derived from it is a plain DataFrame.

    It is the cell's value, so ``_`` after a cell: it carries the result it shows (``.result``), draws that
    result's figure (``.plot()``) and gives its columns as ``.to_dataframe()`` does on the result."""

    _metadata: ClassVar[list[str]] = ["kvmagic_metadata", "kvmagic_notes", "kvmagic_wide", "kvmagic_result"]

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        plain: type[pd.DataFrame] = pd.DataFrame
        return plain

    @property
    def result(self) -> Any:
        """The BenchmarkResult this table shows: every measurement, the request and where it ran (``-o``'s)."""
        return self.kvmagic_result

    @property
    def plot(self) -> TablePlot:
        return TablePlot(self)

    def to_dataframe(self) -> pd.DataFrame:
        """Every column of this table as a plain DataFrame, a copy."""
        return pd.DataFrame(self, copy=True)

    def _wide(self) -> bool:
        return bool(getattr(self, "kvmagic_wide", False))

    def _notes(self) -> list[str]:
        return list(getattr(self, "kvmagic_notes", None) or [])

    def _repr_html_(self) -> str:
        metadata = getattr(self, "kvmagic_metadata", {}) or {}
        return to_html(pd.DataFrame(self), metadata, self._notes(), wide=self._wide())

    def __repr__(self) -> str:
        return (wide_text if self._wide() else shown_text)(pd.DataFrame(self), self._notes())


class TablePlot:
    """``table.plot()``: the figure of the result the table shows, as ``result.plot()`` draws it (pandas' own,
    every column against the row number, says nothing here). Given arguments (``x=``, ``y=``, ``kind=``), or as
    ``table.plot.bar(...)``, it is pandas' plot of the table's columns."""

    def __init__(self, table: StyledTable) -> None:
        self._table = table

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:
            return pd.DataFrame(self._table).plot(*args, **kwargs)
        return self._table.result.plot()

    def __getattr__(self, name: str) -> Any:
        return getattr(pd.DataFrame(self._table).plot, name)


def styled_table(
    frame: pd.DataFrame, metadata: Mapping[str, Any], notes: Sequence[str] = (), wide: bool = False, *, result: Any
) -> pd.DataFrame:
    """``frame`` as what the magic returns: still a DataFrame with every column, shown compact (every column
    if ``wide``) with ``notes`` beneath it, styled with ``metadata`` when shown as HTML, and carrying ``result``
    (the BenchmarkResult it shows) for ``.plot()`` and ``.result``."""
    table = StyledTable(frame)
    table.kvmagic_metadata = dict(metadata)
    table.kvmagic_notes = list(notes)
    table.kvmagic_wide = wide
    table.kvmagic_result = result
    return table
