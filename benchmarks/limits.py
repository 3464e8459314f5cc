"""How close generation comes to the hardware's limit, and whether the memory frontier predicts real peaks.

Run: ``PYTHONPATH=. python benchmarks/limits.py [--threads 1] [--part hardware,bounds,frontier]``.

Part 1: the probe's copy bandwidth and matmul throughput (kvmagic.addons.limits.limits_probe) against the
best this script reaches by hand with plain torch at several sizes. Part 2, on ``tiny`` and on a
Llama of about 134M parameters built here with seeded random weights: the bound seconds and decode
tokens/s of each strategy (kvmagic.addons.limits.bounds) against ``run_benchmark``'s measured ones. Part 3,
on both: the memory frontier under an imposed budget, then one generate per strategy at the
predicted frontier, its peak measured (the process's resident memory on a CPU, and the live
tensors alone) beside the prediction.
"""

from __future__ import annotations

import argparse
import statistics
import time
from importlib.metadata import version

import torch

from kvmagic import load_model, run_benchmark
from kvmagic.addons.frontier.cache_layout import layout
from kvmagic.addons.frontier.frontier_probe import check_fit, measure_activations
from kvmagic.addons.frontier.reach import frontier, peak_bytes
from kvmagic.addons.limits import limits_probe
from kvmagic.addons.limits.bounds import limits_for, limits_note
from kvmagic.addons.limits.limits_probe import measure_hardware
from kvmagic.measure.shape_probe import model_shape
from kvmagic.measure.strategies import resolve
from kvmagic.model.loading import LoadedModel

PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"  # the source experiment's prompt
MIB = 1 << 20


def llama(tokenizer: object) -> LoadedModel:
    """A Llama of about 134M parameters (85M in its layers, untied embeddings) with seeded random weights."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
        num_key_value_heads=12, max_position_embeddings=4096, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    return LoadedModel(AutoModelForCausalLM.from_config(config).eval(), tokenizer, "llama-134m (random)")


def _best(work: object, repeat: int = 7) -> tuple[float, float]:
    """Median and fastest of ``repeat`` timed calls after two warm-ups."""
    times = []
    for index in range(repeat + 2):
        start = time.perf_counter()
        work()
        if index >= 2:
            times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def by_hand(hidden: int, dtype: torch.dtype) -> tuple[float, float]:
    """Best copy bandwidth over three sizes, best matmul FLOP/s over three token counts, timed plainly."""
    bandwidth = 0.0
    for mib in (64, 256, 1024):
        source = torch.rand(mib * MIB // 4)
        target = torch.empty_like(source)
        median, _ = _best(lambda s=source, t=target: t.copy_(s))
        bandwidth = max(bandwidth, 2 * mib * MIB / median)
    del source, target
    flops = 0.0
    weight = torch.randn(hidden, hidden).to(dtype)
    for tokens in (512, 2048, 8192):
        inputs = torch.randn(tokens, hidden).to(dtype)
        median, _ = _best(lambda x=inputs: x @ weight, repeat=5)
        flops = max(flops, 2 * tokens * hidden * hidden / median)
    return bandwidth, flops


def hardware_part(hiddens: list[int], rounds: int) -> None:
    """Probe and by-hand timings alternated over ``rounds`` (the probe's per-process memo cleared each
    time), so that a busy stretch of a shared machine hits both; medians over the rounds."""
    print(f"\n### Probe against plain torch timed by hand (medians of {rounds} alternated rounds)\n")
    print("| dtype | hidden | probe GB/s | by hand GB/s | probe GFLOP/s | by hand GFLOP/s | probe s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for dtype in (torch.float32, torch.bfloat16):
        for hidden in hiddens:
            probes, hands = [], []
            for _ in range(rounds):
                limits_probe._bandwidths.clear()
                limits_probe._throughputs.clear()
                probes.append(limits_probe.measure_hardware(torch.device("cpu"), dtype, hidden))
                hands.append(by_hand(hidden, dtype))
            med = statistics.median
            print(f"| {str(dtype)[6:]} | {hidden} | {med(p.bandwidth_bytes_s for p in probes) / 1e9:.1f} "
                  f"| {med(h[0] for h in hands) / 1e9:.1f} | {med(p.flops_s for p in probes) / 1e9:.1f} "
                  f"| {med(h[1] for h in hands) / 1e9:.1f} | {med(p.probe_s for p in probes):.2f} |")  # fmt: skip


def bounds_part(loaded: LoadedModel, configs: list[tuple[int, int]], repeat: int) -> None:
    shape = model_shape(loaded.model)
    hardware = measure_hardware(loaded.device, loaded.dtype, shape.hidden)
    print(f"\n### {loaded.summary()}: bound against measured ({hardware.describe()})\n")
    print("| prompt+new | strategy | measured s | bound s | reached | measured tok/s | bound tok/s | governs |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    notes = []
    for prompt, new in configs:
        frame = run_benchmark(loaded, PROMPT, new_tokens=new, prompt_tokens=prompt, repeat=repeat).to_dataframe()
        row = frame.iloc[0]
        limits = limits_for(shape, hardware, prompt, new)
        for name, bound in (("uncached", limits.uncached), ("cached", limits.cached)):
            seconds, tok_s = row[f"{name}_s"], row[f"{name}_tok_s"]
            print(f"| {prompt}+{new} | {name} | {seconds:.3f} | {bound.seconds:.4f} | {bound.reached(seconds):.1%} "
                  f"| {tok_s:.1f} | {bound.decode_tok_s:.1f} | {bound.governs} |")  # fmt: skip
        notes.append(f"{prompt}+{new}: speed-up measured {row['speedup']:.2f}x; "
                     + limits_note(limits, row["uncached_s"], row["cached_s"]))  # fmt: skip
    print()
    for note in notes:
        print(f"- {note}")


def frontier_part(loaded: LoadedModel, budget_mib: float, prompt: int, new: int, names: list[str]) -> None:
    shape, budget = model_shape(loaded.model), budget_mib * MIB
    ids = loaded.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    ids = ids.repeat(1, -(-4096 // ids.shape[-1]))
    started = time.perf_counter()
    activations = measure_activations(loaded, ids)
    probe_s = time.perf_counter() - started
    windowed = int(version("transformers").split(".")[0]) >= 5
    runnable = [name for name in names if not resolve(loaded, name).reason]
    layouts = [layout(name, windowed_dynamic=windowed) for name in runnable]
    rows = frontier(shape, budget, activations, layouts, prompt_tokens=prompt, new_tokens=new)
    print(f"\n### {loaded.name}: frontier in {budget_mib:g} MiB beyond the weights, around {prompt}+{new} tokens\n")
    print(f"activations (probed in {probe_s:.1f} s): forward {activations.forward_fixed / MIB:.2f} MiB + "
          f"{activations.forward_per_token / 1024:.1f} KiB/token; decode step {activations.decode_fixed / MIB:.2f} MiB "
          f"+ {activations.decode_per_position / 1024:.2f} KiB/position\n")  # fmt: skip
    print("| strategy | KV KiB/token | max new tokens | max prompt | max batch | limited by |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for row in rows:
        print(f"| {row.strategy} | {row.kv_bytes_per_token / 1024:.2f} | {row.max_new_tokens} | {row.max_prompt} "
              f"| {row.max_batch} | {row.limited_by} |")  # fmt: skip
    print("\n| strategy | run | predicted MiB | live tensors MiB (error) | process peak MiB (over tensors) | fitted |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for row, cache in zip(rows, layouts, strict=True):
        # off: a long prompt and few new tokens (uncached steps are slow); the others: generate to the frontier
        p, n = (row.max_prompt, new) if cache.kind == "none" else (prompt, row.max_new_tokens)
        if not p or not n:
            continue
        predicted = peak_bytes(shape, cache, activations, p, n)
        check = check_fit(loaded, resolve(loaded, row.strategy), ids[:, :p], n,
                          budget_bytes=budget, predicted_bytes=predicted)  # fmt: skip
        tensors, process = check.tensor_bytes / MIB, check.measured_bytes / MIB
        print(f"| {row.strategy} | {p}+{n} | {predicted / MIB:.2f} | {tensors:.2f} ({check.error:+.1%}) "
              f"| {process:.2f} ({check.overhead:+.0%}) | {check.fitted} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)")
    parser.add_argument("--part", default="hardware,bounds,frontier")
    parser.add_argument("--rounds", type=int, default=3, help="alternated probe / by-hand rounds")
    parser.add_argument("--budgets", default="4,64", help="MiB beyond the weights for tiny and the Llama")
    parser.add_argument("-r", type=int, default=3, help="interleaved pairs per measured row")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    parts = set(args.part.split(","))
    print(f"transformers {version('transformers')}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    tiny = load_model("tiny")
    big = llama(tiny.tokenizer)
    if "hardware" in parts:
        hardware_part([model_shape(m.model).hidden for m in (tiny, big)], args.rounds)
    if "bounds" in parts:
        bounds_part(tiny, [(82, 64), (512, 64)], args.r)
        bounds_part(big, [(82, 16), (512, 16)], args.r)
    if "frontier" in parts:
        strategies = ["off", "dynamic", "static", "quantized:quanto", "quantized:fp8"]
        small, large = (float(b) for b in args.budgets.split(","))
        frontier_part(tiny, small, 82, 16, strategies)
        frontier_part(big, large, 32, 16, ["off", "dynamic", "static"])


if __name__ == "__main__":
    main()
