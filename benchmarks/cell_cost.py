"""What one %%kvbench costs: its wall time against the source recipe's, and against its own generate calls.

In one process, on the same model and prompt, rounds alternate (each round flipping which goes first)
a real ``%%kvbench`` cell and the source experiment's recipe: a 4-token warm-up of each strategy,
then one uncached and one cached ``generate`` of N tokens, synchronized and timed. Prints the cell's
wall over the recipe's (median of the rounds' ratios; the target for the default cell is <= 1.15),
and the cell's wall over the time spent inside its ``generate`` calls (what kvmagic adds around them).

    PYTHONPATH=. python benchmarks/cell_cost.py [--rounds 5] [--flags "-n 64"] [--model tiny]
    PYTHONPATH=. python benchmarks/cell_cost.py --model HuggingFaceTB/SmolLM2-135M --random-weights
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
from time import perf_counter

import torch
from IPython.core.interactiveshell import InteractiveShell

from kvmagic import load_model
from kvmagic.measure.accelerator import synchronize
from kvmagic.runner.prompt import encode_prompt

PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"


def recipe(loaded, inputs, new_tokens: int) -> None:
    """The source notebook's cells: warm up both strategies with 4 tokens, then time each once."""
    with torch.inference_mode():
        for tokens in (4, new_tokens):
            for use_cache in (False, True):
                synchronize(loaded.devices)
                loaded.model.generate(
                    **inputs, min_new_tokens=tokens, max_new_tokens=tokens, do_sample=False, num_beams=1,
                    use_cache=use_cache,
                )  # fmt: skip
                synchronize(loaded.devices)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--random-weights", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--flags", default="-n 64", help="the cell's flags; the recipe takes its -n")
    parser.add_argument("--threads", type=int, help="torch CPU threads; 1 steadies timings on a busy machine")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    new_tokens = int(args.flags.split("-n ")[1].split()[0]) if "-n " in args.flags else 64

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "kvmagic")
    loaded = load_model(args.model, random_weights=args.random_weights)
    shell.magics_manager.registry["KVMagics"].loaded = loaded
    inputs = encode_prompt(loaded, PROMPT)
    inside: list[float] = []
    generate = loaded.model.generate

    def counted(*a, **k):
        start = perf_counter()
        try:
            return generate(*a, **k)
        finally:
            inside.append(perf_counter() - start)

    def cell() -> float:
        loaded.model.generate = counted
        inside.clear()
        start = perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # its notes are printed, just not shown here
            shell.run_cell_magic("kvbench", args.flags, PROMPT)
        loaded.model.generate = generate
        return perf_counter() - start

    def bare() -> float:
        start = perf_counter()
        recipe(loaded, inputs, new_tokens)
        return perf_counter() - start

    cell(), bare()  # one-time costs, not counted
    ratios, overheads, calls = [], [], 0
    for index in range(args.rounds):
        if index % 2:
            recipe_s, cell_s = bare(), cell()
        else:
            cell_s, recipe_s = cell(), bare()
        ratios.append(cell_s / recipe_s)
        overheads.append(cell_s / sum(inside))
        calls = len(inside)
    size = f"{loaded.num_parameters / 1e6:.0f} M parameters"
    print(f"{args.model} ({size}), %%kvbench {args.flags}: {calls} generate calls per cell, {args.rounds} rounds")
    each = ", ".join(f"{r:.3f}" for r in ratios)
    print(f"cell wall / recipe wall = {statistics.median(ratios):.3f}  (each: {each})")
    print(f"cell wall / its generate calls = {statistics.median(overheads):.3f}")


if __name__ == "__main__":
    main()
