"""The budget as a deadline on a machine with other work running: how far the warm-up's projection of a cell's first
run lands from that run, what the probing before the first timed run costs, and the new user's cells under load.

Three parts, each printing a Markdown table:

- ``projection``: at each load (busy loops ``while :; do :; done`` per core beside the run), a grid of cells on
  tiny and on the SmolLM2-135M shape with random weights, each stopped once its first timed run has ended; per
  cell, that run as the warm-up (or, with ``-w 0``, the two-token probe) projected it, against what it took. The
  refusal's factor (``FAR_PAST``) must lie past every ratio: a first run projected that far past the budget is
  one the machine would not have made good.
- ``probe``: the default cell (``-n 64``) quiet, alternating with the cell run without a budget (no probe), on tiny
  and on SmolLM2-135M: the seconds before its first timed run, what of them was probing beyond the warm-up, and
  the cell's wall (target: probing at most 5% of it).
- ``user``: with one busy loop per core, the README's former sweep ``-n 16,64,256 -r 3`` and ``-n 300 -w 0``
  under the default budget (neither refused), the sweep with ``--max-seconds 60`` (target: ends within 90 s, with
  its finished rows and the line naming what it left out), and the README's sweep now, ``-n 16,64,128 -r 3``.

    PYTHONPATH=. python benchmarks/deadline.py [--part projection,probe,user] [--loads 0,1,2,4]
                                               [--models tiny,smollm] [--cells "-n 64;-n 256"] [--threads T]
"""

from __future__ import annotations

import argparse
import contextlib
import os
from time import perf_counter
from typing import Any

import torch
from busy import busy, load_average

from kvmagic import KVMagicError, load_model, run_benchmark
from kvmagic.core.deadline import FAR_PAST
from kvmagic.model.loading import LoadedModel
from kvmagic.runner import benchmark
from kvmagic.runner.deadline_run import Deadline

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no hub: the SmolLM2 shape is built from its config
PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"  # the source experiment's prompt
SMOLLM = "HuggingFaceTB/SmolLM2-135M"
GRID: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "tiny": [
        ("-n 64", {"new_tokens": 64}),
        ("-n 256", {"new_tokens": 256}),
        ("-n 300 -w 0", {"new_tokens": 300, "warmup_tokens": 0}),
        ("-n 64 -w 0", {"new_tokens": 64, "warmup_tokens": 0}),
        ("-n 16,64,256 -r 3", {"new_tokens": "16,64,256", "repeat": 3}),
    ],
    "smollm": [("-n 32", {"new_tokens": 32}), ("-n 64 -w 0", {"new_tokens": 64, "warmup_tokens": 0})],
}
SWEEP = {"new_tokens": "16,64,256", "repeat": 3}


class Enough(Exception):
    """The first timed run has ended: all the projection part reads of a cell."""


class Watched(Deadline):
    """The deadline, keeping the first timed run's projection before it started and its seconds once it ended
    (then, with ``first_only``, ending the cell)."""

    last: Watched | None = None
    first_only = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.projected = self.first_s = float("nan")
        self.first_timed_at = float("nan")
        Watched.last = self

    def starts(self, config: Any, strategies: Any) -> bool:
        if not self.timed and self.projected != self.projected:
            self.projected = self.run(strategies[0], config)
        return super().starts(config, strategies)

    def saw(self, strategy: Any, config: Any, seconds: float, *, timed: bool = False) -> None:
        first = timed and not self.timed
        if first:
            self.first_s, self.first_timed_at = seconds, self.clock() - seconds
        super().saw(strategy, config, seconds, timed=timed)
        if first and self.first_only:
            raise Enough


def models(names: str) -> dict[str, LoadedModel]:
    found = {"tiny": lambda: load_model("tiny"), "smollm": lambda: load_model(SMOLLM, random_weights=True)}
    return {name: found[name]() for name in names.split(",")}


def projection(loaded: dict[str, LoadedModel], loads: list[int], cells: list[str], threads: int | None) -> float:
    """The grid at each load, each cell to its first timed run; returns the largest projection over that run."""
    print("| load | model | cell | load avg | first run projected s | took s | projected / took |")
    print("| ---: | --- | --- | ---: | ---: | ---: | ---: |")
    worst, Watched.first_only = 0.0, True
    for per_core in loads:
        for name, model in loaded.items():
            for cell, options in GRID[name]:
                if cells and cell not in cells:
                    continue
                with busy(per_core):
                    average = load_average()
                    with contextlib.suppress(Enough):
                        run_benchmark(model, PROMPT, threads=threads, max_seconds=1e6, **options)
                seen = Watched.last
                assert seen is not None
                ratio = seen.projected / seen.first_s
                worst = max(worst, ratio)
                print(f"| {per_core}x | {name} | `{cell}` | {average:.1f} | {seen.projected:.2f} | "
                      f"{seen.first_s:.2f} | {ratio:.2f} |", flush=True)  # fmt: skip
    Watched.first_only = False
    print(f"\nlargest first-run projection / run: {worst:.2f} (FAR_PAST is {FAR_PAST:g})")
    return worst


def probe_cost(loaded: dict[str, LoadedModel], rounds: int, threads: int | None) -> None:
    """The default cell with its budget (the warm-up its probe) against the same cell with none, alternating."""
    print("| model | cell | before the first timed run s | of it probing beyond the warm-up s | wall s | "
          "probing / wall | wall / wall without a budget |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    probed: list[float] = []
    real = benchmark.probe_two_tokens

    def timed_probe(*args: Any) -> Any:
        start = perf_counter()
        try:
            return real(*args)
        finally:
            probed.append(perf_counter() - start)

    benchmark.probe_two_tokens = timed_probe  # type: ignore[assignment]
    for name, model in loaded.items():
        run_benchmark(model, PROMPT, new_tokens=8, threads=threads)  # one-time costs
        for index in range(rounds):
            budgets = (600.0, 0.0) if index % 2 else (0.0, 600.0)
            walls = {}
            for budget in budgets:
                probed.clear()
                start = perf_counter()
                run_benchmark(model, PROMPT, max_seconds=budget, threads=threads)
                walls[budget] = perf_counter() - start
                if budget:
                    seen = Watched.last
                    assert seen is not None
                    before = seen.first_timed_at - seen.started
            extra = sum(probed)
            print(f"| {name} | `-n 64` (round {index + 1}) | {before:.3f} | {extra:.3f} | {walls[600.0]:.2f} | "
                  f"{extra / walls[600.0]:.1%} | {walls[600.0] / walls[0.0]:.3f} |", flush=True)  # fmt: skip
    benchmark.probe_two_tokens = real


def new_user(tiny: LoadedModel, threads: int | None) -> None:
    """The issue's cells as a new user types them, beside one busy loop per core."""
    print("| cell | load avg | wall s | rows | outcome | first note, or the error |")
    print("| --- | ---: | ---: | --- | --- | --- |")
    cells = [
        ("-n 16,64,256 -r 3", SWEEP),
        ("-n 300 -w 0", {"new_tokens": 300, "warmup_tokens": 0}),
        ("-n 16,64,256 -r 3 --max-seconds 60", {**SWEEP, "max_seconds": 60}),
        ("-n 16,64,128 -r 3", {"new_tokens": "16,64,128", "repeat": 3}),  # the README's sweep now
    ]
    for cell, options in cells:
        with busy(1):
            average = load_average()
            start = perf_counter()
            try:
                result = run_benchmark(tiny, PROMPT, threads=threads, **options)
                rows, outcome = ", ".join(str(c.new_tokens) for c in result.configs), "ran"
                note = next(iter(result.notes()), "")
            except KVMagicError as error:
                said = str(error)
                rows, outcome, note = "", "ran, none finished" if said.startswith("nothing") else "refused", said
            wall = perf_counter() - start
        print(f"| `{cell}` | {average:.1f} | {wall:.1f} | {rows} | {outcome} | {note} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="projection,probe,user", help="of: projection, probe, user")
    parser.add_argument("--loads", default="0,1,2,4", help="busy loops per core, one condition each (projection)")
    parser.add_argument("--models", default="tiny,smollm", help="of: tiny, smollm (SmolLM2-135M, random weights)")
    parser.add_argument("--cells", default="", help="the grid's cells to run, ';' apart (default: all)")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds of the probe's cost")
    parser.add_argument("--threads", type=int, help="torch CPU threads for every run (default: torch's own)")
    args = parser.parse_args()
    benchmark.Deadline = Watched  # type: ignore[misc]
    print(f"torch {torch.__version__}, {os.cpu_count()} cores, threads {args.threads or torch.get_num_threads()}")
    loaded = models(args.models)
    parts = args.part.split(",")
    if "projection" in parts:
        print("\n### The first run's projection\n")
        cells = [cell.strip() for cell in args.cells.split(";") if cell.strip()]
        projection(loaded, [int(n) for n in args.loads.split(",")], cells, args.threads)
    if "probe" in parts:
        print("\n### What the estimate costs\n")
        probe_cost(loaded, args.rounds, args.threads)
    if "user" in parts:
        print("\n### A new user's cells beside one busy loop per core\n")
        new_user(loaded.get("tiny") or load_model("tiny"), args.threads)


if __name__ == "__main__":
    main()
