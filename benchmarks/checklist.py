"""A list of named checks, each PASS, FAIL or SKIP with the figure behind it, printed as one table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Check", "guarded", "table", "verdict"]


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # PASS, FAIL or SKIP
    figure: str


def verdict(name: str, ok: bool, figure: str) -> Check:
    return Check(name, "PASS" if ok else "FAIL", figure)


def guarded(name: str, check: Callable[[], Check | list[Check]]) -> list[Check]:
    """A check that raises is a FAIL of its own line, so the checks after it still run."""
    try:
        found = check()
    except Exception as error:
        return [Check(name, "FAIL", f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}")]
    return found if isinstance(found, list) else [found]


def table(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    return "\n".join(f"{c.status:<4}  {c.name:<{width}}  {c.figure}" for c in checks)
