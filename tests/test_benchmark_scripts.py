"""Every script in benchmarks/ still imports against the package as it is now: a renamed module or field
cannot leave a benchmark broken until someone next runs it."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("*.py")), ids=lambda path: path.stem)
def test_the_script_imports(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the GPU check's modules import each other by name
    monkeypatch.setattr(sys, "argv", [str(path), "--help"])
    importlib.import_module(path.stem)


def test_a_traced_run_replays_to_the_time_left_its_bar_showed(tiny, monkeypatch, tmp_path: Path) -> None:
    """``progress_eta.py --trace`` keeps every call the runner made on the bar's arithmetic: replayed on a fresh
    one (``eta_replay.py``), each reading gives the time left the live bar showed, so a new way of reckoning it
    can be judged on traces of busy machines without running them again."""
    from functools import partial

    from kvmagic.runner import benchmark, progress

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    progress_eta, eta_replay = importlib.import_module("progress_eta"), importlib.import_module("eta_replay")
    progress_eta.Drawn.install(monkeypatch.setattr)
    progress_eta.Traced.install(monkeypatch.setattr)
    monkeypatch.setattr(benchmark, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(benchmark, "progress_bar", partial(progress.progress_bar, tick_s=0.005))
    progress_eta.eta_line(tiny, "-n 6,12 -r 2 -w 1", 0, None, tmp_path)
    (path,) = tmp_path.glob("*.json")
    trace = json.loads(path.read_text())
    shown = [left for name, _, *args in trace["events"] if name == "read" for left in args]
    replayed = [left for _, left, _ in eta_replay.replay(trace)]
    assert {name for name, *_ in trace["events"]} == {"__init__", "update", "begin", "ran", "read"}
    assert len(replayed) == len(shown) > 0
    assert replayed == pytest.approx(shown, rel=1e-3, abs=0.05, nan_ok=True)
