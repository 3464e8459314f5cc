"""Which cache strategy to choose, on tiny: the worked example of docs/choosing.md, regenerated.

One ``--cache`` sweep over prompt lengths (``--frontier``), printed as the short table, then the paragraph that
ends its notes (``result.choice()``): the trade-off frontier at the largest configuration, each strategy's time
fitted against the context on every length but the longest and checked there, the crossovers, and the reach in
memory. On a CPU every strategy reaches tiny's 2048 positions before the machine's memory runs out, so the
paragraph is printed a second time with the memory frontier predicted in an imposed budget beyond the weights
(``--budget-mib``), as a small accelerator would leave it; the timings and the fits are the same run's.

    PYTHONPATH=. python benchmarks/choosing.py [-n 16] [-p 64,128,256,512] [-r 5] [--threads 1] [--budget-mib 10]
        [--cache off,dynamic,static,quantized:quanto,quantized:fp8]
"""

from __future__ import annotations

import argparse
import dataclasses
from importlib.metadata import version

import torch

from kvmagic import load_model, run_benchmark
from kvmagic.addons.frontier.cache_layout import layout
from kvmagic.addons.frontier.frontier_probe import measure_activations
from kvmagic.addons.frontier.reach import Frontier, frontier
from kvmagic.measure.capabilities import dynamic_cache_windows
from kvmagic.measure.shape_probe import model_shape
from kvmagic.runner.prompt import encode_prompt

PROMPT = "The KV cache stores each token's keys and values so that the next step reads them instead of recomputing."
MIB = 2**20


def budgeted(loaded, result, budget_mib: float) -> Frontier:
    """The result's memory frontier again, in ``budget_mib`` beyond the weights instead of the memory free."""
    found = result.frontier
    config = found.rows[0].config
    activations = measure_activations(loaded, encode_prompt(loaded, PROMPT)["input_ids"])
    windowed = dynamic_cache_windows()
    layouts = [layout(row.strategy, windowed_dynamic=windowed) for row in found.rows]
    rows = frontier(model_shape(loaded.model), budget_mib * MIB, activations, layouts, **config._asdict())
    return Frontier(rows, [], budget_mib * MIB, {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", default="16")
    parser.add_argument("-p", default="64,128,256,512")
    parser.add_argument("-r", type=int, default=5)
    parser.add_argument("--cache", default="off,dynamic,static,quantized:quanto,quantized:fp8")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: steadier on a shared machine)")
    parser.add_argument("--budget-mib", type=float, default=10.0, help="memory beyond the weights for the second reach")
    args = parser.parse_args()

    loaded = load_model("tiny")
    result = run_benchmark(loaded, PROMPT, new_tokens=args.n, prompt_tokens=args.p, repeat=args.r, cache=args.cache,
                           frontier="predict", threads=args.threads)  # fmt: skip
    print(f"tiny on {', '.join(map(str, loaded.devices))}, transformers {version('transformers')}, torch "
          f"{torch.__version__}, {args.threads} torch threads, -n {args.n} -p {args.p} -r {args.r}\n")  # fmt: skip
    print(result.to_markdown(short=True).split("\n\n")[0], "\n")  # the table and its footnotes, not every note
    found = result.choice()
    print("| strategy | fitted time (s) against the context L | error at the held-out length |")
    print("| --- | --- | ---: |")
    for fit in found.fits:
        print(f"| {fit.strategy} | {fit.curve.describe().replace('L', ' L')} | {fit.error:+.1%} |")
    print(f"\nIn the memory free:\n\n{found}\n")
    imposed = dataclasses.replace(found, reach=budgeted(loaded, result, args.budget_mib))
    print(f"With the memory frontier predicted in {args.budget_mib:g} MiB beyond the weights:\n\n{imposed}")


if __name__ == "__main__":
    main()
