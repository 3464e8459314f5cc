"""How well the cost model predicts the speed-up before measuring, and what -r auto saves.

Run: ``PYTHONPATH=. python benchmarks/cost_model.py [--threads 1] [-n 16,64,256] [-p 16,256] [-r 3]``.

Part 1, on ``tiny`` (EXAONE-4 architecture) and on a small Llama built here with seeded random
weights (no hub): one ``--predict`` sweep each, measured as the median of ``-r`` interleaved pairs
(one pair is itself too noisy on a shared machine to judge a prediction by); per row the predicted
and the measured seconds and speed-up, and the speed-up's relative error (the target: within 25%).
Part 2, on ``tiny``: how many timed ``generate``
calls ``-r auto`` takes to bring the speed-up's 95% interval within ±5%, against the interval
that fixed policies of 5 and 10 pairs reach in the same run.
"""

from __future__ import annotations

import argparse
import time

import torch

from kvmagic import load_model, run_benchmark
from kvmagic.core import stats
from kvmagic.model.loading import LoadedModel
from kvmagic.results.result import BenchmarkResult

PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"  # the source experiment's prompt


def small_llama(tokenizer: object) -> LoadedModel:
    """A Llama of about the tiny model's size with seeded random weights, sharing tiny's tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=256, intermediate_size=688, num_hidden_layers=6,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=1024,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    return LoadedModel(model=LlamaForCausalLM(config).eval(), tokenizer=tokenizer, name="llama-small (random)")


def accuracy(loaded: LoadedModel, new_tokens: str, prompt_tokens: str, repeat: int) -> float:
    """One --predict sweep; prints predicted against measured per row and returns the worst relative error."""
    start = time.perf_counter()
    result = run_benchmark(loaded, PROMPT, new_tokens=new_tokens, prompt_tokens=prompt_tokens, repeat=repeat,
                           predict=True)  # fmt: skip
    frame = result.to_dataframe()
    print(
        f"\n### {loaded.summary()}  ({time.perf_counter() - start:.0f} s, probing {result.cost_model.probe_s:.2f} s)\n"
    )
    print("| prompt | new | uncached s (predicted) | cached s (predicted) | speed-up | predicted | error |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    worst = 0.0
    for row in frame.itertuples(index=False):
        error = row.predicted_speedup / row.speedup - 1
        worst = max(worst, abs(error))
        print(
            f"| {row.prompt_tokens} | {row.new_tokens} | {row.uncached_s:.3f} ({row.predicted_uncached_s:.3f}) "
            f"| {row.cached_s:.3f} ({row.predicted_cached_s:.3f}) | {row.speedup:.2f}x | {row.predicted_speedup:.2f}x "
            f"| {error:+.0%} |"
        )
    print()
    for note in result.notes():
        print(f"- {note}")
    return worst


def _half_width(result: BenchmarkResult) -> float:
    low, high = result.pair().interval
    return stats.relative_half_width(result.speedup, low, high)


def auto_against_fixed(loaded: LoadedModel, new_tokens: int, prompt_tokens: int, target: float) -> None:
    """-r auto against -r 5 and -r 10 on one configuration: timed generate calls and the interval reached."""
    print(
        f"\n### -r auto (±{target:.0%}) against fixed repeats, {prompt_tokens}+{new_tokens} tokens on {loaded.name}\n"
    )
    print("| policy | timed generate calls | speed-up | 95% interval |\n| --- | ---: | ---: | ---: |")
    for repeat in ("auto", 5, 10):
        result = run_benchmark(loaded, PROMPT, new_tokens=new_tokens, prompt_tokens=prompt_tokens, repeat=repeat,
                               ci_target=target, auto_cap=60)  # fmt: skip
        calls = sum(len(m.seconds) for m in result.measurements)
        print(f"| -r {repeat} | {calls} | {result.speedup:.3f}x | ±{_half_width(result):.1%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)")
    parser.add_argument("-n", default="16,64,256")
    parser.add_argument("-p", default="16,256")
    parser.add_argument("-r", type=int, default=3, help="interleaved pairs per row; the median counts")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tiny = load_model("tiny")
    worst = {loaded.name: accuracy(loaded, args.n, args.p, args.r) for loaded in (tiny, small_llama(tiny.tokenizer))}
    print("\nworst relative error of the predicted speed-up: "
          + ", ".join(f"{name} {error:.0%}" for name, error in worst.items()) + " (target: 25%)")  # fmt: skip
    for new_tokens in (16, 64):
        auto_against_fixed(tiny, new_tokens, 16, 0.05)


if __name__ == "__main__":
    main()
