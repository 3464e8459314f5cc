"""How the pairs of options answered, counted per front end and size: the pair test fills it, and the end of the
run prints it, summed over pytest-xdist's workers where there are some (each hands its count to the controller)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

TALLY: Counter[tuple[str, str]] = Counter()  # (front end and size, outcome) -> cases
_KEY = "pairs_tally"


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)  # set on an xdist worker only
    if output is not None:
        output[_KEY] = [[where, outcome, count] for (where, outcome), count in TALLY.items()]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    for where, outcome, count in getattr(node, "workeroutput", {}).get(_KEY, []):
        TALLY[where, outcome] += count


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for where in sorted({where for where, _ in TALLY}):
        outcomes = ", ".join(f"{TALLY[where, outcome]} {outcome}" for w, outcome in sorted(TALLY) if w == where)
        terminalreporter.write_line(f"{where}: {outcomes}")
