"""Does kvmagic's timing add anything? Its own timed runs against the source experiment's bare recipe.

In one process, on the same model and input, rounds alternate the two: ``measure_rounds()`` (the code
``%%kvbench`` times with) and the recipe (``perf_counter`` around ``model.generate``, synchronized).
Each round flips which goes first, so drift and order hit both alike. Prints kvmagic/bare per
strategy, as a ratio of medians and as the median of each round's ratio (rounds are adjacent in
time, so that one is less exposed to slow drift); the target is within 2%.

    PYTHONPATH=. python benchmarks/harness_overhead.py [--pairs 11] [-n 16] [--threads T] [--model tiny]
"""

from __future__ import annotations

import argparse
import statistics
from time import perf_counter

import torch

from kvmagic import load_model
from kvmagic.core.stop import FixedRounds
from kvmagic.core.strategy import PAIR, Strategy
from kvmagic.measure.accelerator import synchronize
from kvmagic.measure.strategies import plain_pair
from kvmagic.results.benchmark_record import PAIR_NAMES
from kvmagic.runner.prompt import encode_prompt
from kvmagic.runner.rounds import measure_rounds, warm_up

PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"


def bare_recipe(model, inputs, new_tokens: int, use_cache: bool, devices) -> float:
    """The source experiment's measure_generation, with its CUDA synchronize generalized."""
    synchronize(devices)
    start = perf_counter()
    with torch.inference_mode():
        model.generate(
            **inputs, min_new_tokens=new_tokens, max_new_tokens=new_tokens, do_sample=False, num_beams=1,
            use_cache=use_cache,
        )  # fmt: skip
    synchronize(devices)
    return perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--pairs", type=int, default=11)
    parser.add_argument("-n", "--new-tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, help="torch CPU threads; 1 steadies timings on a busy machine")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    loaded = load_model(args.model)
    inputs = encode_prompt(loaded, PROMPT)
    warm_up(loaded, inputs, 4)
    times: dict[tuple[str, Strategy], list[float]] = {(who, s): [] for who in ("kvmagic", "bare") for s in PAIR}

    def kvmagic_round() -> None:
        for m in measure_rounds(loaded, inputs, new_tokens=args.new_tokens, stop=FixedRounds(1)):
            times["kvmagic", m.strategy] += m.seconds

    def bare_round() -> None:
        for strategy in plain_pair(loaded):
            use_cache = strategy.settings["use_cache"]
            seconds = bare_recipe(loaded.model, inputs, args.new_tokens, use_cache, loaded.devices)
            times["bare", strategy.strategy].append(seconds)

    for index in range(args.pairs):
        for step in (kvmagic_round, bare_round) if index % 2 == 0 else (bare_round, kvmagic_round):
            step()

    tokens = f"{inputs['input_ids'].shape[-1]}+{args.new_tokens} tokens"
    devices = ", ".join(map(str, loaded.devices))
    print(f"{args.model}, {tokens}, {args.pairs} pairs, on {devices}, {torch.get_num_threads()} torch threads")
    for strategy in PAIR:
        ours, bare = times["kvmagic", strategy], times["bare", strategy]
        per_round = statistics.median(o / b for o, b in zip(ours, bare))
        print(
            f"{PAIR_NAMES[strategy]:>8}: kvmagic/bare = {statistics.median(ours) / statistics.median(bare):.3f} "
            f"(median of per-round ratios {per_round:.3f}; medians {statistics.median(ours):.4f} s "
            f"/ {statistics.median(bare):.4f} s)"
        )


if __name__ == "__main__":
    main()
