"""The bar's time left replayed from traced runs (``progress_eta.py --trace``), to judge a way of reckoning it
against what actually remained without running the model again.

Every call the runner made on the bar's :class:`~kvmagic.runner.progress.Eta` is made again on a fresh one, at
the moment it was made (an injected clock); at each moment the bar was read, its time left is set against what
then remained. Per trace: the lowest and highest ratio from a tenth of the run's wall on (readings with under 2 s
left set aside, as ``progress_eta.py`` does), and at half-time.

    PYTHONPATH=. python benchmarks/eta_replay.py TRACE.json [...]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from kvmagic.runner.progress import Eta

TENTH = 0.1
NEAR_END_S = 2.0


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def replay(trace: dict[str, Any]) -> list[tuple[float, float, float]]:
    """(moment, shown, actually left) at each reading."""
    clock, eta, readings = Clock(), None, []
    for name, moment, *args in trace["events"]:
        clock.now = moment
        if name == "__init__":
            runs, rounds, ends_by = args
            eta = Eta(runs, rounds, ends_by=ends_by, clock=clock)  # type: ignore[arg-type]
        elif eta is None:  # the warm-up: no time left to say yet
            if name == "read":
                readings.append((moment, math.nan, trace["end"] - moment))
        elif name == "update":
            eta.update(args[0])
        elif name == "begin":
            eta.begin(*args)
        elif name == "ran":
            eta.ran(*args)
        elif name == "read":
            readings.append((moment, eta.now()[1], trace["end"] - moment))
    return readings


def line(path: Path) -> str:
    trace = json.loads(path.read_text())
    start, end = trace["start"], trace["end"]
    wall = end - start
    ratios = [(t, shown / left) for t, shown, left in replay(trace) if t - start >= TENTH * wall and left >= NEAR_END_S]
    ratios = [(t, ratio) for t, ratio in ratios if not math.isnan(ratio)]
    if not ratios:
        return f"| {trace['per_core']}x | `{trace['cell']}` | {wall:.1f} | (too short) | | |"
    _, half = min(ratios, key=lambda seen: abs(seen[0] - start - wall / 2))
    low, high = min(r for _, r in ratios), max(r for _, r in ratios)
    inside = sum(0.5 <= r <= 2 for _, r in ratios) / len(ratios)
    head = f"| {trace['per_core']}x | `{trace['cell']}` | {wall:.1f}"
    return f"{head} | {low:.2f} | {high:.2f} | {half:.2f} | {inside:.0%} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", type=Path)
    args = parser.parse_args()
    print("| loops per core | cell | wall s | lowest shown / left | highest | at half-time | readings in 0.5-2x |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for path in args.traces:
        print(line(path))


if __name__ == "__main__":
    main()
