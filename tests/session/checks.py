"""The invariants checked after every cell: the outcome the cell should have, nothing lost, nothing left red.

Each check returns the problems it found, as sentences; an empty list is a pass.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from .cells import USER_NAMES, State
from .inside import MISSING
from .record import ANSI, Record, rendered

__all__ = ["BAR", "COLUMNS", "STILL_S", "facts_problems", "kernel_problems", "still_s", "terminal_problems", "width"]

COLUMNS = 100
_ERROR_LINE = re.compile(r"^\s*[A-Z]\w*(Error|Exception|Interrupt)\b")
# The usage lines a help page opens with, as argparse writes them: the magic's name, then its options.
_USAGE = re.compile(r"^\s*(?:usage:\s*)?(%{1,2}kvbench) \[")
# IPython's own title over every magic's help (%timeit? too), and a terminal's blank lines around it.
_TITLE = re.compile(r"^\s*(Docstring:)?\s*$")
_WARNING = re.compile(r"\b[A-Z]\w*Warning: ")
BAR = re.compile(r"(\d+)%\|[^\r\n]*\]")  # a terminal's bar, from its percentage to the end of its clock
STILL_S = 2.0  # a run's bar redraws every second, so it advances within this long of appearing
# An interrupt as a kernel names it: Python's own, or kvmagic's, which shows itself as one line.
INTERRUPTS = ("KeyboardInterrupt", "Interrupted")


def _help_problems(text: str, spelling: str) -> list[str]:
    """The help a user asked for exists and opens with its usage lines, one as they typed it."""
    text = ANSI.sub("", text)
    if "not found" in text or not text.strip():
        return [f"{spelling}? shows no help: {text.strip()[:120]!r}"]
    lines = text.splitlines()
    while lines and _TITLE.match(lines[0]):
        lines.pop(0)
    usages = [match.group(1) for match in map(_USAGE.match, lines[:2]) if match]
    if spelling not in usages:
        return [f"{spelling}? shows help, but it opens with {lines[:2]}, not the usage of {spelling!r}"]
    return []


def kernel_problems(record: Record) -> list[str]:
    """What the kernel's messages say against what the cell should have done."""
    expect, found = record.expect, f"{record.status}, {record.ename or 'no error'}: {record.evalue[:200]}"
    interrupted = record.ename in INTERRUPTS or "interrupted" in (record.stdout + "".join(record.results))
    problems = []
    if record.tracebacks and not (expect == "interrupted" and record.ename in INTERRUPTS):
        problems.append(f"a traceback ({record.ename}: {record.evalue[:200]})")
    problems += [f"an interrupt shown as a traceback: {text[:300]!r}" for text in record.tracebacks if "\n" in text]
    if "Traceback" in record.stdout + record.stderr:
        problems.append("a traceback printed to the cell's output")
    problems += [f"a warning: {line.strip()[:300]!r}" for line in record.stderr.splitlines() if _WARNING.search(line)]
    if expect == "usage":
        lines = [line for line in record.stderr.splitlines() if line.strip()]
        if record.status != "error" or record.ename != "UsageError":
            problems.append(f"expected one UsageError, got {found}")
        elif not _one_message(lines) or "\n".join(lines) != f"UsageError: {record.evalue.strip()}":
            problems.append(f"the UsageError is not one message: {record.stderr!r:.300}")
    elif expect == "interrupted":
        if not interrupted:
            problems.append(f"the interrupted cell does not say it was interrupted ({found})")
    elif record.status != "ok":
        problems.append(f"expected {expect}, got {found}")
    elif expect == "value" and record.results != [record.cell.value]:
        problems.append(f"expected Out = {record.cell.value}, got {record.results}")
    elif expect == "result" and len(record.results) != 1:
        problems.append(f"expected one result displayed, got {len(record.results)}")
    elif expect == "quiet" and record.results:
        problems.append(f"expected nothing displayed, got {record.results}")
    elif expect == "help":
        problems += _help_problems(record.help + record.stdout, record.cell.value)
    return problems


def _one_message(lines: list[str]) -> bool:
    """One UsageError: its first line, then only the indented lines it wraps onto to fit the terminal."""
    return bool(lines) and lines[0].startswith("UsageError: ") and all(line.startswith("  ") for line in lines[1:])


def width(text: str) -> int:
    """Columns ``text`` takes in a terminal: East Asian wide and full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.combining(c) else 1 for c in text)


def terminal_problems(record: Record) -> list[str]:
    """What the 100-column terminal shows against what the cell should have done."""
    expect, output, count = record.expect, ANSI.sub("", record.stdout), record.count
    lines = [line for line in output.replace("\r", "\n").splitlines() if line.strip()]
    problems = [
        f"a line {width(part)} columns wide: {part!r}" for part in _segments(record.screen) if width(part) > COLUMNS
    ]
    errors = [line for line in lines if _ERROR_LINE.match(line) or "Traceback" in line or _WARNING.search(line)]
    if expect == "usage":
        if not _one_message(lines):
            problems.append(f"expected one UsageError, got {lines[:6]}")
    elif expect == "interrupted":
        if "KeyboardInterrupt" not in output and "interrupted" not in output:
            problems.append("the interrupted cell does not say it was interrupted")
        problems += [
            f"an error or warning: {line!r}"
            for line in errors
            if "KeyboardInterrupt" not in line or "Traceback" in line
        ]
    else:
        problems += [f"an error or warning: {line!r}" for line in errors]
        if expect == "value" and record.results != [record.cell.value]:
            problems.append(f"expected Out[{count}]: {record.cell.value}, got {record.results}")
        elif expect == "result" and not record.results:
            problems.append("expected a result displayed")
        elif expect == "quiet" and record.results:
            problems.append(f"expected nothing displayed, got {record.results}")
        elif expect == "help":
            problems += _help_problems(output, record.cell.value)
        bars = [line for line in rendered(record.screen) if (bar := BAR.search(line)) and int(bar.group(1)) < 100]
        problems += [f"an unfinished progress bar left on the screen: {line.strip()!r}" for line in bars]
        if record.marks and still_s(record.marks) > STILL_S:
            problems.append(f"the progress bar held still for {still_s(record.marks):.1f} s after it appeared")
    return problems


def still_s(marks: list[tuple[float, str]]) -> float:
    """How long a terminal's bar held still after it first drew: until what it reads first changed (its
    percentage, or its clock), or for all it was drawn if it never did."""
    first, read = marks[0]
    return next((at for at, shown in marks if shown != read), marks[-1][0]) - first


def _segments(screen: str) -> list[str]:
    """Every stretch of text drawn from the start of a line: a longer one than the terminal wraps."""
    return [part for row in ANSI.sub("", screen).split("\n") for part in row.split("\r")]


def facts_problems(facts: dict[str, Any], state: State, out: set[int], values: dict[int, str]) -> list[str]:
    """The user's variables, ``_`` and ``Out`` as they were, the model the session should hold."""
    if "probe" in facts:
        return [f"the namespace could not be read: {facts['probe']}"]
    names = {name: value for name, value in USER_NAMES.items() if name in state.names}
    problems = [
        f"{name} is {facts['names'].get(name)}, not {value}"
        for name, value in names.items()
        if facts["names"].get(name) != value
    ]
    if facts["out"] == MISSING or set(facts["out"]) != out:
        problems.append(f"Out holds {facts['out']}, expected {sorted(out)}")
    problems += [
        f"Out[{n}] is {facts['outputs'].get(str(n))}, not {v}"
        for n, v in values.items()
        if facts["outputs"].get(str(n)) != v
    ]
    problems += [text for text in (facts["last"], facts["oh"]) if text != "ok"]
    problems += [f"-v {name} holds {kind}" for name, kind in facts["results"].items() if kind != "BenchmarkResult"]
    if facts["loaded"] != state.model:
        problems.append(f"the loaded model is {facts['loaded']!r}, expected {state.model!r}")
    return problems
