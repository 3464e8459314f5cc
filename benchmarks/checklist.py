"""Named checks, each with a status and the figure behind it, and the rules that give a status.

A status is PASS or FAIL when the check could tell; SKIP when it cannot run here (its reason says
why); INCONCLUSIVE when it ran but its interval straddles the threshold; NOT RUN when the deadline
came first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FAIL",
    "INCONCLUSIVE",
    "NOT_RUN",
    "PASS",
    "SKIP",
    "STATUSES",
    "Check",
    "guarded",
    "line",
    "speed_verdict",
    "table",
    "verdict",
]

PASS, FAIL, SKIP, INCONCLUSIVE, NOT_RUN = "PASS", "FAIL", "SKIP", "INCONCLUSIVE", "NOT RUN"
STATUSES = (PASS, FAIL, SKIP, INCONCLUSIVE, NOT_RUN)
_WIDTH = max(map(len, STATUSES))


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    figure: str
    data: dict[str, Any] = field(default_factory=dict)  # what the report keeps beyond the line: rows, counts
    seconds: float = 0.0  # how long the step that gave it took


def verdict(name: str, ok: bool, figure: str, **data: Any) -> Check:
    return Check(name, PASS if ok else FAIL, figure, data)


def speed_verdict(name: str, interval: tuple[float, float], threshold: float, figure: str, **data: Any) -> Check:
    """PASS when the whole interval lies above ``threshold``, FAIL when wholly below, INCONCLUSIVE otherwise:
    a speed check that can flake on noise says it could not tell instead."""
    low, high = interval
    if math.isnan(low) or math.isnan(high):
        return Check(name, INCONCLUSIVE, f"{figure}; no interval", data)
    if low > threshold:
        return Check(name, PASS, figure, data)
    if high < threshold:
        return Check(name, FAIL, figure, data)
    return Check(name, INCONCLUSIVE, f"{figure}; the interval straddles {threshold:g}", data)


def guarded(name: str, check: Callable[[], Check | list[Check]]) -> list[Check]:
    """A check that raises is a FAIL of its own line, so the checks after it still run."""
    try:
        found = check()
    except Exception as error:
        return [Check(name, FAIL, f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}")]
    return found if isinstance(found, list) else [found]


def line(check: Check, width: int = 0) -> str:
    return f"{check.status:<{_WIDTH}}  {check.name:<{width}}  {check.figure}".rstrip()


def table(checks: list[Check]) -> str:
    width = max((len(c.name) for c in checks), default=0)
    return "\n".join(line(c, width) for c in checks)
