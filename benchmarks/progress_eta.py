"""The progress bar's time left against the run's: the ETA at half-time, quiet and with busy loops beside it.

For each load (0, 1, 2 and 4 busy loops ``while :; do :; done`` per core) and each configuration,
``run_benchmark`` runs on tiny with its bar on (drawn to nowhere), and the bar's arithmetic is read each
time its thread redraws it (every second). Per line: the load average as the run began, the estimate when
the bar opened against the wall time from then to the end (what a bar that holds to its first estimate
shows), and the time left the bar showed at half of that wall time against what then remained (target:
0.5-2x). Then the bar's cost: the timed runs' medians with the bar redrawn every second, and every 10 ms,
each over those of a run without it, side by side in alternating rounds.

    PYTHONPATH=. python benchmarks/progress_eta.py [--loads 0,1,2,4] [--longest 48] [--threads T] [--rounds 7]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
from functools import partial
from time import perf_counter
from typing import Any, ClassVar

import torch
from busy import busy, load_average

from kvmagic import load_model, run_benchmark
from kvmagic.runner import benchmark
from kvmagic.runner.progress import Eta, progress_bar

PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"


def configs(longest: int) -> dict[str, dict[str, Any]]:
    """One long configuration, and a sweep up to it in thirds."""
    sweep = [longest // 3, 2 * longest // 3, longest]
    return {f"-n {longest}": {"new_tokens": longest}, f"-n {','.join(map(str, sweep))}": {"new_tokens": sweep}}


class Recorded(Eta):
    """The bar's arithmetic, each reading kept with the moment it was made."""

    made: ClassVar[list[Recorded]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[tuple[float, float]] = []
        Recorded.made.append(self)

    def now(self) -> tuple[float, float]:
        share, left = super().now()
        self.seen.append((perf_counter(), left))
        return share, left


def eta_line(loaded: Any, label: str, options: dict[str, Any], per_core: int) -> str:
    Recorded.made.clear()
    with busy(per_core):
        load = load_average()
        with contextlib.redirect_stderr(io.StringIO()):
            run_benchmark(loaded, PROMPT, progress=True, **options)
        end = perf_counter()
    (eta,) = Recorded.made
    if not eta.seen:
        raise SystemExit(f"{label} ended before the bar's first redraw (1 s): give --longest more tokens")
    opened, first = eta.seen[0]
    wall = end - opened
    at, shown = min(eta.seen, key=lambda seen: abs(seen[0] - opened - wall / 2))
    return (
        f"| {per_core}x | {load:.1f} | `{label}` | {first:.1f} | {wall:.1f} | {first / wall:.2f} | "
        f"{at - opened:.1f} | {shown:.1f} | {end - at:.1f} | {shown / (end - at):.2f} |"
    )


def bar_cost(loaded: Any, rounds: int) -> None:
    """Timed runs' medians with the bar's thread redrawing every ``tick`` against none, alternating."""

    def medians(tick: float | None) -> float:
        if tick is not None:
            benchmark.progress_bar = partial(progress_bar, tick_s=tick)  # type: ignore[assignment]
        with contextlib.redirect_stderr(io.StringIO()):
            result = run_benchmark(loaded, PROMPT, new_tokens=16, repeat=3, progress=tick is not None, max_seconds=0)
        benchmark.progress_bar = progress_bar
        return sum(m.median_s for m in result.measurements)

    ratios: dict[float, list[float]] = {1.0: [], 0.01: []}
    for index in range(rounds):
        for tick in ratios if index % 2 else reversed(list(ratios)):
            plain = medians(None)
            ratios[tick].append(medians(tick) / plain)
    for tick, found in ratios.items():
        each = ", ".join(f"{r:.3f}" for r in found)
        print(f"redrawn every {tick:g} s: timed medians over none = {statistics.median(found):.3f} (each: {each})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", default="0,1,2,4", help="busy loops per core, one condition each")
    parser.add_argument("--longest", type=int, default=48, help="new tokens of the longest run (a quiet machine: 400)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's own)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of the bar's cost; 0 skips it")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded = load_model("tiny")
    benchmark.Eta = Recorded  # type: ignore[misc]
    run_benchmark(loaded, PROMPT, new_tokens=8)  # one-time costs
    print("| loops per core | load avg | run | first estimate s | wall s | first / wall | half-time s | "
          "shown left s | actual left s | shown / actual |")  # fmt: skip
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for per_core in (int(n) for n in args.loads.split(",")):
        for label, options in configs(args.longest).items():
            print(eta_line(loaded, label, options, per_core), flush=True)
    if args.rounds:
        bar_cost(loaded, args.rounds)


if __name__ == "__main__":
    main()
