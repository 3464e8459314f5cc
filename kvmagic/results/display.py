"""How a result looks in Jupyter: a styled table, with how it was measured folded into the caption.

Terminals get pandas' plain text; only the HTML a notebook asks for is styled. The speed-up is set
in bold, a row whose runs did not generate the same tokens is flagged red, and a significant
change against a baseline is marked. Imports pandas: import this module only to render.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pandas as pd

__all__ = ["StyledTable", "styled_table", "to_html"]

_FLAGGED = "background-color: #f8d7da; color: #842029; font-weight: bold"
_MARKED = "background-color: #fff3cd; font-weight: bold"


def _number(value: Any) -> str:
    return "" if isinstance(value, float) and math.isnan(value) else f"{value:.4g}"


def _change(value: Any) -> str:
    return "" if isinstance(value, float) and math.isnan(value) else f"{value:+.1%}"


def _caption(metadata: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(str(key))}</th><td style='text-align:left'>"
        f"{html.escape(str(value))}</td></tr>"
        for key, value in metadata.items()
    )
    return f"<details><summary>how this was measured</summary><table>{rows}</table></details>"


def to_html(frame: pd.DataFrame, metadata: Mapping[str, Any], notes: Sequence[str] = ()) -> str:
    """The table styled, the metadata in a collapsed caption, then the notes."""
    styler = frame.style.hide(axis="index").set_caption(_caption(metadata))
    floats = [c for c in frame.columns if frame[c].dtype.kind == "f" and c != "speedup_change"]
    styler = styler.format(_number, subset=floats)
    cell_map = getattr(styler, "map", None) or styler.applymap  # pandas < 2.1 names it applymap
    if "speedup" in frame.columns:
        styler = styler.set_properties(subset=["speedup"], **{"font-weight": "bold"})
    if "identical" in frame.columns:
        styler = cell_map(lambda v: "" if v else _FLAGGED, subset=["identical"])
    if "speedup_change" in frame.columns:
        styler = styler.format(_change, subset=["speedup_change"])
        marks = frame["significant"].map(lambda v: _MARKED if v is True else "").to_numpy()
        styler = styler.apply(lambda _: marks, subset=["speedup_change"], axis=0)
    paragraphs = "".join(f"<p>{html.escape(note)}</p>" for note in notes)
    return styler.to_html() + paragraphs


class StyledTable(pd.DataFrame):
    """A DataFrame that renders styled in Jupyter; anything derived from it is a plain DataFrame."""

    _metadata: ClassVar[list[str]] = ["kvmagic_metadata"]

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def _repr_html_(self) -> str:
        return to_html(pd.DataFrame(self), getattr(self, "kvmagic_metadata", {}) or {})


def styled_table(frame: pd.DataFrame, metadata: Mapping[str, Any]) -> pd.DataFrame:
    """``frame`` as what the magic returns: still a DataFrame, styled with ``metadata`` when shown as HTML."""
    table = StyledTable(frame)
    table.kvmagic_metadata = dict(metadata)
    return table
