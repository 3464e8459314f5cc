"""Play a sequence of cells through a driver, checking every invariant after each cell.

The first cell that breaks one fails the test with the whole session so far (cells, what each produced,
the problems), so that a reader can type it again. A session that passed is handed to the next sequence,
which goes on from where it left off, as a user's session would: the ledger carries what it should hold.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pexpect
import psutil

from .cells import USER_NAMES, Cell, Kind, State, after, expected
from .checks import facts_problems
from .record import Record, transcript

__all__ = ["ROOT", "RSS_GROWTH", "Ledger", "Pool", "environment", "play"]

ROOT = Path(__file__).resolve().parent.parent.parent
# Resident memory of the kernel (or the terminal IPython) may grow this much over its sequences, counted
# from just after tiny is first loaded. Measured over every sequence here in one kernel (87 cells): 54 MiB
# at the first run (torch's kernels and allocator pools), 60 MiB at the end; in the terminal, 55-68 MiB;
# the same on transformers 5 and 4.55. A bound against a runaway (each run keeping its caches, each reload
# a model), not a leak detector: tests/test_leaks.py counts tensors for that.
RSS_GROWTH = 200 * 2**20
MAX_LISTED = 12  # cells listed in a failure's first lines; the transcript below has them all


@dataclass
class Ledger:
    """What a session should hold after the cells it ran: the state, the outputs, the memory baseline."""

    state: State = field(default_factory=State)
    out: set[int] = field(default_factory=set)  # the execution counts that displayed a result
    values: dict[int, str] = field(default_factory=dict)  # those of value cells: the repr each showed
    baseline: int | None = None  # resident memory just after tiny was first loaded
    played: list[tuple[str, list[Record]]] = field(default_factory=list)


class Driver(Protocol):
    ledger: Ledger
    pid: int  # the process that runs the cells

    def run(self, record: Record) -> None: ...
    def problems(self, record: Record) -> list[str]: ...
    def facts(self, names: str, outputs: tuple[int, ...], results: str) -> dict[str, Any]: ...
    def close(self) -> None: ...


def environment(ipython_dir: Path) -> dict[str, str]:
    """What a kernel or terminal of the harness runs with: this checkout's kvmagic, offline, one thread."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    keep = {name: os.environ[name] for name in ("HF_HUB_OFFLINE", "OMP_NUM_THREADS", "KVMAGIC_CACHE")}
    return {**os.environ, **keep, "PYTHONPATH": path, "IPYTHONDIR": str(ipython_dir)}


def _rss(pid: int) -> int:
    """Resident memory of the session's process; 0 once it is gone."""
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


def _failed(name: str, records: list[Record], ledger: Ledger) -> AssertionError:
    """Each cell that broke an invariant in a line, then the sequence, then those this process passed before."""
    broken = [(index, record) for index, record in enumerate(records, 1) if record.problems]
    lines = [f"{name!r}: {len(broken)} of {len(records)} cells broke an invariant"]
    for index, record in broken[:MAX_LISTED]:
        lines.append(f"  cell {index} {record.cell.source.splitlines()[0]!r}: {'; '.join(record.problems)}"[:600])
    earlier = [transcript(f"{before} (passed earlier, same process)", cells) for before, cells in ledger.played]
    return AssertionError("\n".join([*lines, transcript(name, records), *earlier]))


def _check(record: Record, driver: Driver) -> None:
    """After the cell: its outcome, the bars, the namespace against the ledger, the memory."""
    ledger, cell = driver.ledger, record.cell
    record.problems += driver.problems(record)
    if record.results and record.count is not None:
        ledger.out.add(record.count)
        if cell.kind is Kind.VALUE:
            ledger.values[record.count] = cell.value
    state = ledger.state
    record.facts = driver.facts(" ".join(USER_NAMES), tuple(sorted(ledger.values)), " ".join(sorted(state.results)))
    record.problems += facts_problems(record.facts, state, ledger.out, ledger.values)
    record.rss = _rss(driver.pid)
    if ledger.baseline is None and state.model is not None:
        ledger.baseline = record.rss or None
    if ledger.baseline is not None and record.rss - ledger.baseline > RSS_GROWTH:
        record.problems.append(f"resident memory grew {(record.rss - ledger.baseline) >> 20} MiB since tiny was loaded")


def play(name: str, cells: list[Cell], driver: Driver) -> list[Record]:
    """Run ``cells`` one by one in ``driver``'s session; after each, check every invariant. A cell that
    breaks one does not stop the sequence (what follows shows what the break did); one that gets no
    answer does."""
    ledger, records = driver.ledger, []
    for cell in cells:
        record = Record(cell, expected(cell, ledger.state))
        records.append(record)
        try:
            driver.run(record)
        except (TimeoutError, pexpect.TIMEOUT, pexpect.EOF) as error:
            record.problems.append(f"no answer: {type(error).__name__}: {str(error)[:300]}")
            raise _failed(name, records, ledger) from None
        ledger.state = after(cell, ledger.state)
        _check(record, driver)
    if any(record.problems for record in records):
        raise _failed(name, records, ledger)
    ledger.played.append((name, records))
    return records


class Pool:
    """At most one idle session, kept for the next sequence when the last one passed; closed otherwise."""

    def __init__(self, start: Callable[[], Driver]) -> None:
        self.start, self.idle = start, None

    @contextmanager
    def session(self) -> Iterator[Any]:
        driver, self.idle = self.idle or self.start(), None
        try:
            yield driver
        except BaseException:
            driver.close()
            raise
        self.idle = driver

    def close(self) -> None:
        if self.idle is not None:
            self.idle.close()
            self.idle = None
