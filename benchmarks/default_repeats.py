"""What the default cell costs, and how often its speed-up misleads on a loaded machine: -r 1 against -r 3.

The model is SmolLM2-135M's published shape (kvmagic ships its config) cut to ``--layers`` of its 30
layers, with random weights, float32 on CPU. First the cost: rounds run the source recipe (a 4-token
warm-up of each, then one uncached and one cached ``generate`` of N tokens), ``run_benchmark`` at ``-r 1``
and at ``-r 3``, in an order that turns each round; each one's wall over the recipe's, medians over the
rounds. Then the verdicts, with ``--per-core`` busy loops per core beside them: ``--cells`` cells at
``-r 1`` and as many at ``-r 3``, alternating. The reference is the median of every pair's own speed-up
over all those cells. A ``-r 1`` cell misleads when its speed-up is more than 25% off the reference; an
``-r 3`` cell when its 95% interval leaves the reference out.

    PYTHONPATH=. python benchmarks/default_repeats.py [--layers 6] [-n 32] [--rounds 5] [--cells 10] [--per-core 2]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from pathlib import Path
from time import perf_counter
from typing import Any

import torch
from busy import busy, load_average
from cell_cost import PROMPT, recipe

from kvmagic import load_model, run_benchmark
from kvmagic.addons.random_weights.random_build import shipped_config
from kvmagic.runner.prompt import encode_prompt

OFF_BY = 0.25  # a single pair's speed-up this far from the reference misleads


def cut_model(layers: int, folder: Path) -> Any:
    config = shipped_config("HuggingFaceTB/SmolLM2-135M") or {}
    config["num_hidden_layers"] = layers
    (folder / "config.json").write_text(json.dumps(config))
    return load_model(str(folder), random_weights=True)


def cost(loaded: Any, new_tokens: int, rounds: int) -> None:
    inputs = encode_prompt(loaded, PROMPT)

    def wall(repeat: int | None) -> float:
        start = perf_counter()
        if repeat is None:
            recipe(loaded, inputs, new_tokens)
        else:
            run_benchmark(loaded, PROMPT, new_tokens=new_tokens, repeat=repeat, max_seconds=0)
        return perf_counter() - start

    wall(1), wall(None)  # one-time costs, not counted
    ratios: dict[int, list[float]] = {1: [], 3: []}
    for index in range(rounds):
        order = [None, 1, 3][index % 3 :] + [None, 1, 3][: index % 3]
        walls = {repeat: wall(repeat) for repeat in order}
        for repeat in ratios:
            ratios[repeat].append(walls[repeat] / walls[None])
    for repeat, found in ratios.items():
        each = ", ".join(f"{r:.2f}" for r in found)
        print(f"-r {repeat}: cell wall / recipe wall = {statistics.median(found):.2f} (each: {each})")


def verdicts(loaded: Any, new_tokens: int, cells: int, per_core: int) -> None:
    single: list[float] = []
    intervals: list[tuple[float, float]] = []
    pairs: list[float] = []
    with busy(per_core):
        loads = [load_average()]
        for _ in range(cells):
            for repeat in (1, 3):
                pair = run_benchmark(loaded, PROMPT, new_tokens=new_tokens, repeat=repeat, max_seconds=0).pair()
                assert pair is not None
                pairs += [u / c for u, c in pair.rounds]
                if repeat == 1:
                    single.append(pair.speedup)
                else:
                    intervals.append(pair.interval)
            loads.append(load_average())
    reference = statistics.median(pairs)
    off = sum(abs(s / reference - 1) > OFF_BY for s in single)
    missed = sum(not low <= reference <= high for low, high in intervals if math.isfinite(low))
    widths = [high / low for low, high in intervals]
    print(f"{per_core} busy loops per core, load average {min(loads):.1f}-{max(loads):.1f}; reference {reference:.2f}")
    print(f"-r 1: speed-ups {min(single):.2f} to {max(single):.2f}; {off} of {cells} more than {OFF_BY:.0%} off")
    print(
        f"-r 3: {missed} of {cells} intervals leave the reference out; high/low median {statistics.median(widths):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("-n", type=int, default=32, dest="new_tokens")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cells", type=int, default=10)
    parser.add_argument("--per-core", type=int, default=2)
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's own)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as folder:
        loaded = cut_model(args.layers, Path(folder))
        size = f"{loaded.num_parameters / 1e6:.0f} M parameters"
        print(f"SmolLM2-135M shape, {args.layers} layers, random weights: {size}, -n {args.new_tokens}")
        if args.rounds:
            print(f"load average {load_average():.1f} before the cost rounds")
            cost(loaded, args.new_tokens, args.rounds)
        if args.cells:
            verdicts(loaded, args.new_tokens, args.cells, args.per_core)


if __name__ == "__main__":
    main()
