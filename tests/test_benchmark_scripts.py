"""Every script in benchmarks/ still imports against the package as it is now: a renamed module or field
cannot leave a benchmark broken until someone next runs it."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("*.py")), ids=lambda path: path.stem)
def test_the_script_imports(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the GPU check's modules import each other by name
    monkeypatch.setattr(sys, "argv", [str(path), "--help"])
    importlib.import_module(path.stem)
