"""Print, one per line, the lowest versions of kvmagic's dependencies that pyproject.toml declares.

``make test FLOORS=1`` installs these pins, so every declared floor (``name>=X``) is the version
that gets tested; a floor raised or lowered in pyproject.toml changes the test with it. Standard
library only (Python 3.10 has no tomllib): the dependencies list is read with a regular expression.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

__all__ = ["COMPANIONS", "floors", "main"]

# Pins a floor needs beside it that its own metadata does not state: pandas before 2.2.2 was built
# against numpy 1 and fails to import under numpy 2.
COMPANIONS = {"pandas": ("numpy<2",)}

_DEPENDENCIES = re.compile(r"^dependencies\s*=\s*\[(.*?)^\]", re.MULTILINE | re.DOTALL)
_FLOOR = re.compile(r'"([A-Za-z0-9][A-Za-z0-9._-]*)\s*>=\s*([0-9][^",;\s]*)"')


def floors(pyproject: str) -> list[str]:
    """``name==X`` for every ``name>=X`` in ``[project].dependencies``, with the companions they need."""
    block = _DEPENDENCIES.search(pyproject)
    if block is None:
        raise SystemExit("floors.py: no dependencies list in pyproject.toml")
    pins = []
    for name, version in _FLOOR.findall(block.group(1)):
        pins.append(f"{name}=={version}")
        pins.extend(COMPANIONS.get(name.lower(), ()))
    return pins


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "pyproject.toml"
    print("\n".join(floors(path.read_text(encoding="utf-8"))))


if __name__ == "__main__":
    main()
