"""The floors leg pins exactly the lowest versions pyproject.toml declares, so a declared floor is a tested one."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def _floors_module():
    spec = importlib.util.spec_from_file_location("ci_floors", ROOT / ".ci" / "floors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pins_every_declared_floor_and_only_those():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    declared = tomllib.loads(text)["project"]["dependencies"]
    pins = _floors_module().floors(text)
    expected = [re.sub(r"\s*>=\s*", "==", dep) for dep in declared if ">=" in dep]
    assert [pin for pin in pins if "==" in pin] == expected
    assert {"torch==2.6", "transformers==4.55.4", "accelerate==1.1", "pandas==2", "ipython==8.1"} <= set(pins)
    assert "numpy<2" in pins  # pandas 2.0 fails to import under numpy 2


def test_reads_a_hand_written_list():
    text = 'name = "x"\ndependencies = [\n    "a>=1.2",  # why\n    "b",\n    "c >= 3",\n    "pandas>=2.0",\n]\n'
    text += '[project.optional-dependencies]\ntest = ["pytest>=8"]\n'
    assert _floors_module().floors(text) == ["a==1.2", "c==3", "pandas==2.0", "numpy<2"]
