"""What one cell did, as either driver saw it, and the sequence so far, written out to reproduce it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .cells import Cell

__all__ = ["ANSI", "Record", "rendered", "transcript"]

# What a terminal draws but a reader does not see: colour, cursor and mode sequences.
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


def rendered(screen: str) -> list[str]:
    """Each line as it stays on the screen once every carriage return has drawn over it."""
    shown = []
    for row in ANSI.sub("", screen).split("\n"):
        line = ""
        for part in row.split("\r"):
            line = part + line[len(part) :]
        shown.append(line.rstrip())
    return shown


@dataclass
class Record:
    """One cell: what it should have done, and what came back."""

    cell: Cell
    expect: str
    count: int | None = None  # its execution count
    status: str = ""  # the kernel's reply: ok or error
    ename: str = ""
    evalue: str = ""
    tracebacks: list[str] = field(default_factory=list)  # the text of every error message
    stdout: str = ""
    stderr: str = ""
    results: list[str] = field(default_factory=list)  # text/plain of each execute_result
    help: str = ""  # a pager's text (the kernel's payload)
    screen: str = ""  # terminal: everything drawn from the end of the input to the next prompt
    bars: dict[str, str] = field(default_factory=dict)  # unfinished bars after the cell
    marks: list[tuple[float, str]] = field(default_factory=list)  # terminal: (seconds, what it read) as each bar drew
    facts: dict[str, Any] = field(default_factory=dict)
    rss: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


def _clip(text: str, lines: int = 8) -> str:
    rows = text.rstrip().splitlines()
    kept = rows[:lines] + ([f"... ({len(rows) - lines} more lines)"] if len(rows) > lines else [])
    return "\n".join(kept)


def _shown(record: Record) -> list[str]:
    parts = [f"status={record.status or '-'} expected={record.expect} {record.seconds:.1f}s rss={record.rss >> 20} MiB"]
    if record.ename:
        parts.append(f"error {record.ename}: {record.evalue}")
    for name, text in (("stdout", record.stdout), ("stderr", record.stderr), ("help", record.help)):
        if text.strip():
            parts.append(f"{name}: {_clip(ANSI.sub('', text), 4)}")
    parts += [f"result: {_clip(text, 4)}" for text in record.results]
    parts += [f"traceback: {_clip(ANSI.sub('', text), 12)}" for text in record.tracebacks]
    if record.screen.strip():
        parts.append(f"screen (as it stays):\n{_clip(chr(10).join(rendered(record.screen)), 24)}")
    parts += [f"bar left: {text}" for text in record.bars.values()]
    if record.facts:
        parts.append(f"facts: {record.facts}")
    parts += [f"PROBLEM: {problem}" for problem in record.problems]
    return parts


def transcript(name: str, records: list[Record]) -> str:
    """The sequence so far, cell by cell with what each produced: enough to type it again."""
    out = [f"session {name!r}, {len(records)} cells so far:"]
    for index, record in enumerate(records, 1):
        out.append(f"--- cell {index} [{record.count}] ({record.cell.kind.value}):")
        out.extend("    | " + line for line in record.cell.source.splitlines())
        out.extend("      " + line.replace("\n", "\n      ") for line in _shown(record))
    return "\n".join(out)
