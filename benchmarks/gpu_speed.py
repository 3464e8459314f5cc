"""The GPU check's speed steps: the seed experiment at its true size as a figure, and speed verdicts that
cannot flake (each from kvmagic's own interval over interleaved pairs; judged only on CUDA).

On a GPU, short runs of a small model are bound by Python's kernel launches, cached or not, so the
speed checks take a prompt long enough that an uncached step has real work to do.
"""

from __future__ import annotations

import math
from typing import Any

from checklist import FAIL, INCONCLUSIVE, PASS, SKIP, Check, speed_verdict
from gpu_results import NEEDS_CUDA, PROMPT, Sizes, kept, pair_intervals, rows

from kvmagic import run_benchmark
from kvmagic.model.loading import LoadedModel

__all__ = ["SOURCE", "seed_experiment", "speed"]

SOURCE = "the source: 7.95 s uncached, 5.18 s cached, 1.54x"  # the seed experiment's own figures
SEED_PROMPT = 16  # tokens of the source's prompt under EXAONE's tokenizer


def seed_experiment(loaded: LoadedModel, sizes: Sizes, cuda: bool) -> Check:
    """The seed experiment (16-token prompt, 64 new, float16) as kvmagic runs it: a figure beside the source's."""
    name = "seed experiment at its true size runs (a figure, not judged)"
    result = run_benchmark(loaded, PROMPT, prompt_tokens=SEED_PROMPT, new_tokens=sizes.seed_new, repeat=sizes.pairs,
                           warmup_tokens=2)  # fmt: skip
    row, interval = rows(result)[0], pair_intervals(result)[0]
    figure = (
        f"{loaded.name}, {str(loaded.dtype).removeprefix('torch.')}, {SEED_PROMPT}+{sizes.seed_new}: "
        f"{_figure(row, interval, sizes.pairs)}; {SOURCE}"
    )
    if not cuda:
        return Check(name, SKIP, f"{NEEDS_CUDA} (the 1.2B shape in float16); dry run: {figure}", kept(result))
    return Check(name, PASS, figure, kept(result))


def speed(loaded: LoadedModel, sizes: Sizes, cuda: bool) -> list[Check]:
    """At a long prompt: cached is faster (its interval wholly above 1), and the speed-up rises with the
    new tokens (the interval at more tokens wholly above the one at fewer)."""
    fewer, more = sizes.speed_new
    # max_seconds=0: no budget probe before the sweep; the deadline is the budget here
    result = run_benchmark(loaded, PROMPT, prompt_tokens=sizes.speed_prompt, new_tokens=[fewer, more],
                           repeat=sizes.pairs, warmup_tokens=2, max_seconds=0)  # fmt: skip
    found = {row["new_tokens"]: (row, interval) for row, interval in zip(rows(result), pair_intervals(result))}
    (few_row, few), (many_row, many) = found[fewer], found[more]
    at = f"{sizes.speed_prompt:,}+{more}"
    faster = f"cached faster at {at} ({loaded.name})"
    rises = f"speed-up rises from {fewer} to {more} new tokens at {sizes.speed_prompt:,}"
    figure_more = _figure(many_row, many, sizes.pairs)
    figure_both = f"{fewer}: {few_row['speedup']:.2f}x {_span(few)}, {more}: {many_row['speedup']:.2f}x {_span(many)}"
    if not cuda:
        reason = "speed is judged only on CUDA; dry run"
        return [Check(faster, SKIP, f"{reason}: {figure_more}", kept(result)),
                Check(rises, SKIP, f"{reason}: {figure_both}")]  # fmt: skip
    return [speed_verdict(faster, many, 1.0, figure_more, **kept(result)), _rises(rises, few, many, figure_both)]


def _rises(name: str, fewer: tuple[float, float], more: tuple[float, float], figure: str) -> Check:
    """PASS when the interval at more tokens lies wholly above the one at fewer, FAIL when wholly below."""
    if any(math.isnan(bound) for bound in (*fewer, *more)):
        return Check(name, INCONCLUSIVE, f"{figure}; no interval")
    if more[0] > fewer[1]:
        return Check(name, PASS, figure)
    if more[1] < fewer[0]:
        return Check(name, FAIL, figure)
    return Check(name, INCONCLUSIVE, f"{figure}; the intervals overlap")


def _figure(row: dict[str, Any], interval: tuple[float, float], pairs: int) -> str:
    return (
        f"uncached {row['uncached_s']:.3f} s, cached {row['cached_s']:.3f} s, speed-up {row['speedup']:.2f}x, "
        f"95% interval {_span(interval)} over {pairs} pairs, identical={row['identical']}"
    )


def _span(interval: tuple[float, float]) -> str:
    low, high = interval
    return "none" if math.isnan(low) else f"[{low:.2f}, {high:.2f}]x"
