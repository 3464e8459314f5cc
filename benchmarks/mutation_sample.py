"""Mutation score of a layer from a seeded random sample of its mutants, with an exact 95% interval.

The whole set of ``[tool.mutmut]`` takes hours on two cores; a random sample gives the layer's score with a
Clopper-Pearson interval (which covers the true proportion at least 95% of the time, checked here by a seeded
simulation before it is printed) and names each sampled survivor, for the table in benchmarks/README.md.

    PYTHONPATH=. python benchmarks/mutation_sample.py generate            # mutants/, once (via `make mutants`)
    PYTHONPATH=. python benchmarks/mutation_sample.py run [--per-layer 300] [--seed 0] [--children 2]
    PYTHONPATH=. python benchmarks/mutation_sample.py score [--per-layer 300] [--seed 0]

``run`` draws the sample and has mutmut run exactly those mutants; ``score`` reads their results back.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
MUTVENV = ROOT / ".venv" / "mutmut"
MADE = ".made"  # touched as mutants/ is made: a source file newer than it is not in the copy
LAYERS = {"core/": "kvmagic.core.", "results/": "kvmagic.results."}
# mutmut's exit codes (mutmut/stats.py): what counts as the suite catching a mutant.
KILLED = {1: "killed", 3: "killed", 36: "timed out", -24: "timed out", 24: "timed out", 152: "timed out",
          255: "timed out", -9: "timed out", 37: "rejected by mypy", -11: "killed"}  # fmt: skip
NOT_CAUGHT = {0: "survived", 5: "no test", 33: "no test"}


def population() -> dict[str, dict[str, int | None]]:
    """Every mutant of each layer, by name, with its exit code (None: not run yet)."""
    found: dict[str, dict[str, int | None]] = {layer: {} for layer in LAYERS}
    for meta in sorted((MUTANTS / "kvmagic").rglob("*.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        for name, code in codes.items():
            for layer, prefix in LAYERS.items():
                if name.startswith(prefix):
                    found[layer][name] = code
    if not any(found.values()):
        raise SystemExit("no mutants/ here: run `python benchmarks/mutation_sample.py generate` first")
    return found


def sample(per_layer: int, seed: int) -> dict[str, list[str]]:
    """``per_layer`` mutants of each layer, drawn without replacement by a seeded generator."""
    drawn = {}
    for layer, names in population().items():
        rng = random.Random(f"{seed}:{layer}")
        drawn[layer] = sorted(rng.sample(sorted(names), min(per_layer, len(names))))
    return drawn


def binomial_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact interval for a proportion of ``k`` in ``n``: each end found by bisection on the binomial tail."""
    alpha = (1 - confidence) / 2

    def solve(above: bool) -> float:
        low, high = 0.0, 1.0
        for _ in range(60):
            middle = (low + high) / 2
            tail = 1 - binomial_cdf(k - 1, n, middle) if above else binomial_cdf(k, n, middle)
            if (tail < alpha) == above:
                low = middle
            else:
                high = middle
        return (low + high) / 2

    return (0.0 if k == 0 else solve(True), 1.0 if k == n else solve(False))


def coverage(n: int, truth: float, trials: int = 2000, seed: int = 1) -> float:
    """How often the interval of ``n`` draws holds ``truth``, in a seeded simulation."""
    rng = random.Random(seed)
    ends = {k: clopper_pearson(k, n) for k in range(n + 1)}
    held = 0
    for _ in range(trials):
        k = sum(rng.random() < truth for _ in range(n))
        low, high = ends[k]
        held += low <= truth <= high
    return held / trials


def _kind(code: int | None) -> str:
    if code is None:
        return "not run"
    return KILLED.get(code) or NOT_CAUGHT.get(code) or "other"


def generate() -> None:
    """Build mutants/ afresh, and mutmut's test statistics, by running one small module's mutants
    (kvmagic.core.stats). mutmut copies a file into mutants/ only where it is missing: a copy kept from before
    would run old code and tests."""
    shutil.rmtree(MUTANTS, ignore_errors=True)
    MUTANTS.mkdir()
    (MUTANTS / MADE).touch()
    subprocess.run(["make", "mutants", "MUTANTS=kvmagic.core.stats.*"], cwd=ROOT, check=True)


def run(per_layer: int, seed: int, children: int) -> None:
    """Run the sample's mutants, in a copy made from the code and tests as they are now."""
    stale = [path for folder in ("kvmagic", "tests") for path in (ROOT / folder).rglob("*.py")
             if path.stat().st_mtime > (MUTANTS / MADE).stat().st_mtime]  # fmt: skip
    if stale:
        raise SystemExit(f"{stale[0].relative_to(ROOT)} changed since mutants/ was made: run `generate` again")
    names = [name for drawn in sample(per_layer, seed).values() for name in drawn]
    environment = {**os.environ, "PATH": f"{MUTVENV / 'bin'}:{os.environ['PATH']}"}
    command = ["nice", "-n", "10", str(MUTVENV / "bin" / "mutmut"), "run", "--max-children", str(children), *names]
    subprocess.run(command, cwd=ROOT, env=environment, check=True)


def score(per_layer: int, seed: int) -> None:
    codes = population()
    n = next(iter(sample(per_layer, seed).values()))
    if len(n) >= 50:
        for truth in (0.9, 0.95):
            held = coverage(len(n), truth)
            print(f"Clopper-Pearson 95% interval, {len(n)} draws, truth {truth}: held it in {held:.1%} of 2000 trials")
    print("| layer | mutants | sampled | killed | rejected by mypy | timed out | survived | no test | not run | "
          "caught | 95% interval |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    survivors = []
    for layer, drawn in sample(per_layer, seed).items():
        kinds = Counter(_kind(codes[layer][name]) for name in drawn)
        ran = len(drawn) - kinds["not run"]
        if kinds["other"]:
            print(f"{layer}: {kinds['other']} mutants neither caught nor survived: counted as not caught")
        caught = kinds["killed"] + kinds["rejected by mypy"] + kinds["timed out"]
        low, high = clopper_pearson(caught, ran) if ran else (math.nan, math.nan)
        print(f"| `{layer}` | {len(codes[layer])} | {len(drawn)} | {kinds['killed']} | {kinds['rejected by mypy']} | "
              f"{kinds['timed out']} | {kinds['survived']} | {kinds['no test']} | {kinds['not run']} | "
              f"{caught / ran if ran else math.nan:.1%} | [{low:.1%}, {high:.1%}] |")  # fmt: skip
        survivors += [f"{name} ({_kind(codes[layer][name])})" for name in drawn if _kind(codes[layer][name]) in
                      ("survived", "no test", "other")]  # fmt: skip
    print()
    for name in survivors:
        print(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["generate", "run", "score"])
    parser.add_argument("--per-layer", type=int, default=300, help="mutants drawn from each layer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--children", type=int, default=2, help="mutants run at once")
    args = parser.parse_args()
    if args.step == "generate":
        generate()
    elif args.step == "run":
        run(args.per_layer, args.seed, args.children)
    else:
        score(args.per_layer, args.seed)


if __name__ == "__main__":
    main()
