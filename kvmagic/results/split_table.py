"""A model split over ranks (tensor parallelism): the columns and the note that say what the split costs.

Split, each rank holds its share of the heads, so of the KV cache, and every forward all-reduces the
activations between ranks: without the cache every step does so over the whole prefix, with it over one
token. The columns give each rank's cache and the time each step spent in collectives, so a reader can
tell whether the cache still pays once the model is split.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kvmagic.results.columns import added, cell

if TYPE_CHECKING:
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement, Pair

__all__ = ["split_notes", "split_values", "strategy_split_values"]

MIB = 2**20


def split_values(pair: Pair) -> dict[str, Any]:
    """The plain row's split columns: its pair's, each side's collectives named for it."""
    uncached, cached = strategy_split_values(pair.reference), strategy_split_values(pair.other)
    return {
        "ranks": cached["ranks"],
        "kv_rank_mib": cached["kv_rank_mib"],
        **{f"{side}_{key}": values[key] for key in ("comm_ms", "comm_share") for side, values in
           (("uncached", uncached), ("cached", cached))},
        "ranks_identical": uncached["ranks_identical"] and cached["ranks_identical"],
    }  # fmt: skip


def strategy_split_values(m: Measurement | None) -> dict[str, Any]:
    """A comparison's row's split columns."""
    if m is None or m.ranks is None:
        return {**dict.fromkeys(added("--tp").rows, math.nan), "ranks_identical": None}
    return {
        "ranks": len(m.ranks.kv_bytes),
        "kv_rank_mib": max(m.ranks.kv_bytes) / MIB,
        "comm_ms": 1e3 * max(m.ranks.communication_s) / m.config.new_tokens,  # the slowest rank's, per token
        "comm_share": m.ranks.communication_share,
        "ranks_identical": m.ranks.agree,
    }


def split_notes(result: BenchmarkRecord) -> list[str]:
    """How the model was split, what the split cost at the longest configuration, and any rank whose tokens
    differed."""
    if result.split is None:
        return []
    agree = all(m.ranks.agree for m in result.measurements if m.ranks is not None)
    same = "; every rank generated the same tokens" if agree else ""
    found = [f"split over {result.split}; times are the slowest rank's{same}"]
    pairs = [pair for config in result.configs if (pair := result.only_pair(config)) is not None]
    if pairs:
        pair = max(pairs, key=lambda p: (p.config.prompt_tokens + p.config.new_tokens, p.config.batch))
        values = split_values(pair)
        total, ms, mib = (pair.other.kv_bytes or 0) / MIB, cell("comm_ms"), cell("kv_rank_mib")
        found.append(
            f"{pair.config}: collectives took {values['uncached_comm_share']:.0%} of an uncached run "
            f"({ms(values['uncached_comm_ms'])} ms per step) and {values['cached_comm_share']:.0%} of a cached one "
            f"({ms(values['cached_comm_ms'])} ms per step); the KV cache is {mib(values['kv_rank_mib'])} MiB per "
            f"rank, {mib(total)} MiB in all"
        )
    for m in result.measurements:
        if m.ranks is not None and not m.ranks.agree:
            other = ", ".join(str(rank) for rank, tokens in enumerate(m.ranks.tokens) if tokens != m.ranks.tokens[0])
            found.append(f"{m.config}: rank {other} generated other tokens than rank 0 ({m.strategy})")
    return found
