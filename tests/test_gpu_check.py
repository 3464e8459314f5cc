"""benchmarks/gpu_check.py: its dry run without CUDA, its deadline, its report, and its verdict rules."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from kvmagic.measure import capabilities

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))  # the script's modules import each other by bare name

import gpu_checks  # noqa: E402
import gpu_compile  # noqa: E402
from checklist import FAIL, INCONCLUSIVE, NOT_RUN, PASS, SKIP, Check, speed_verdict  # noqa: E402
from gpu_report import JSON_NAME, MARKDOWN_NAME  # noqa: E402
from gpu_session import Session, Step  # noqa: E402
from gpu_speed import _rises  # noqa: E402

NEEDS_CUDA = (
    "synchronize covers every model device, probe included", "seed experiment at its true size runs (a figure, not judged)",
    "compile_s on the compiled rows only", "compiles only in each length's first, untimed call", "pytest -m gpu",
)  # fmt: skip
SPEED = (  # reported, never judged
    "cached faster at 64+16 (tiny)", "speed-up rises from 4 to 16 new tokens at 64",
    "a reused prefix of 48 tokens makes the run faster (tiny, 64+16)",
)  # fmt: skip
MUST_PASS = (
    "tiny loads with dtype auto", "same tokens cached or not: tiny, seed prompt, 8 new", "peak memory source",
    "a checkpoint's cache_implementation stays out of the cached row", "garbage collector off in every generate",
    "OOM on the last configuration keeps finished rows", "model usable after OOM", "same tokens cached or not: tiny, 16+8",
    "only the +compile strategies compile", "every available strategy ran",
    "KV bytes = predicted (dynamic, first static)", "later static rows sized to their own length",
    "quality: the full cache scores exactly 1/0/1 (tiny, 64+16)",
)  # fmt: skip
# The script as `python3 benchmarks/gpu_check.py --out DIR` runs it, then whether anything it imported pulled in
# IPython (the GPU machine has none).
RUN = """import runpy, sys
sys.path.insert(0, "benchmarks")
sys.argv = ["benchmarks/gpu_check.py", "--out", sys.argv[1]]
try:
    runpy.run_path("benchmarks/gpu_check.py", run_name="__main__")
except SystemExit:
    print("IPython imported:", "IPython" in sys.modules)
    raise
"""
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA, run the script itself: it is the GPU check")


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> tuple[int, dict, str, str]:
    out = tmp_path_factory.mktemp("gpu_check")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", RUN, str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    report = json.loads((out / JSON_NAME).read_text(encoding="utf-8"))
    return done.returncode, report, (out / MARKDOWN_NAME).read_text(encoding="utf-8"), done.stdout + done.stderr


@NO_CUDA
def test_the_dry_run_reports_every_check_and_fails_none(dry_run) -> None:
    code, report, markdown, output = dry_run
    checks = {c["name"]: c for c in report["checks"]}
    assert set(checks) == {*NEEDS_CUDA, *SPEED, *MUST_PASS, "strategies not available here"}, output
    assert code == 0 and not [c for c in checks.values() if c["status"] not in (PASS, SKIP)], output
    assert "IPython imported: False" in output
    for name in MUST_PASS:
        assert checks[name]["status"] == PASS, checks[name]["figure"]
    for name in checks:
        assert f" {name} " in markdown and f"  {name}  " in output  # a table row, and its line as it finished
    assert report["versions"]["transformers"] == capabilities.transformers_version()
    assert report["capabilities"] == json.loads(json.dumps(capabilities.summary()))


@NO_CUDA
def test_what_needs_cuda_is_skipped_with_its_reason_and_speed_is_not_judged(dry_run) -> None:
    _, report, _, _ = dry_run
    checks = {c["name"]: c for c in report["checks"]}
    for name in NEEDS_CUDA:
        assert checks[name]["status"] == SKIP and "needs CUDA" in checks[name]["figure"]
    for name in SPEED:
        assert checks[name]["status"] == SKIP and "judged only on CUDA; dry run: " in checks[name]["figure"]
    assert "95% interval [" in checks[SPEED[0]]["figure"] and "over 3 pairs" in checks[SPEED[0]]["figure"]
    assert "same tokens as cold: True" in checks[SPEED[2]]["figure"]
    assert "dynamic: agreement 1, KL 0, ppl ratio 1" in checks[MUST_PASS[-1]]["figure"]
    unavailable = checks["strategies not available here"]["figure"]
    assert "quantized:fp8: " + capabilities.quantized_backend_reason("fp8") in unavailable or "fp8" not in unavailable
    rows = {r["strategy"] for r in checks["every available strategy ran"]["rows"]}
    assert {"off", "dynamic", "static", "quantized:fp8", "static+compile"} <= rows  # every row kept, noted or not


def _steps(clock: list[float], spent: list[float]) -> list[Step]:
    def step(index: int, seconds: float) -> Step:
        def run() -> Check:
            clock[0] += seconds
            return Check(f"check {index}", PASS, f"took {seconds} s")

        return Step(f"step {index}", run, estimate_s=10)

    return [step(i, seconds) for i, seconds in enumerate(spent)]


def test_a_step_that_no_longer_fits_is_not_run_and_the_report_keeps_what_finished(tmp_path) -> None:
    clock = [0.0]
    session = Session(100, tmp_path, {"device": "fake"}, clock=lambda: clock[0], echo=lambda text: None)
    checks = session.run(_steps(clock, [50, 45, 1, 1]))  # 5 s left after two: neither 10 s step fits
    assert [(c.name, c.status) for c in checks] == [
        ("check 0", PASS), ("check 1", PASS), ("step 2", NOT_RUN), ("step 3", NOT_RUN)
    ]  # fmt: skip
    report = json.loads((tmp_path / JSON_NAME).read_text(encoding="utf-8"))
    assert [c["status"] for c in report["checks"]] == [PASS, PASS, NOT_RUN, NOT_RUN]
    assert report["checks"][2]["figure"] == "about 10 s needed, 5 s left"


def test_a_step_still_running_at_the_deadline_is_stopped_there(tmp_path) -> None:
    def forever() -> Check:
        while True:
            time.sleep(0.01)

    steps = [Step("quick", lambda: Check("quick", PASS, ""), 0), Step("slow", forever, 0), Step("after", list, 0)]
    lines: list[str] = []
    checks = Session(1.0, tmp_path, {}, echo=lines.append).run(steps)
    assert [(c.name, c.status) for c in checks] == [("quick", PASS), ("slow", NOT_RUN), ("after", NOT_RUN)]
    assert checks[1].figure.startswith("stopped at the deadline") and "into 'slow'" in checks[1].figure
    assert len(lines) == 3 and lines[1].startswith("NOT RUN")
    report = json.loads((tmp_path / JSON_NAME).read_text(encoding="utf-8"))
    assert [c["status"] for c in report["checks"]] == [PASS, NOT_RUN, NOT_RUN]


@pytest.mark.parametrize(
    ("interval", "status"),
    [((1.05, 1.4), PASS), ((0.7, 0.98), FAIL), ((0.9, 1.2), INCONCLUSIVE), ((math.nan, math.nan), INCONCLUSIVE)],
)
def test_a_speed_verdict_needs_the_whole_interval_on_one_side(interval: tuple[float, float], status: str) -> None:
    assert speed_verdict("faster", interval, 1.0, "figure").status == status


@pytest.mark.parametrize(
    ("fewer", "more", "status"),
    [((1.1, 1.3), (1.4, 2.0), PASS), ((1.4, 2.0), (1.1, 1.3), FAIL), ((1.1, 1.5), (1.4, 2.0), INCONCLUSIVE)],
)
def test_a_rise_needs_the_intervals_apart(fewer, more, status: str) -> None:
    assert _rises("rises", fewer, more, "figure").status == status


def _runs(tokens: list[list[int]], margins: list[list[float]]):
    runs = iter(
        SimpleNamespace(output=torch.tensor([[9, 9, *ids]]), margins=m) for ids, m in zip(tokens, margins, strict=True)
    )
    return lambda *args, **kwargs: next(runs)


@pytest.mark.parametrize(
    ("second", "margins", "status", "says"),
    [
        ([1, 2, 3], [[0.5, 0.4, 0.3], [0.5, 0.4, 0.3]], PASS, "identical over 3 tokens; smallest top-2 margin 0.3"),
        ([1, 2, 4], [[0.5, 0.4, 0.003], [0.498, 0.402, 0.001]], PASS, "a near tie"),
        ([1, 2, 4], [[0.5, 0.4, 0.9], [0.498, 0.402, 0.7]], FAIL, "a clear choice apart"),
        ([5, 2, 3], [[0.001, 0.4, 0.3], [0.001, 0.4, 0.3]], FAIL, "part at step 0"),  # one forward, two answers
    ],
)
def test_a_token_mismatch_is_judged_by_its_margin(tiny, monkeypatch, second, margins, status: str, says: str) -> None:
    monkeypatch.setattr(gpu_checks, "profiled_generate", _runs([[1, 2, 3], second], margins))
    check = gpu_checks.identity("same tokens", tiny, 2, 3)
    assert check.status == status and says in check.figure, check.figure


def _call(new_tokens: int, graphs: int, recordings: int) -> dict:
    return {"strategy": "static+compile", "new_tokens": new_tokens, "asked": True, "compiled": True,
            "graphs": graphs, "recordings": recordings}  # fmt: skip


@pytest.mark.parametrize(
    ("calls", "status"),
    [
        ([_call(64, 3, 1), _call(64, 0, 0), _call(16, 2, 1), _call(16, 0, 0)], PASS),  # 64 -> 16 compiles, untimed
        ([_call(64, 3, 1), _call(64, 0, 1)], FAIL),  # a timed run re-recorded its CUDA graph
        ([_call(64, 3, 1), _call(16, 0, 0), _call(16, 1, 0)], FAIL),  # a timed run recompiled
    ],
)
def test_a_compiled_strategy_compiles_only_in_its_first_call_at_a_length(calls: list[dict], status: str) -> None:
    assert gpu_compile._no_recompiles(calls).status == status


def test_compile_seconds_belong_to_the_compiled_rows_only() -> None:
    rows = [{"strategy": "static", "new_tokens": 64, "compile_s": math.nan},
            {"strategy": "static+compile", "new_tokens": 64, "compile_s": 21.5}]  # fmt: skip
    assert gpu_compile._compile_seconds(rows, {}).status == PASS
    rows[0]["compile_s"] = 0.1
    assert gpu_compile._compile_seconds(rows, {}).status == FAIL
