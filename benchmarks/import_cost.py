"""What ``%load_ext kvmagic`` adds to starting IPython: fresh processes, interleaved.

Each round starts ``ipython -c "%load_ext kvmagic"`` and ``ipython -c "pass"`` in fresh processes
(alternating which goes first) and prints the difference of the median wall times; target < 0.15 s.

    PYTHONPATH=. python benchmarks/import_cost.py [--rounds 11]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from time import perf_counter

COMMANDS = {"with kvmagic": "%load_ext kvmagic", "bare": "pass"}


def start_ipython(code: str) -> float:
    start = perf_counter()
    subprocess.run(
        [sys.executable, "-m", "IPython", "--quick", "--no-banner", "--HistoryManager.enabled=False", "-c", code],
        check=True, env=os.environ, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    start_ipython("pass")  # fill the file cache first
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for index in range(args.rounds):
        order = list(COMMANDS.items()) if index % 2 == 0 else list(reversed(COMMANDS.items()))
        for name, code in order:
            times[name].append(start_ipython(code))
    with_ext, bare = statistics.median(times["with kvmagic"]), statistics.median(times["bare"])
    print(f"fresh IPython, {args.rounds} rounds: with %load_ext kvmagic {with_ext:.3f} s, bare {bare:.3f} s")
    print(f"added by %load_ext kvmagic = {with_ext - bare:+.3f} s  (ratio {with_ext / bare:.3f})")


if __name__ == "__main__":
    main()
