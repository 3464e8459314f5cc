"""Check on one CUDA GPU what the CPU test suite can only fake, in one run that keeps what it finds.

    PYTHONPATH=. python3 benchmarks/gpu_check.py --out DIR [--deadline 480] [--no-pytest]

Each check prints one line as it finishes (PASS, FAIL, SKIP, INCONCLUSIVE or NOT RUN, then the figure
behind it), and DIR (or ``$OUT``) gets ``gpu_check.json`` and ``gpu_check.md``, rewritten after every
check. Steps run in order of value; one whose estimate no longer fits before the deadline is NOT RUN,
and one still running at the deadline is stopped there. Needs torch, transformers (4.55 or 5.x),
accelerate, pandas, matplotlib and tqdm; not IPython. Without CUDA it is a dry run: every step runs
at small sizes, what needs CUDA says SKIP with its reason, and speed figures are reported, never
judged. Exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import platform
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the GPU machine has no network: fail at once, never retry

import torch
from checklist import FAIL, Check  # beside this script
from gpu_checks import (
    checkpoint_and_collector,
    dtype_auto,
    gpu_tests,
    identity,
    out_of_memory,
    peak_source,
    synchronized_devices,
)
from gpu_compile import strategy_checks
from gpu_results import ON_CPU, ON_CUDA, Sizes
from gpu_reuse import reuse_checks
from gpu_session import Session, Step
from gpu_speed import SEED_PROMPT, seed_experiment, speed

from kvmagic import DEFAULT_MODEL, load_model
from kvmagic.model.loading import LoadedModel

# Seconds each step should take on an H200 (first figure) and in a CPU dry run (second): see
# benchmarks/README.md for how the H200 figures were estimated. A step starts only if its figure fits.
ESTIMATES = {
    "load tiny": (10, 10), "tiny identity": (5, 3), "synchronize": (15, 0), "peak": (2, 2), "checkpoint": (5, 3),
    "oom": (5, 4), "seed experiment": (30, 3), "seed identity": (5, 2), "speed": (30, 10), "reuse": (20, 8),
    "strategies": (180, 25),
    "pytest": (60, 0),
}  # fmt: skip


class Models:
    """tiny, and the seed experiment's model at its true shape (tiny stands in for it in a dry run), each
    loaded on first use, so a failed load is the failure of the step that needed it."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda

    @functools.cache  # noqa: B019  # one Models per run
    def tiny(self) -> LoadedModel:
        return load_model("tiny")

    @functools.cache  # noqa: B019
    def seed(self) -> LoadedModel:
        return load_model(DEFAULT_MODEL, random_weights=True) if self.cuda else self.tiny()


def plan(models: Models, sizes: Sizes, cuda: bool, pytest_step: bool, left: Callable[[], float]) -> list[Step]:
    """The steps, most telling per second first: quick checks of correctness, the seed experiment and the
    speed verdicts on its model, then the strategies (compiling is the slow part), then the gpu tests."""
    tiny, seed, new = models.tiny, models.seed, sizes.seed_new
    seed_name = "the seed's 1.2B shape" if cuda else "tiny"
    steps: list[tuple[str, Callable[[], Check | list[Check]]]] = [
        ("load tiny", lambda: dtype_auto(tiny(), cuda)),
        ("tiny identity", lambda: identity(f"same tokens cached or not: tiny, seed prompt, {new} new", tiny(),
                                           sizes.prompt_tokens, new)),
        ("synchronize", lambda: synchronized_devices(tiny(), sizes, cuda)),
        ("peak", lambda: peak_source(tiny(), cuda)),
        ("checkpoint", lambda: checkpoint_and_collector(tiny(), sizes)),
        ("oom", lambda: out_of_memory(tiny(), sizes)),
        ("seed experiment", lambda: seed_experiment(seed(), sizes, cuda)),
        ("seed identity", lambda: identity(f"same tokens cached or not: {seed_name}, {SEED_PROMPT}+{new}", seed(),
                                           SEED_PROMPT, new)),
        ("speed", lambda: speed(seed(), sizes, cuda)),
        ("reuse", lambda: reuse_checks(seed(), sizes, cuda)),
        ("strategies", lambda: strategy_checks(tiny(), sizes, cuda)),
        ("pytest", lambda: gpu_tests(cuda, pytest_step, max(1.0, min(300.0, left())))),
    ]  # fmt: skip
    return [Step(name, run, ESTIMATES[name][0 if cuda else 1]) for name, run in steps]


def header(cuda: bool, sizes: Sizes, deadline_s: float) -> dict[str, Any]:
    """Where and with what the run happened: device, versions, what transformers can do, the sizes."""
    import accelerate
    import transformers

    from kvmagic.measure import capabilities
    from kvmagic.measure.environment import cuda_driver
    from kvmagic.version import __version__

    return {
        "device": torch.cuda.get_device_name(0) if cuda else "no CUDA: dry run at small sizes",
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "deadline_s": deadline_s,
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                     "cuda_driver": cuda_driver(), "transformers": transformers.__version__,
                     "accelerate": accelerate.__version__, "kvmagic": __version__},
        "capabilities": capabilities.summary(),
        "sizes": asdict(sizes),
    }  # fmt: skip


def summary(checks: list[Check]) -> str:
    counts = Counter(check.status for check in checks)
    failed = [c.name for c in checks if c.status == FAIL]
    text = f"{len(checks)} checks: " + ", ".join(f"{n} {status}" for status, n in counts.items())
    return text + (f"; failed: {', '.join(failed)}" if failed else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=os.environ.get("OUT") or None, help="report folder (or $OUT)")
    parser.add_argument("--deadline", type=float, default=480.0, help="seconds for the whole run (default 480)")
    parser.add_argument("--no-pytest", action="store_true", help="skip running the tests marked gpu")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    sizes = ON_CUDA if cuda else ON_CPU
    about = header(cuda, sizes, args.deadline)
    print(f"gpu_check: {about['device']}; torch {torch.__version__}, transformers {about['versions']['transformers']}",
          flush=True)  # fmt: skip
    session = Session(args.deadline, args.out, about, echo=lambda text: print(text, flush=True))
    checks = session.run(plan(Models(cuda), sizes, cuda, not args.no_pytest, session.left))
    where = f"report in {args.out}" if args.out else "no --out or $OUT: no report written"
    print(f"\n{summary(checks)}\n{session.left():.0f} s of {args.deadline:.0f} s left; {where}", flush=True)
    return 1 if any(c.status == FAIL for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
