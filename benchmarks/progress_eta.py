"""The progress bar's time left against what actually remained, and its longest freeze, quiet and beside busy loops.

For each load (0, 1, 2 and 4 busy loops ``while :; do :; done`` per core: the machine 1x, 2x and 4x
oversubscribed beside torch's own threads), one ``run_benchmark`` of each cell runs on tiny with its bar on (drawn
to nowhere) and the default budget, and every time the bar's thread redraws it, the time left it showed and the
moment are kept. Per line: the load average as the run began, the run's wall time, and from the moment a tenth of
the run's wall had passed, the lowest and highest ratio of the time left shown to what then remained (target:
0.5-2x), at half-time too, and the longest gap between two redraws (target: at most 2 s at 2x). Then the longest
gap while one tensor operation of ``--op-seconds`` runs on the main thread, beside 2 busy loops per core; and the
bar's cost: a tiny ``-n 16 -r 3`` run's timed medians with the bar redrawn every second, and every 10 ms, over
those of a run without it, in ``--rounds`` alternating rounds.

    PYTHONPATH=. python benchmarks/progress_eta.py [--loads 0,1,2,4] [--cells "-n 16,64,128 -r 3;-n 256"]
                                                   [--threads T] [--op-seconds 6] [--rounds 7]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import statistics
import threading
from collections.abc import Callable
from functools import partial
from itertools import pairwise
from pathlib import Path
from time import perf_counter
from typing import Any, ClassVar

import torch
from busy import busy, load_average

from kvmagic import load_model, run_benchmark
from kvmagic.runner import benchmark, progress
from kvmagic.runner.progress import Bar

PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"
TENTH = 0.1  # the ratio counts from the moment this share of the run's wall has passed
NEAR_END_S = 2.0  # readings with less than this left are left out of the ratio: one tick's error is a large share


class Drawn:
    """Every redraw of the bar by its own thread: the moment, and the time left it showed."""

    seen: ClassVar[list[tuple[float, float]]] = []

    @classmethod
    def install(cls, patch: Callable[[Any, str, Any], None] = setattr) -> None:
        real = Bar.draw

        def draw(bar: Bar) -> None:
            real(bar)
            left = bar.eta.now()[1] if bar.eta is not None else float("nan")
            if threading.current_thread() is not threading.main_thread():
                cls.seen.append((now := perf_counter(), left))
                Traced.events.append(["read", now, left])

        patch(Bar, "draw", draw)


class Traced:
    """Every call the runner makes on the bar's :class:`Eta` and every reading of it, with its moment: a run's
    trace, from which another way to reckon the time left can be replayed (``--trace``)."""

    events: ClassVar[list[list[Any]]] = []

    @classmethod
    def install(cls, patch: Callable[[Any, str, Any], None] = setattr) -> None:
        def wrap(name: str, args: Callable[..., list[Any]]) -> None:
            real = getattr(progress.Eta, name)

            def traced(eta: progress.Eta, *given: Any, **named: Any) -> Any:
                cls.events.append([name, perf_counter(), *args(*given, **named)])
                return real(eta, *given, **named)

            patch(progress.Eta, name, traced)

        def runs(given: Any) -> list[dict[str, float]]:
            return [{str(s): seconds for s, seconds in each.items()} for each in given]

        wrap("__init__", lambda given, rounds, ends_by=None, clock=None: [runs(given), rounds, ends_by])
        wrap("update", lambda given: [runs(given)])
        wrap("begin", lambda index, names: [index, [str(n) for n in names]])
        wrap("ran", lambda seconds: [seconds])


def options(cell: str) -> dict[str, Any]:
    """``-n 16,64 -r 3`` as run_benchmark's keywords."""
    names = {"-n": "new_tokens", "-r": "repeat", "-p": "prompt_tokens", "-w": "warmup_tokens"}
    words = shlex.split(cell)
    return {names[flag]: int(value) if value.isdigit() else value for flag, value in zip(words[::2], words[1::2])}


def eta_line(loaded: Any, cell: str, per_core: int, threads: int | None, trace: Path | None = None) -> str:
    Drawn.seen.clear()
    Traced.events.clear()
    with busy(per_core):
        load = load_average()
        start = perf_counter()
        with contextlib.redirect_stderr(io.StringIO()):
            run_benchmark(loaded, PROMPT, progress=True, threads=threads, **options(cell))
        end = perf_counter()
    wall = end - start
    if trace is not None:
        trace.mkdir(parents=True, exist_ok=True)
        name = f"{per_core}x {cell}".replace(" ", "_").replace(",", "-")
        kept = {"load": load, "cell": cell, "per_core": per_core, "start": start, "end": end, "events": Traced.events}
        (trace / f"{name}.json").write_text(json.dumps(kept))
    times = [start, *(t for t, _ in Drawn.seen), end]
    longest_gap = max(b - a for a, b in pairwise(times[1:-1])) if len(times) > 3 else float("nan")
    ratios = [(t, left / (end - t)) for t, left in Drawn.seen if t - start >= TENTH * wall and end - t >= NEAR_END_S]
    if not ratios:
        return f"| {per_core}x | {load:.1f} | `{cell}` | {wall:.1f} | (too short for a reading) | | | |"
    low, high = min(r for _, r in ratios), max(r for _, r in ratios)
    _, half = min(ratios, key=lambda seen: abs(seen[0] - start - wall / 2))
    return (
        f"| {per_core}x | {load:.1f} | `{cell}` | {wall:.1f} | {low:.2f} | {high:.2f} | {half:.2f} | "
        f"{longest_gap:.2f} |"
    )


def op_freeze(op_seconds: float, per_core: int) -> str:
    """The longest gap between redraws while one matrix product of about ``op_seconds`` holds the main thread."""
    size = 256
    a = torch.randn(size, size)
    started = perf_counter()
    torch.mm(a, a)
    while perf_counter() - started < 0.05:  # grow the product until one takes a measurable time
        size *= 2
        a = torch.randn(size, size)
        started = perf_counter()
        torch.mm(a, a)
    one = perf_counter() - started
    scale = max(1.0, (op_seconds / one) ** (1 / 3))
    a = torch.randn(int(size * scale), int(size * scale))
    Drawn.seen.clear()
    with busy(per_core), progress.progress_bar(enabled=True, delay_s=0.0) as bar:
        bar.eta = progress.Eta([], 1)
        with contextlib.redirect_stderr(io.StringIO()):
            time_started = perf_counter()
            torch.mm(a, a)
            took = perf_counter() - time_started
    times = [time_started, *(t for t, _ in Drawn.seen if t >= time_started), time_started + took]
    gap = max(b - a for a, b in pairwise(times))
    return f"one {a.shape[0]}x{a.shape[0]} product of {took:.1f} s beside {per_core}x load: longest gap {gap:.2f} s"


def bar_cost(loaded: Any, rounds: int, threads: int | None) -> None:
    """Timed runs' medians with the bar's thread redrawing every ``tick`` against none, alternating."""

    def medians(tick: float | None) -> float:
        if tick is not None:
            benchmark.progress_bar = partial(progress.progress_bar, tick_s=tick)  # type: ignore[assignment]
        with contextlib.redirect_stderr(io.StringIO()):
            result = run_benchmark(loaded, PROMPT, new_tokens=16, repeat=3, progress=tick is not None, max_seconds=0,
                                   threads=threads)  # fmt: skip
        benchmark.progress_bar = progress.progress_bar
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
    parser.add_argument("--cells", default="-n 16,64,128 -r 3;-n 256", help="cells to run at each load, ';' apart")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's own)")
    parser.add_argument("--op-seconds", type=float, default=6.0, help="the long tensor operation; 0 skips it")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of the bar's cost; 0 skips it")
    parser.add_argument("--trace", type=Path, help="a folder: each line's run traced there, to replay (eta_replay.py)")
    args = parser.parse_args()
    loaded = load_model("tiny")
    Drawn.install()
    if args.trace is not None:
        Traced.install()
    run_benchmark(loaded, PROMPT, new_tokens=8)  # one-time costs
    print(f"torch {torch.__version__}, threads {args.threads or torch.get_num_threads()}\n")
    print("| loops per core | load avg | cell | wall s | lowest shown / left | highest | at half-time | "
          "longest gap between redraws s |")  # fmt: skip
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for per_core in (int(n) for n in args.loads.split(",")):
        for cell in args.cells.split(";"):
            print(eta_line(loaded, cell.strip(), per_core, args.threads, args.trace), flush=True)
    if args.op_seconds:
        print("\n" + op_freeze(args.op_seconds, 2))
    if args.rounds:
        print()
        bar_cost(loaded, args.rounds, args.threads)


if __name__ == "__main__":
    main()
