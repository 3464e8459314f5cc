"""What the GPU check's steps share: the sizes of each run, the prompt, and how a benchmark result is read.

A result is read only through ``to_dataframe()`` (the table users see), ``pairs()`` (each configuration's
off and dynamic runs) and ``to_json()`` (its saved form), here, so a reshaped result object changes this
module only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvmagic import run_benchmark
from kvmagic.core.intervals import speedup_interval
from kvmagic.model.loading import LoadedModel

__all__ = ["MIB", "NEEDS_CUDA", "ON_CPU", "ON_CUDA", "PROMPT", "Sizes", "bench", "finished_rows", "kept", "kv_bytes",
           "pair_intervals", "rows", "saved"]  # fmt: skip

PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"  # the source experiment's prompt
NEEDS_CUDA = "needs CUDA"
MIB = 2**20


@dataclass(frozen=True)
class Sizes:
    """How much each check generates: the real sizes on CUDA, small ones for a CPU dry run."""

    prompt_tokens: int | None  # tiny's checks; None: the seed prompt as it tokenizes (82 tokens on tiny)
    seed_new: int  # the seed experiment's new tokens (after a 16-token prompt)
    strategy_new: tuple[int, ...]  # the longer first: a later short row must not keep its cache
    oom_new: tuple[int, ...]
    repeat: int
    speed_prompt: int  # where an uncached run has real work to do on the device
    speed_new: tuple[int, int]  # (fewer, more) new tokens: the speed-up should rise from one to the other
    pairs: int  # interleaved (uncached, cached) pairs per speed figure


ON_CUDA = Sizes(None, 64, (64, 16), (8, 16), 3, speed_prompt=2000, speed_new=(16, 64), pairs=3)
ON_CPU = Sizes(16, 8, (12, 4), (4, 6), 2, speed_prompt=64, speed_new=(4, 16), pairs=3)


def bench(loaded: LoadedModel, prompt_tokens: int | None, repeat: int, **options: Any) -> Any:
    return run_benchmark(loaded, PROMPT, prompt_tokens=prompt_tokens, repeat=repeat, warmup_tokens=2, **options)


def rows(result: Any) -> list[dict[str, Any]]:
    return result.to_dataframe().to_dict("records")


def saved(result: Any) -> dict[str, Any]:
    """The result as it saves to JSON: every timed run's seconds, the tokens, the mismatch and its margin."""
    return json.loads(result.to_json())


def kept(result: Any) -> dict[str, Any]:
    """What the report keeps of a benchmark: its table and its saved form (every run's seconds)."""
    return {"rows": rows(result), "result": saved(result)}


def pair_intervals(result: Any) -> list[tuple[float, float]]:
    """kvmagic's 95% interval of the speed-up per configuration, from its interleaved pairs (NaN: too few)."""
    found = []
    for pair in result.pairs():
        rounds = pair.rounds
        interval = speedup_interval([u for u, _ in rounds], [c for _, c in rounds]) if rounds else None
        found.append(interval or (math.nan, math.nan))
    return found


def kv_bytes(row: dict[str, Any]) -> int:
    return round(row["kv_cache_mib"] * MIB)  # the table divides exact bytes by 2**20: exact back


def finished_rows(call: Callable[[], Any]) -> tuple[list[dict[str, Any]], str]:
    """The rows a run that ends in an error still hands back (returned, or carried by the error)."""
    try:
        return rows(call()), "returned"
    except Exception as error:  # which error the runner raises is part of what is checked
        carried = getattr(error, "result", None)
        return ([] if carried is None else rows(carried)), f"raised {type(error).__name__}: {error}"
