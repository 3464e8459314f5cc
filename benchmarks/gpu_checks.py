"""The GPU check's correctness steps: dtype, same tokens (or a near tie), synchronization, peak memory,
what a checkpoint ships, the garbage collector, an out-of-memory error, and the tests marked ``gpu``."""

from __future__ import annotations

import gc
import math
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from checklist import FAIL, PASS, SKIP, Check, verdict
from gpu_results import NEEDS_CUDA, PROMPT, Sizes, bench, finished_rows, rows

from kvmagic.measure.greedy import greedy_config
from kvmagic.measure.timing import profiled_generate, timed_generate
from kvmagic.model.loading import LoadedModel
from kvmagic.runner.prompt import encode_prompt, stretch_prompt

__all__ = ["checkpoint_and_collector", "dtype_auto", "gpu_tests", "identity", "out_of_memory", "peak_source",
           "synchronized_devices"]  # fmt: skip

_ABSENT = object()
NEAR_TIE = 2.0  # a margin up to this many times the two paths' own disagreement is a rounding tie
ULP_AT = 16.0  # logits this large: one unit in the last place of the dtype there is the least disagreement assumed


def dtype_auto(loaded: LoadedModel, cuda: bool) -> Check:
    dtype = str(loaded.dtype).removeprefix("torch.")
    expected = "float16" if cuda else "float32"
    return verdict("tiny loads with dtype auto", dtype == expected, f"{dtype} (expected {expected})")


def identity(name: str, loaded: LoadedModel, prompt_tokens: int | None, new_tokens: int) -> Check:
    """The cache off and on generate the same tokens; where they part, the top-2 margin there says whether the
    two paths merely rounded a near tie differently (PASS, explained) or chose apart clearly (FAIL)."""
    inputs = encode_prompt(loaded, PROMPT) if prompt_tokens is None else stretch_prompt(loaded, PROMPT, prompt_tokens)
    start = inputs["input_ids"].shape[-1]
    off, on = (
        profiled_generate(loaded.model, inputs, greedy_config(loaded.model, loaded.tokenizer, new_tokens, cached),
                          loaded.devices)
        for cached in (False, True)
    )  # fmt: skip
    tokens = [run.output[0, start:].tolist() for run in (off, on)]
    data = {"prompt_tokens": start, "tokens": tokens, "margins": [off.margins, on.margins]}
    step = next((i for i, (a, b) in enumerate(zip(*tokens, strict=True)) if a != b), None)
    if step is None:
        low = min(range(len(off.margins)), key=lambda i: off.margins[i])
        figure = f"identical over {new_tokens} tokens; smallest top-2 margin {off.margins[low]:.3g} (step {low})"
        return Check(name, PASS, figure, data)
    margin = min(off.margins[step], on.margins[step])
    seen = max((abs(a - b) for a, b in zip(off.margins[:step], on.margins[:step], strict=True)), default=0.0)
    floor = torch.finfo(loaded.dtype).eps * ULP_AT
    noise = max(seen, floor)
    figure = (
        f"part at step {step} of {new_tokens}: top-2 margin {margin:.3g} there; the two paths' margins differed by "
        f"up to {seen:.3g} over the steps before ({str(loaded.dtype).removeprefix('torch.')} resolves {floor:.3g} "
        f"near {ULP_AT:g})"
    )
    if step and margin <= NEAR_TIE * noise:
        return Check(name, PASS, f"{figure}: a near tie the two paths round differently, not a fault", data)
    return Check(name, FAIL, f"{figure}: a clear choice apart, not a rounding tie", data)


def synchronized_devices(loaded: LoadedModel, sizes: Sizes, cuda: bool) -> Check:
    """The timed region and the cost model's probe (``predict``) wait for every CUDA device the model is on."""
    name = "synchronize covers every model device, probe included"
    if not cuda:
        return Check(name, SKIP, NEEDS_CUDA)
    waited: set[torch.device] = set()
    real = torch.cuda.synchronize

    def record(device: Any = None) -> None:
        waited.add(torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device()))
        real(device)

    torch.cuda.synchronize = record  # type: ignore[assignment]
    try:
        bench(loaded, sizes.prompt_tokens, 1, new_tokens=4, predict=True)
    finally:
        torch.cuda.synchronize = real
    wanted = {d for d in loaded.devices if d.type == "cuda"}
    return verdict(name, bool(wanted) and wanted <= waited,
                   f"model on {sorted(map(str, wanted))}, waited on {sorted(map(str, waited))}")  # fmt: skip


def peak_source(loaded: LoadedModel, cuda: bool) -> Check:
    config = greedy_config(loaded.model, loaded.tokenizer, 4, True)
    run = profiled_generate(loaded.model, encode_prompt(loaded, PROMPT), config, loaded.devices)
    expected = "cuda allocator" if cuda else "process peak RSS"
    figure = f"{run.peak_source!r}, {run.peak_bytes / 2**20:.1f} MiB"
    return verdict("peak memory source", run.peak_source == expected, figure)


@contextmanager
def _calls(model: Any) -> Iterator[list[dict[str, Any]]]:
    """What each ``generate`` was asked (its cache, whether it may compile) and whether the collector was on."""
    calls: list[dict[str, Any]] = []
    real = model.generate

    def generate(*args: Any, **kwargs: Any) -> Any:
        config = kwargs["generation_config"]
        may_compile = config.compile_config is not None and not config.disable_compile
        calls.append({"cache": config.cache_implementation, "may_compile": may_compile, "collector": gc.isenabled()})
        return real(*args, **kwargs)

    model.generate = generate
    try:
        yield calls
    finally:
        del model.generate


@contextmanager
def _shipped_static_cache(model: Any) -> Iterator[None]:
    """The model as a checkpoint that asks for a static cache would leave it (4.55 also reads the model config)."""
    own, text = model.generation_config.cache_implementation, model.config.get_text_config()
    text_own = vars(text).get("cache_implementation", _ABSENT)
    model.generation_config.cache_implementation = text.cache_implementation = "static"
    try:
        yield
    finally:
        model.generation_config.cache_implementation = own
        if text_own is _ABSENT:
            del text.cache_implementation
        else:
            text.cache_implementation = text_own


def checkpoint_and_collector(loaded: LoadedModel, sizes: Sizes) -> list[Check]:
    """A checkpoint's ``cache_implementation`` stays out of the cached row, and no generate runs with the
    garbage collector on."""
    with _shipped_static_cache(loaded.model), _calls(loaded.model) as calls:
        result = bench(loaded, sizes.prompt_tokens, 1, new_tokens=4)
    row = rows(result)[0]
    asked = sorted({str(c["cache"]) for c in calls})
    exact = row["kv_cache_mib"] == row["kv_predicted_mib"]
    figure = f"generate asked for caches {asked}; cached row KV {row['kv_cache_mib'] * 2**20:.0f} B"
    figure += f" vs dynamic {row['kv_predicted_mib'] * 2**20:.0f} B"
    collector_on = sum(c["collector"] for c in calls)
    return [
        verdict("a checkpoint's cache_implementation stays out of the cached row",
                asked == ["None", "dynamic"] and exact and not any(c["may_compile"] for c in calls), figure,
                calls=calls, rows=[row]),
        verdict("garbage collector off in every generate", bool(calls) and collector_on == 0,
                f"{collector_on} of {len(calls)} generate calls ran with it on"),
    ]  # fmt: skip


def out_of_memory(loaded: LoadedModel, sizes: Sizes) -> list[Check]:
    """The last configuration of a sweep runs out of memory (forced): finished rows and the model survive."""
    inputs, config = encode_prompt(loaded, PROMPT), greedy_config(loaded.model, loaded.tokenizer, 4, True)
    before = timed_generate(loaded.model, inputs, config, loaded.devices)[0].tolist()
    own, last = loaded.model.generation_config.to_dict(), sizes.oom_new[-1]
    real = loaded.model.generate

    def generate(*args: Any, **kwargs: Any) -> Any:
        if kwargs["generation_config"].max_new_tokens == last:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (forced by gpu_check)")
        return real(*args, **kwargs)

    loaded.model.generate = generate
    try:
        found, how = finished_rows(lambda: bench(loaded, sizes.prompt_tokens, sizes.repeat,
                                                 new_tokens=list(sizes.oom_new)))  # fmt: skip
    finally:
        del loaded.model.generate
    kept = [row["new_tokens"] for row in found if math.isfinite(row["speedup"])]  # measured, not a note
    after = timed_generate(loaded.model, inputs, config, loaded.devices)[0].tolist()
    usable = after == before and loaded.model.generation_config.to_dict() == own
    return [
        verdict("OOM on the last configuration keeps finished rows", kept == list(sizes.oom_new[:-1]),
                f"rows kept for new tokens {kept}; run_benchmark {how[:160]}", rows=found),
        verdict("model usable after OOM", usable, "same tokens and config as before" if usable else "changed"),
    ]  # fmt: skip


def gpu_tests(cuda: bool, enabled: bool, timeout_s: float) -> Check:
    name = "pytest -m gpu"
    if not enabled:
        return Check(name, SKIP, "turned off (--no-pytest)")
    if not cuda:
        return Check(name, SKIP, NEEDS_CUDA)
    try:
        import pytest  # noqa: F401
    except ImportError:
        return Check(name, SKIP, "pytest is not installed")
    files = [str(p) for p in sorted(Path("tests").glob("test_*.py")) if "mark.gpu" in p.read_text(encoding="utf-8")]
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", *files]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    last = (done.stdout.strip().splitlines() or ["no output"])[-1]
    status = {0: PASS, 5: SKIP}.get(done.returncode, FAIL)
    return Check(name, status, f"{last} ({', '.join(files)})", output=done.stdout[-4000:] + done.stderr[-2000:])
