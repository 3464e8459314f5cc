"""What one %%kvbench costs beyond the generate calls it makes (warm-ups and hooked runs included).

A real InteractiveShell runs ``%%kvbench``; ``model.generate`` is wrapped to add up the time
spent inside it. Prints the cell's wall time over that sum (median over cells); target <= 1.05.

    PYTHONPATH=. python benchmarks/cell_cost.py [--cells 5] [--flags "-n 32 -r 3"]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
from time import perf_counter

from IPython.core.interactiveshell import InteractiveShell

from kvmagic import load_model

PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--cells", type=int, default=5)
    parser.add_argument("--flags", default="-n 32 -r 3")
    args = parser.parse_args()

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "kvmagic")
    loaded = load_model(args.model)
    shell.magics_manager.registry["KVMagics"].loaded = loaded
    inside: list[float] = []
    generate = loaded.model.generate

    def timed(*a, **k):
        start = perf_counter()
        try:
            return generate(*a, **k)
        finally:
            inside.append(perf_counter() - start)

    loaded.model.generate = timed

    def cell() -> None:
        with contextlib.redirect_stdout(io.StringIO()):  # its notes are printed, just not shown here
            shell.run_cell_magic("kvbench", args.flags, PROMPT)

    cell()  # first cell: one-time costs, not counted
    ratios, calls = [], 0
    for _ in range(args.cells):
        inside.clear()
        start = perf_counter()
        cell()
        wall = perf_counter() - start
        ratios.append(wall / sum(inside))
        calls = len(inside)
    print(f"{args.model}, %%kvbench {args.flags}: {calls} generate calls per cell, {args.cells} cells")
    each = ", ".join(f"{r:.3f}" for r in ratios)
    print(f"cell wall / sum of generate = {statistics.median(ratios):.3f}  (each: {each})")


if __name__ == "__main__":
    main()
