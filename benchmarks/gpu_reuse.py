"""The GPU check's steps for what a cache is judged by beyond time: quality against the full cache, and a reused
prefix's saving, at a prompt long enough for the device to have real work."""

from __future__ import annotations

import math

from checklist import FAIL, PASS, SKIP, Check, speed_verdict
from gpu_results import NEEDS_CUDA, PROMPT, Sizes, kept, rows

from kvmagic import run_benchmark
from kvmagic.core.intervals import speedup_interval
from kvmagic.core.strategy import FULL_CACHE
from kvmagic.measure import capabilities
from kvmagic.model.loading import LoadedModel

__all__ = ["reuse_checks"]

NEW = 16


def reuse_checks(loaded: LoadedModel, sizes: Sizes, cuda: bool) -> list[Check]:
    return [_quality(loaded, sizes), _prefix(loaded, sizes, cuda)]


def _quality(loaded: LoadedModel, sizes: Sizes) -> Check:
    """The full cache scores exactly 1, 0 and 1 against itself, in the device's dtype too; every other strategy
    gets finite figures (reported, not judged: random weights put near ties everywhere)."""
    lossy = ",quantized:fp8" if "fp8" in capabilities.quantized_backends() else ""
    name = f"quality: the full cache scores exactly 1/0/1 ({loaded.name}, {sizes.speed_prompt:,}+{NEW})"
    result = run_benchmark(loaded, PROMPT, prompt_tokens=sizes.speed_prompt, new_tokens=NEW, warmup_tokens=2,
                           cache=f"dynamic,static{lossy}", max_seconds=0)  # fmt: skip
    judged = {m.strategy: m.quality for m in result.measurements if m.quality is not None}
    full = judged.get(FULL_CACHE)
    figures = "; ".join(
        f"{s}: agreement {q.top1_agreement:.3g}, KL {q.kl_nats:.3g}, ppl ratio {q.ppl_ratio:.4g}"
        for s, q in judged.items()
    )
    exact = full is not None and (full.top1_agreement, full.kl_nats, full.ppl_ratio) == (1.0, 0.0, 1.0)
    finite = all(math.isfinite(q.kl_nats) and math.isfinite(q.ppl_ratio) for q in judged.values())
    ok = exact and finite and set(judged) == {m.strategy for m in result.measurements}
    return Check(name, PASS if ok else FAIL, figures or "no strategy judged", kept(result))


def _prefix(loaded: LoadedModel, sizes: Sizes, cuda: bool) -> Check:
    """A warm twin starting from the cache of all but the prompt's last 16 tokens runs faster than its cold self:
    PASS only when the interval of the per-round ratio lies wholly above 1."""
    prefix = sizes.speed_prompt - 16
    name = f"a reused prefix of {prefix:,} tokens makes the run faster ({loaded.name}, {sizes.speed_prompt:,}+{NEW})"
    result = run_benchmark(loaded, PROMPT, prompt_tokens=sizes.speed_prompt, new_tokens=NEW, warmup_tokens=2,
                           repeat=sizes.pairs, prefix=prefix, max_seconds=0)  # fmt: skip
    cold, warm = result.measurement("dynamic"), result.measurement("dynamic+prefix")
    if cold is None or warm is None:
        return Check(name, FAIL, f"no warm run: {result.skipped}", kept(result))
    interval = speedup_interval(cold.seconds, warm.seconds) or (math.nan, math.nan)
    row = next(r for r in rows(result) if r["strategy"] == "dynamic+prefix")
    figure = (
        f"whole run {row['warm_speedup']:.2f}x [{interval[0]:.2f}, {interval[1]:.2f}] over {sizes.pairs} rounds, "
        f"first token {row['warm_ttft_speedup']:.2f}x (one run each), same tokens as cold: {row['same_as_cold']}"
    )
    if not cuda:
        return Check(name, SKIP, f"{NEEDS_CUDA}: speed is judged only on CUDA; dry run: {figure}", kept(result))
    return speed_verdict(name, interval, 1.0, figure, **kept(result))
