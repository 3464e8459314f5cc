"""benchmarks/gpu_check.py as a dry run: without CUDA it runs what a CPU can and marks the rest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
NEEDS_CUDA = ("compile_s reported apart", "synchronize covers every model device", "seed shape", "pytest -m gpu")
# Checks of behaviour below the runner that a CPU can see: they must pass here.
MUST_PASS = (
    "tiny loads with dtype auto", "only static+compile compiles", "every strategy ran",
    "KV bytes = predicted (dynamic, first static)", "peak memory source", "model usable after OOM",
)  # fmt: skip
# Timings (never asserted in tests) and what the runner must do with the pieces below it.
EITHER = (
    "seed on tiny", "speed-up rises with new tokens", "later static rows sized to their own length",
    "OOM on the last configuration keeps finished rows",
)  # fmt: skip


@pytest.fixture(scope="module")
def dry_run() -> tuple[int, dict[str, tuple[str, str]], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    lines = [line for line in done.stdout.splitlines() if line[:4] in ("PASS", "FAIL", "SKIP")]
    checks = {}
    for line in lines:
        status, rest = line[:4], line[6:]
        name = next((n for n in (*NEEDS_CUDA, *MUST_PASS, *EITHER) if rest.startswith(n)), rest.split("  ")[0])
        checks[name] = (status, rest)
    return done.returncode, checks, done.stdout + done.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA, run the script itself: it is the GPU check")
def test_the_dry_run_prints_every_check_and_exits_by_its_failures(dry_run) -> None:
    code, checks, output = dry_run
    assert "no CUDA: dry run" in output
    assert set(checks) == {*NEEDS_CUDA, *MUST_PASS, *EITHER}, output
    failed = [name for name, (status, _) in checks.items() if status == "FAIL"]
    assert code == (1 if failed else 0), output
    assert f"{len(checks)} checks: {len(failed)} failed" in output


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA, run the script itself: it is the GPU check")
def test_cuda_checks_are_skipped_and_cpu_checks_pass(dry_run) -> None:
    _, checks, output = dry_run
    for name in NEEDS_CUDA:
        assert checks[name][0] == "SKIP" and "needs CUDA" in checks[name][1], output
    for name in MUST_PASS:
        assert checks[name][0] == "PASS", checks[name][1]
