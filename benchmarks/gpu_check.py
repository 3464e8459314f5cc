"""Check on one CUDA GPU what the CPU test suite can only fake, and print one PASS / FAIL / SKIP table.

    PYTHONPATH=. python3 benchmarks/gpu_check.py [--no-pytest]

Needs torch with CUDA, transformers (4.55 or 5.x), accelerate, pandas, matplotlib and tqdm; not
IPython. Without CUDA it is a dry run: what a CPU can do runs at small sizes, the rest says
"needs CUDA". Exits 1 if any check failed. Of a benchmark result it reads only what
``_rows``, ``_kv_bytes`` and ``_finished_rows`` read: ``to_dataframe()`` (columns ``new_tokens``,
``prompt_tokens``, ``speedup``, ``identical``, ``strategy``, ``kv_cache_mib``, ``compile_s``,
``note``) and, after an error, a result the error may carry as ``.result``.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers
from checklist import Check, guarded, table, verdict  # beside this script
from seed_shape import seed_shape

from kvmagic import load_model, run_benchmark
from kvmagic.measure.accelerator import release_memory
from kvmagic.measure.greedy import greedy_config
from kvmagic.measure.memory import predicted_kv_nbytes
from kvmagic.measure.timing import profiled_generate, timed_generate
from kvmagic.model.loading import LoadedModel

PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"  # the source experiment's prompt
NEEDS_CUDA = "needs CUDA"
MIB = 2**20
TF5 = int(transformers.__version__.split(".")[0]) >= 5  # quantized:fp8 exists only there
STRATEGIES = "off,dynamic,static,offloaded,offloaded_static" + (",quantized:fp8" if TF5 else "")
STATIC_FAMILY = ("static", "offloaded_static", "static+compile", "offloaded_static+compile")


@dataclass(frozen=True)
class Sizes:
    """How much each check generates: the real sizes on CUDA, small ones for a CPU dry run."""

    prompt_tokens: int | None  # None: the seed prompt as it tokenizes (82 tokens on tiny)
    seed_new: int
    sweep_new: tuple[int, ...]
    strategy_new: tuple[int, ...]  # the longer first: a later short row must not keep its cache
    oom_new: tuple[int, ...]
    repeat: int


ON_CUDA = Sizes(None, 64, (16, 64, 256), (64, 16), (8, 16), 3)
ON_CPU = Sizes(16, 8, (4, 32, 128), (12, 4), (4, 6), 2)


# --- what is read of a result: kept here, so a reshaped result object changes these three only ---


def _rows(result: Any) -> list[dict[str, Any]]:
    return result.to_dataframe().to_dict("records")


def _kv_bytes(row: dict[str, Any]) -> int:
    return round(row["kv_cache_mib"] * MIB)  # the table divides exact bytes by 2**20: exact back


def _finished_rows(call: Callable[[], Any]) -> tuple[list[dict[str, Any]], str]:
    """The rows a run that ends in an error still hands back (returned, or carried by the error)."""
    try:
        return _rows(call()), "returned"
    except Exception as error:  # which error the runner raises is part of what is checked
        carried = getattr(error, "result", None)
        return ([] if carried is None else _rows(carried)), f"raised {type(error).__name__}: {error}"


# --- the checks ---


def seed_on_tiny(loaded: LoadedModel, sizes: Sizes, cuda: bool) -> list[Check]:
    dtype = str(loaded.dtype).removeprefix("torch.")
    expected = "float16" if cuda else "float32"
    seed = _rows(_bench(loaded, sizes, new_tokens=sizes.seed_new))[0]
    speedups = [row["speedup"] for row in _rows(_bench(loaded, sizes, new_tokens=list(sizes.sweep_new)))]
    return [
        verdict("tiny loads with dtype auto", dtype == expected, f"{dtype} (expected {expected})"),
        verdict(f"seed on tiny: {sizes.seed_new} new tokens faster cached, same tokens",
                seed["speedup"] > 1 and bool(seed["identical"]),
                f"speed-up {seed['speedup']:.2f}x, identical={seed['identical']}"),
        verdict("speed-up rises with new tokens", speedups == sorted(set(speedups)),
                ", ".join(f"{n}: {s:.2f}x" for n, s in zip(sizes.sweep_new, speedups, strict=True))),
    ]  # fmt: skip


def _bench(loaded: LoadedModel, sizes: Sizes, **kwargs: Any) -> Any:
    return run_benchmark(
        loaded, PROMPT, prompt_tokens=sizes.prompt_tokens, repeat=sizes.repeat, warmup_tokens=2, **kwargs
    )


@contextmanager
def compile_decisions(model: Any) -> Iterator[list[tuple[bool, bool]]]:
    """(asked for compile, transformers compiled) for every generate, from transformers' own decision."""
    decisions: list[tuple[bool, bool]] = []
    decide = model._valid_auto_compile_criteria

    def record(model_kwargs: dict, config: Any) -> bool:
        compiled = decide(model_kwargs, config)
        decisions.append((config.compile_config is not None and not config.disable_compile, bool(compiled)))
        return compiled

    model._valid_auto_compile_criteria = record
    try:
        yield decisions
    finally:
        del model._valid_auto_compile_criteria


def strategies(loaded: LoadedModel, sizes: Sizes, cuda: bool) -> list[Check]:
    from torch._dynamo.utils import counters

    graphs = counters["stats"]["unique_graphs"]
    with compile_decisions(loaded.model) as decisions:
        result = _bench(loaded, sizes, new_tokens=list(sizes.strategy_new), cache=STRATEGIES, compile=True)
    graphs = counters["stats"]["unique_graphs"] - graphs
    rows = _rows(result)
    stray = sum(compiled and not asked for asked, compiled in decisions)
    wanted = sum(compiled and asked for asked, compiled in decisions)
    figure = f"{len(decisions)} generate calls: {stray} compiled unasked, {wanted} +compile compiled, {graphs} graphs"
    notes = {row["strategy"]: row["note"] for row in rows if row["note"]}
    allowed = set() if cuda else {"offloaded", *STATIC_FAMILY[1:]}  # a GPU's, or compiled only on one
    checks = [
        verdict("only static+compile compiles", stray == 0 and (wanted > 0 or not cuda) and bool(decisions), figure),
        verdict("every strategy ran", set(notes) <= allowed, "; ".join(f"{k}: {v}" for k, v in notes.items())),
        *kv_checks(loaded, rows, sizes.strategy_new[0]),
    ]
    compile_s = {row["new_tokens"]: row["compile_s"] for row in rows if row["strategy"] == "static+compile"}
    if cuda:
        apart = all(math.isfinite(s) and s > 0 for s in compile_s.values()) and compile_s
        others = all(math.isnan(row["compile_s"]) for row in rows if row["strategy"] != "static+compile")
        checks.append(verdict("compile_s reported apart", bool(apart) and others, f"static+compile: {compile_s}"))
    else:
        checks.append(Check("compile_s reported apart", "SKIP", NEEDS_CUDA))
    return checks


def kv_checks(loaded: LoadedModel, rows: list[dict[str, Any]], first_new: int) -> list[Check]:
    """Counted KV bytes against the prediction: dynamic rows exactly, static ones within 8 bytes a layer
    (transformers 5's position counters); a static row after a longer one must not hold the longer cache."""
    config, layers = loaded.model.config, loaded.model.config.get_text_config().num_hidden_layers
    matched, sized = [], []
    for row in rows:
        if row["note"] or row["strategy"] not in ("dynamic", *STATIC_FAMILY):
            continue
        positions = row["prompt_tokens"] + row["new_tokens"] - 1
        expected, per_position = (predicted_kv_nbytes(config, n, loaded.dtype) for n in (positions, 1))
        ok = 0 <= _kv_bytes(row) - expected <= (0 if row["strategy"] == "dynamic" else 8 * layers)
        text = f"{row['strategy']}@{row['new_tokens']}: {_kv_bytes(row)} B vs {expected} B"
        text += "" if ok else f" ({_kv_bytes(row) // per_position} positions held, {positions} needed)"
        late_static = row["strategy"] != "dynamic" and row["new_tokens"] != first_new
        (sized if late_static else matched).append((ok, text))
    return [
        verdict("KV bytes = predicted (dynamic, first static)", all(ok for ok, _ in matched) and bool(matched),
                "; ".join(text for _, text in matched)),
        verdict("later static rows sized to their own length", all(ok for ok, _ in sized) and bool(sized),
                "; ".join(text for _, text in sized)),
    ]  # fmt: skip


def _inputs(loaded: LoadedModel) -> Any:
    return loaded.tokenizer(PROMPT, return_tensors="pt", return_token_type_ids=False).to(loaded.device)


def peak_source(loaded: LoadedModel, cuda: bool) -> Check:
    config = greedy_config(loaded.model, loaded.tokenizer, 4, True)
    run = profiled_generate(loaded.model, _inputs(loaded), config, loaded.devices)
    expected = "cuda allocator" if cuda else "process peak RSS"
    figure = f"{run.peak_source!r}, {run.peak_bytes / MIB:.1f} MiB"
    return verdict("peak memory source", run.peak_source == expected, figure)


def out_of_memory(loaded: LoadedModel, sizes: Sizes) -> list[Check]:
    """The last configuration of a sweep runs out of memory (forced): finished rows and the model survive."""
    inputs, config = _inputs(loaded), greedy_config(loaded.model, loaded.tokenizer, 4, True)
    before = timed_generate(loaded.model, inputs, config, loaded.devices)[0].tolist()
    own, last = loaded.model.generation_config.to_dict(), sizes.oom_new[-1]
    real = loaded.model.generate

    def generate(*args: Any, **kwargs: Any) -> Any:
        if kwargs["generation_config"].max_new_tokens == last:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (forced by gpu_check)")
        return real(*args, **kwargs)

    loaded.model.generate = generate
    try:
        rows, how = _finished_rows(lambda: _bench(loaded, sizes, new_tokens=list(sizes.oom_new)))
    finally:
        del loaded.model.generate
    kept = [row["new_tokens"] for row in rows if math.isfinite(row["speedup"])]  # measured, not a note
    after = timed_generate(loaded.model, inputs, config, loaded.devices)[0].tolist()
    usable = after == before and loaded.model.generation_config.to_dict() == own
    return [
        verdict("OOM on the last configuration keeps finished rows", kept == list(sizes.oom_new[:-1]),
                f"rows kept for new tokens {kept}; run_benchmark {how[:160]}"),
        verdict("model usable after OOM", usable, "same tokens and config as before" if usable else "changed"),
    ]  # fmt: skip


def synchronized_devices(loaded: LoadedModel, sizes: Sizes) -> Check:
    waited: set[torch.device] = set()
    real = torch.cuda.synchronize

    def record(device: Any = None) -> None:
        waited.add(torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device()))
        real(device)

    torch.cuda.synchronize = record
    try:
        _bench(loaded, sizes, new_tokens=2)
    finally:
        torch.cuda.synchronize = real
    wanted = {d for d in loaded.devices if d.type == "cuda"}
    return verdict("synchronize covers every model device", wanted <= waited,
                   f"model on {sorted(map(str, wanted))}, waited on {sorted(map(str, waited))}")  # fmt: skip


def seed_experiment_shape(cuda: bool, tokenizer: Any) -> Check:
    """The seed's model at its real size with random weights (toy size in a dry run): 16+64 tokens."""
    dtype = torch.float16 if cuda else torch.float32
    loaded = seed_shape(tokenizer, "cuda" if cuda else "cpu", dtype, toy=not cuda)
    row = _rows(run_benchmark(loaded, PROMPT, prompt_tokens=16, new_tokens=64 if cuda else 8, warmup_tokens=2))[0]
    figure = (
        f"{loaded.num_parameters / 1e6:,.0f} M parameters, {str(dtype)[6:]}: uncached {row['uncached_s']:.3f}"
        f" s, cached {row['cached_s']:.3f} s, speed-up {row['speedup']:.2f}x, identical={row['identical']}"
    )
    del loaded
    release_memory()
    name = "seed shape (EXAONE-4.0-1.2B, random), 16+64 tokens"
    return verdict(name, row["speedup"] > 1, figure) if cuda else Check(name, "SKIP", f"{NEEDS_CUDA}; toy: {figure}")


def gpu_tests(cuda: bool, enabled: bool) -> Check:
    name = "pytest -m gpu"
    if not enabled:
        return Check(name, "SKIP", "turned off (--no-pytest)")
    if not cuda:
        return Check(name, "SKIP", NEEDS_CUDA)
    try:
        import pytest  # noqa: F401
    except ImportError:
        return Check(name, "SKIP", "pytest is not installed")
    files = [str(p) for p in sorted(Path("tests").glob("test_*.py")) if "mark.gpu" in p.read_text(encoding="utf-8")]
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", *files]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    last = (done.stdout.strip().splitlines() or ["no output"])[-1]
    return Check(name, {0: "PASS", 5: "SKIP"}.get(done.returncode, "FAIL"), f"{last} ({', '.join(files)})")


def run_checks(cuda: bool, pytest_step: bool = True) -> list[Check]:
    sizes = ON_CUDA if cuda else ON_CPU
    loaded = load_model("tiny")
    checks = [*guarded("seed on tiny", lambda: seed_on_tiny(loaded, sizes, cuda))]
    checks += guarded("strategies", lambda: strategies(loaded, sizes, cuda))
    checks += guarded("peak memory source", lambda: peak_source(loaded, cuda))
    checks += guarded("out of memory", lambda: out_of_memory(loaded, sizes))
    if cuda:
        checks += guarded("synchronize", lambda: synchronized_devices(loaded, sizes))
    else:
        checks.append(Check("synchronize covers every model device", "SKIP", NEEDS_CUDA))
    checks += guarded("seed shape", lambda: seed_experiment_shape(cuda, loaded.tokenizer))
    checks += guarded("pytest -m gpu", lambda: gpu_tests(cuda, pytest_step))
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-pytest", action="store_true", help="skip running the tests marked gpu")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    where = torch.cuda.get_device_name(0) if cuda else "no CUDA: dry run at small sizes"
    print(f"gpu_check: {where}; torch {torch.__version__}, transformers {transformers.__version__}\n")
    checks = run_checks(cuda, not args.no_pytest)
    print(table(checks))
    failed = [c.name for c in checks if c.status == "FAIL"]
    print(f"\n{len(checks)} checks: {len(failed)} failed" + (f" ({', '.join(failed)})" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
