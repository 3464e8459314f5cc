"""How close the budget's estimate comes to the run it budgets, quiet and beside a load, and how fast a
hopeless sweep is refused.

Run: ``PYTHONPATH=. python benchmarks/budget.py [--threads T] [--models tiny,smollm] [--skip-hopeless]``.

For each configuration of a grid of single runs and sweeps (on ``tiny``, and on the SmolLM2-135M shape
with random weights), ``run_benchmark`` runs twice side by side: quiet, then with one busy loop per core
(``python -c "while True: pass"``) running beside it from before the estimate to the end of the run.
Each line: the estimate (``facts.estimated_s``), the wall time of the whole ``run_benchmark``
call, what the estimate's own probes cost within it (``plan_budget``'s time), the estimate over the
whole call (target: 0.5-2x in both conditions) and over the call less its probes (what the estimate
is of: the run still to come once it exists), and the load average as the run began. Then a
hopeless sweep on ``tiny``, quiet and loaded: how long it takes to be refused, how many single
forwards that took, and the full probe at its lengths that a refusal waited for before the first
look existed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from time import perf_counter, sleep
from typing import Any

import torch

from kvmagic import KVMagicError, load_model, run_benchmark
from kvmagic.measure.costmodel_probe import probe
from kvmagic.model.loading import LoadedModel
from kvmagic.runner import benchmark, plan

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no hub: the SmolLM2 shape is built from its config
PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"  # the source experiment's prompt

GRID: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "tiny": [
        ("-n 64", {"new_tokens": 64}),
        ("-n 256", {"new_tokens": 256}),
        ("-p 512 -n 64", {"prompt_tokens": 512, "new_tokens": 64}),
        ("-n 64 -r 3", {"new_tokens": 64, "repeat": 3}),
        ("-b 4 -n 64", {"batch": 4, "new_tokens": 64}),
        ("--cache off,dynamic,static -n 64", {"cache": "off,dynamic,static", "new_tokens": 64}),
        ("-n 16,64,256 -r 3", {"new_tokens": "16,64,256", "repeat": 3}),
        ("-p 16,256 -n 16,64", {"prompt_tokens": "16,256", "new_tokens": "16,64"}),
        ("-b 1,4 -n 32", {"batch": "1,4", "new_tokens": 32}),
    ],
    "smollm": [
        ("-n 32", {"new_tokens": 32}),
        ("-n 16,64", {"new_tokens": "16,64"}),
    ],
}
STARTUP_S = 2.0
HOPELESS_PROMPT, HOPELESS_NEW = 1500, (64, 256, 512)  # -p 1500 -n 64,256,512 -r 3: past 10 min on any CPU here
HOPELESS: dict[str, Any] = {"prompt_tokens": HOPELESS_PROMPT, "new_tokens": HOPELESS_NEW, "repeat": 3}


@contextlib.contextmanager
def busy(loaded: bool) -> Iterator[None]:
    """One busy loop per core beside the block (when ``loaded``), stopped after it."""
    count = (os.cpu_count() or 1) if loaded else 0
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        sleep(STARTUP_S if loops else 0)  # the loops' interpreters up and spinning before the estimate starts
        yield
    finally:
        for loop in loops:
            loop.terminate()
        for loop in loops:
            loop.wait()


@contextlib.contextmanager
def timed_calls(module: Any, name: str, spent: list[float]) -> Iterator[None]:
    """Append each call's seconds of ``module.name`` to ``spent`` while the block runs."""
    real: Callable[..., Any] = getattr(module, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent.append(perf_counter() - start)

    setattr(module, name, timed)
    try:
        yield
    finally:
        setattr(module, name, real)


def estimate_against_actual(loaded: LoadedModel, cell: str, options: dict[str, Any], threads: int | None) -> bool:
    """One configuration quiet, then loaded: prints a table line each; whether both ratios are within 0.5-2x."""
    within = True
    for condition in ("quiet", "loaded"):
        budget: list[float] = []
        with busy(condition == "loaded"), timed_calls(benchmark, "plan_budget", budget):
            load = os.getloadavg()[0]
            start = perf_counter()
            result = run_benchmark(loaded, PROMPT, threads=threads, **options)
            actual = perf_counter() - start
        estimate = result.facts.estimated_s
        ratio, after = estimate / actual, estimate / (actual - budget[0])
        within = within and 0.5 <= ratio <= 2
        print(
            f"| {loaded.name.split(' ')[0].split('/')[-1]} | `{cell}` | {condition} | {estimate:.2f} | {actual:.2f} "
            f"| {budget[0]:.2f} | {ratio:.2f} | {after:.2f} | {load:.1f} |",
            flush=True,
        )
    return within


def refusal(loaded: LoadedModel, threads: int | None) -> None:
    """The hopeless sweep, quiet then loaded: seconds to its refusal, its forwards, and the full probe it skips."""
    cell = f"-p {HOPELESS_PROMPT} -n {','.join(map(str, HOPELESS_NEW))} -r {HOPELESS['repeat']}"
    print(f"\n### A hopeless sweep on {loaded.name}: `{cell}`\n")
    print("| condition | refused in s | single forwards | refusal says | full probe at its lengths s | load |")
    print("| --- | ---: | ---: | --- | ---: | ---: |")
    for condition in ("quiet", "loaded"):
        forwards: list[float] = []
        with busy(condition == "loaded"), timed_calls(plan, "forward_seconds", forwards):
            load = os.getloadavg()[0]
            start = perf_counter()
            try:
                run_benchmark(loaded, PROMPT, threads=threads, **HOPELESS)
                message = "not refused"
            except KVMagicError as error:
                message = str(error).split(" (estimated")[0].removeprefix("this benchmark would take ")
            refused = perf_counter() - start
            probing = full_probe(loaded, threads)
        print(f"| {condition} | {refused:.2f} | {len(forwards)} | {message} | {probing:.1f} | {load:.1f} |", flush=True)


def full_probe(loaded: LoadedModel, threads: int | None) -> float:
    """Seconds of the probe a sweep at the hopeless cell's lengths runs once its first look lets it."""
    from kvmagic.runner.prompt import stretch_prompt

    longest = HOPELESS_PROMPT + max(HOPELESS_NEW) - 1
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    inputs = stretch_prompt(loaded, PROMPT, HOPELESS_PROMPT)
    try:
        return probe(loaded, inputs, HOPELESS_PROMPT, longest).probe_s
    finally:
        torch.set_num_threads(before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, help="torch CPU threads for every run (default: torch's own)")
    parser.add_argument("--models", default="tiny,smollm", help="of: tiny, smollm (SmolLM2-135M, random weights)")
    parser.add_argument("--skip-hopeless", action="store_true", help="leave out the hopeless sweep's refusal")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} cores, threads {args.threads or torch.get_num_threads()}")
    print("\n| model | configuration | condition | estimate s | actual s | probes s | ratio | after probes | load |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    models = {"tiny": lambda: load_model("tiny"),
              "smollm": lambda: load_model("HuggingFaceTB/SmolLM2-135M", random_weights=True)}  # fmt: skip
    outside = []
    for name in args.models.split(","):
        loaded = models[name]()
        for cell, options in GRID[name]:
            if not estimate_against_actual(loaded, cell, options, args.threads):
                outside.append(f"{name} {cell}")
    print("\nevery ratio within 0.5-2x" if not outside else f"\noutside 0.5-2x: {', '.join(outside)}")
    if not args.skip_hopeless:
        refusal(load_model("tiny"), args.threads)


if __name__ == "__main__":
    main()
