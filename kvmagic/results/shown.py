"""The table as a reader first sees it: the columns the benchmark exists for, in 100 columns of text.

:func:`~kvmagic.results.report.table` is the data, every column; this is a view of it, for the
magic's output, the command's ``table`` format and ``print(result)``. Twenty columns of full-precision
floats elide the speed-up in a terminal, so the view keeps the sizes, the two times, the speed-up
(its interval in the same cell, where there is one), whether the tokens matched, a comparison's quality
where it was read, and the KV cache's size, and writes numbers to 4 significant digits (ratios to 3).
Where a row would still pass :data:`WIDTH`, the least needed columns go first. A cache comparison's
long texts (where the tokens first differed, why a strategy could not run) become numbered footnotes
under the table.

``--wide`` writes every column with the same cells (:func:`cell`), a ``note`` as a footnote mark, in blocks
of columns that each fit :data:`WIDTH`, every block led by the columns that say which row it is.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kvmagic.core.intervals import too_wide
from kvmagic.core.strategy import REFERENCE, Strategy
from kvmagic.results.columns import WIDTH, cell, column, interval, missing, moved

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "COMPARED_HEADER", "INTERVAL_HEADER", "NOTE_LINES", "WIDTH", "brief", "cell", "more_notes", "noted",
    "shown_names", "shown_table", "shown_text", "wide_cells", "wide_text", "wrapped_notes",
]  # fmt: skip

NOTE_LINES = 3  # lines of notes under the shown table, the most important first; --wide and .notes() give every one
TOO_FEW = "too few rounds"  # the speed-up's cell where its interval is too wide to mean anything
INTERVAL_HEADER = "speedup [95% CI]"  # the speed-up's column, where some row shows its interval beside it
COMPARED_HEADER = "speedup saved -> now"  # the speed-up's column against a baseline: both figures and the change


def shown_names(names: Sequence[str]) -> list[str]:
    """The columns of a table of these ``names`` that the short table keeps, in its order: as declared (a column
    declared ``after`` another right behind it: against a baseline, whether the change is beyond noise beside the
    speed-up's cell that holds it)."""
    shown = [name for name in names if column(name).shown]
    for name in [n for n in shown if column(n).after in shown]:
        shown.remove(name)
        shown.insert(shown.index(column(name).after) + 1, name)
    return shown


def _speedups(frame: pd.DataFrame) -> list[str]:
    """The speed-up, followed by its interval where both ends are known: ``3.47 [3.10, 3.90]``; an interval too wide
    to mean anything (:func:`~kvmagic.core.intervals.too_wide`) in place of the figure: ``too few rounds [0.0075,
    1704]``."""
    low = frame.get("speedup_ci_low", [math.nan] * len(frame))
    high = frame.get("speedup_ci_high", [math.nan] * len(frame))
    cells = []
    for value, lo, hi in zip(frame["speedup"], low, high):
        ends = interval("speedup", lo, hi)
        figure = TOO_FEW if ends and too_wide(lo, hi) else cell("speedup")(value)
        cells.append(figure + (f" {ends}" if ends else "") if not missing(value) else "")
    return cells


def _compared_speedups(frame: pd.DataFrame) -> list[str]:
    """Against a baseline, the saved speed-up, the new one and the change in one cell (:func:`moved`); ``none ->
    2.67`` where the baseline has no such row (the notes name it); blank for the reference's row, which has none."""
    strategies = frame["strategy"] if "strategy" in frame else [None] * len(frame)
    references = [s is not None and Strategy.of(s) == REFERENCE for s in strategies]
    return [
        "" if missing(now) or reference else f"none -> {cell('speedup')(now)}" if missing(was) else moved(was, now)
        for now, was, reference in zip(frame["speedup"], frame["speedup_was"], references)
    ]


def _numbered(texts: Iterable[Sequence[str]]) -> tuple[list[str], list[str]]:
    """Each row's marks for its texts, and the footnotes: one per distinct text, numbered in order of appearance."""
    numbers: dict[str, int] = {}
    marks = [" ".join(f"[{numbers.setdefault(t, len(numbers) + 1)}]" for t in row if t) for row in texts]
    return marks, [f"[{number}] {text}" for text, number in numbers.items()]


def _footnotes(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Each row's footnote marks for where its tokens first differed and for its note, and the footnotes."""
    return _numbered(
        (f"differs from off at position {mismatch}" if isinstance(mismatch, str) and mismatch else "", _text(note))
        for mismatch, note in zip(frame["first_mismatch"], frame["note"])
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _cells(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    import pandas as pd

    strategies = "strategy" in frame.columns
    cells: dict[str, list[str]] = {}
    footnotes: list[str] = []
    for name in shown_names(list(frame.columns)):
        when, together = column(name).shown_when, column(name).shown_cells
        if name == "note" and strategies:
            marks, footnotes = _footnotes(frame)
            if footnotes:
                cells[name] = marks
        elif name == "speedup" and "speedup_was" in frame.columns:
            cells[COMPARED_HEADER] = _compared_speedups(frame)
        elif name == "speedup":
            speedups = _speedups(frame)
            cells[INTERVAL_HEADER if any("[" in text for text in speedups) else name] = speedups
        elif when is not None and not when(frame):
            continue
        elif together is not None:
            cells[name] = together(list(frame[name]))
        else:
            cells[name] = [cell(name)(value) for value in frame[name]]
    return pd.DataFrame(cells, index=frame.index, dtype=object), footnotes


def _batched(frame: pd.DataFrame) -> bool:
    return "batch" in frame.columns and any(not missing(b) and b > 1 for b in frame["batch"])


def _lines(cells: pd.DataFrame) -> list[str]:
    if cells.empty:
        return [" ".join(cells.columns)]
    return [line.rstrip() for line in textwrap.dedent(cells.to_string(index=False)).splitlines()]


def shown_table(frame: pd.DataFrame, width: int = WIDTH) -> tuple[pd.DataFrame, list[str]]:
    """The shown columns of ``frame`` (a result's or a comparison's table) as text cells, and their footnotes."""
    full, footnotes = _cells(frame)
    cells, dropped = full, list[str]()
    which = (2 if "pareto" in full.columns else 1) if _lossy(frame) else 0
    ranked = [n for n in full.columns if column(n).gives_way[which] is not None]
    for name in sorted(ranked, key=lambda n: column(n).gives_way[which] or 0):
        if _width(cells) <= width:
            break
        if name == "identical" and "strategy" not in full.columns:
            continue  # `identical` goes only where a footnote marks each row whose tokens differed: a comparison's
        cells, dropped = cells.drop(columns=[name]), [name, *dropped]
    for name in dropped:  # the most needed first, back where the table still fits without it gone
        tried = full[[n for n in full.columns if n in cells.columns or n == name]]
        cells = tried if _width(tried) <= width else cells
    return cells, footnotes


def _width(cells: pd.DataFrame) -> int:
    return max(map(len, _lines(cells)))


def _lossy(frame: pd.DataFrame) -> bool:
    """Some strategy's predictions left the full cache's (a lossless one scores exactly 1 and 0)."""
    agreement, kl = frame.get("top1_agreement", ()), frame.get("kl_nats", ())
    return any(value < 1 for value in agreement if not missing(value)) or any(value > 0 for value in kl)


def _filled(text: str, width: int, indent: str, first: str = "") -> str:
    """``text`` broken at spaces only: a flag (``--max-seconds``) or a word longer than a line stays whole."""
    return textwrap.fill(
        text, width, initial_indent=first, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )


def wrapped_notes(notes: Sequence[str], width: int = WIDTH, bullet: str = "") -> list[str]:
    """Notes as lines that fit ``width`` (a long warning would otherwise run past the table's edge), each led by
    ``bullet`` (Markdown's ``- ``, whose item goes on under an indent of two)."""
    return [_filled(note, width, "  ", bullet) for note in notes]


def brief(notes: Sequence[str], width: int = WIDTH) -> tuple[list[str], list[str]]:
    """The notes the shown table keeps, most important first as they come, in :data:`NOTE_LINES` lines at ``width``
    with the count of the rest (:func:`noted`), and those it leaves out. The first note is always kept; the footnotes
    to the rows' marks are the table's own, outside the count."""
    kept: list[str] = list(notes[:1])
    left: list[str] = []
    for i, note in enumerate(notes[1:], start=1):
        unsaid = len(notes) - i - 1 + len(left)
        fits = len(noted([*kept, note], unsaid, width)) <= NOTE_LINES
        (kept if fits else left).append(note)
    return kept, left


def more_notes(left_out: int) -> str:
    """What says how many notes the shown table left out, and where every one is."""
    return f"(+{left_out} note{'s' if left_out > 1 else ''}: --wide or .notes())"


def noted(kept: Sequence[str], left_out: int, width: int = WIDTH) -> list[str]:
    """The kept notes as lines that fit ``width``, the count of those left out at the end of the last line where it
    fits there, else on a line of its own."""
    lines = [line for note in wrapped_notes(kept, width) for line in note.splitlines()]
    if not left_out:
        return lines
    more = more_notes(left_out)
    if lines and len(lines[-1]) + 1 + len(more) <= width:
        return [*lines[:-1], f"{lines[-1]} {more}"]
    return [*lines, more]


def shown_text(frame: pd.DataFrame, notes: Sequence[str] = (), width: int = WIDTH) -> str:
    """The shown table as plain text, its footnotes and then the first ``notes`` that fit :data:`NOTE_LINES` lines
    (:func:`brief`), wrapped to ``width`` beneath it."""
    cells, footnotes = shown_table(frame, width)
    wrapped = [_filled(note, width, "    ") for note in footnotes]
    kept, left = brief(notes, width)
    return "\n".join([*_lines(cells), *wrapped, *noted(kept, len(left), width)])


def wide_cells(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Every column of ``frame`` written as the shown table writes its cells, a ``note`` as a footnote mark; and
    the footnotes (``--wide``, in text and in HTML)."""
    import pandas as pd

    texts: dict[str, list[str]] = {}
    footnotes: list[str] = []
    for name in frame.columns:
        if name == "note":
            texts[name], footnotes = _numbered([_text(note)] for note in frame[name])
        else:
            texts[name] = [cell(name)(value) for value in frame[name]]
    return pd.DataFrame(texts, index=frame.index, columns=frame.columns, dtype=object), footnotes


def wide_text(frame: pd.DataFrame, notes: Sequence[str] = (), width: int = WIDTH) -> str:
    """Every column of ``frame`` (:func:`wide_cells`), in blocks of columns that each fit ``width`` (a blank line
    between them), each led by the columns that say which row it is; then the footnotes and ``notes``, wrapped to
    ``width``."""
    cells, footnotes = wide_cells(frame)
    leading = [n for n in frame.columns if column(n).identifies and (n != "batch" or _batched(frame))]
    lines: list[str] = []
    for block in _blocks(cells, leading, width):
        lines += ["", *_lines(cells[block])] if lines else _lines(cells[block])
    wrapped = [_filled(note, width, "    ") for note in footnotes]
    return "\n".join([*lines, *wrapped, *wrapped_notes(notes, width)])


def _blocks(cells: pd.DataFrame, leading: list[str], width: int) -> list[list[str]]:
    """The columns in blocks that each fit ``width``, each starting with the ``leading`` ones; a column too wide
    for any block gets one of its own."""
    rest = [name for name in cells.columns if name not in leading]
    size = {name: max([len(name), *map(len, cells[name])]) for name in cells.columns}
    blocks: list[list[str]] = []
    for name in rest:
        if not blocks or sum(size[n] + 1 for n in [*blocks[-1], name]) - 1 > width:
            blocks.append(list(leading))
        blocks[-1].append(name)
    return blocks or [leading]
