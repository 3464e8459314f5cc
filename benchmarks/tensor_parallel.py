"""What splitting a model over two processes (``--tp``) changes: the 2-rank run beside the 1-process run of the
same model, the cache's speed-up in each, each rank's KV cache, and the share of time in communication.

Each round runs, in a fresh order, the command three ways on the same model and prompt, each a subprocess:
one process at 1 thread, one process at 2 threads (the cores the two ranks use together), and torchrun
with 2 ranks of 1 thread each (gloo on this CPU). Prints a Markdown table of the medians over the rounds.

    PYTHONPATH=. python benchmarks/tensor_parallel.py [--models tiny,llama] [--rounds 3] [-n 64] [-r 3]

``llama`` is meta-llama/Llama-3.2-1B's published shape cut to ``--layers`` layers, with random weights.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from kvmagic.addons.random_weights.random_build import shipped_config
from kvmagic.results.result import BenchmarkResult

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"
WAYS = {"1 process, 1 thread": (1, 1), "1 process, 2 threads": (1, 2), "2 ranks, 1 thread each": (2, 1)}


def run(model: list[str], ranks: int, threads: int, flags: list[str]) -> BenchmarkResult:
    """The command on ``ranks`` processes of ``threads`` threads each, its JSON result."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(threads)}
    words = [*model, *flags, "--threads", str(threads), "--format", "json", "--max-seconds", "0", PROMPT]
    start = [sys.executable, "-m", "kvmagic"]
    if ranks > 1:
        start = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
                 "-m", "kvmagic", "--tp"]  # fmt: skip
    done = subprocess.run([*start, *words], capture_output=True, text=True, env=env, timeout=1800, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(start)} failed:\n{done.stderr[-2000:]}")
    return BenchmarkResult.from_dict(json.loads(done.stdout))


def figures(result: BenchmarkResult) -> dict[str, float]:
    pair = result.pairs()[0]
    row = result.to_dataframe().iloc[0]
    found = {"uncached_s": pair.reference.median_s, "cached_s": pair.other.median_s, "speedup": pair.speedup,
             "kv_mib": row["kv_cache_mib"], "identical": float(pair.identical)}  # fmt: skip
    if "ranks" in row:
        found.update(kv_rank_mib=row["kv_rank_mib"], uncached_comm=row["uncached_comm_share"],
                     cached_comm=row["cached_comm_share"], uncached_comm_ms=row["uncached_comm_ms"],
                     cached_comm_ms=row["cached_comm_ms"], agree=float(row["ranks_identical"]))  # fmt: skip
    return found


def models(names: list[str], layers: int, folder: Path) -> dict[str, list[str]]:
    found = {}
    for name in names:
        if name == "llama":
            config = shipped_config("meta-llama/Llama-3.2-1B") or {}
            config["num_hidden_layers"] = layers
            (folder / "llama").mkdir(exist_ok=True)
            (folder / "llama" / "config.json").write_text(json.dumps(config))
            found[f"Llama-3.2-1B shape, {layers} layers, random weights"] = ["-m", str(folder / "llama"),
                                                                               "--random-weights"]  # fmt: skip
        else:
            found[name] = ["-m", name]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,llama")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-n", "--new-tokens", default="64")
    parser.add_argument("-r", "--repeat", default="3")
    args = parser.parse_args()
    flags = ["-n", args.new_tokens, "-r", args.repeat]
    shuffle = random.Random(20)
    print("| model | run | uncached_s | cached_s | speed-up | KV MiB (per rank) | comm. share off / on | "
          "comm. ms/step off / on | identical |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory() as name:
        for label, model in models(args.models.split(","), args.layers, Path(name)).items():
            found: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
            for _ in range(args.rounds):
                for way in shuffle.sample(list(WAYS), len(WAYS)):
                    found[way].append(figures(run(model, *WAYS[way], flags)))
            for way, rounds in found.items():
                print(_row(label, way, {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}))


def _row(label: str, way: str, f: dict[str, float]) -> str:
    split = "kv_rank_mib" in f
    kv = f"{f['kv_mib']:.3g} ({f['kv_rank_mib']:.3g})" if split else f"{f['kv_mib']:.3g}"
    share = f"{f['uncached_comm']:.0%} / {f['cached_comm']:.0%}" if split else ""
    per_step = f"{f['uncached_comm_ms']:.3g} / {f['cached_comm_ms']:.3g}" if split else ""
    same = bool(f["identical"]) and (not split or bool(f["agree"]))
    return (f"| {label} | {way} | {f['uncached_s']:.3g} | {f['cached_s']:.3g} | {f['speedup']:.2f}x | {kv} | {share} "
            f"| {per_step} | {same} |")  # fmt: skip


if __name__ == "__main__":
    main()
