"""A model split over ranks (tensor parallelism): the columns and the note that say what the split costs.

Split, each rank holds its share of the heads, so of the KV cache, and every forward all-reduces the
activations between ranks: without the cache every step does so over the whole prefix, with it over one
token. The columns give each rank's cache and the time each step spent in collectives, so a reader can
tell whether the cache still pays once the model is split.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kvmagic.addons.split.split_records import ranks_of, split_of
from kvmagic.core.strategy import DYNAMIC, OFF
from kvmagic.results.columns import Column, cell, declare

if TYPE_CHECKING:
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement
    from kvmagic.results.rows import PairRow

__all__ = ["SPLIT_PAIR", "SPLIT_ROWS", "split_notes"]

MIB = 2**20


def _ranks(m: Measurement | None) -> dict[str, Any]:
    """A measurement's split figures: its ranks, the fullest rank's cache, its collectives per token and share of
    the profiled run (the slowest rank's), and whether every rank generated rank 0's tokens."""
    ranks = ranks_of(m)
    if m is None or ranks is None:
        return {"ranks": math.nan, "kv_rank_mib": math.nan, "comm_ms": math.nan, "comm_share": math.nan,
                "ranks_identical": None}  # fmt: skip
    return {
        "ranks": len(ranks.kv_bytes),
        "kv_rank_mib": max(ranks.kv_bytes) / MIB,
        "comm_ms": 1e3 * max(ranks.communication_s) / m.config.new_tokens,  # the slowest rank's, per token
        "comm_share": ranks.communication_share,
        "ranks_identical": ranks.agree,
    }


def _of(name: str) -> Any:
    return lambda row: _ranks(row.m)[name]


def _agree(row: PairRow) -> Any:
    """Every rank agreed on both sides' tokens (None where a side kept no ranks)."""
    return row.sides[OFF]["ranks_identical"] and row.sides[DYNAMIC]["ranks_identical"]


_RANKS = Column[Any]("ranks", "`--tp`: the ranks (processes, one per device) the model was split over by tensor "
                     "parallelism", read=_of("ranks"), side=(DYNAMIC, "ranks"))  # fmt: skip
_KV_RANK = Column[Any](
    "kv_rank_mib", "`--tp`: the KV cache the fullest rank held (the cached run's, or the row's strategy's; "
    "`kv_cache_mib` is every rank's together); each rank holds its share of the KV heads", "MiB",
    read=_of("kv_rank_mib"), side=(DYNAMIC, "kv_rank_mib"),
)  # fmt: skip
SPLIT_ROWS = declare(
    _RANKS, _KV_RANK,
    Column[Any]("comm_ms", "`--tp`: milliseconds per generated token this row's strategy spent in collectives, as "
                  "`uncached_comm_ms` counts them", "ms", read=_of("comm_ms")),
    Column[Any]("comm_share", "`--tp`: the share of this strategy's profiled run spent in collectives (the slowest "
                  "rank's)", "share", read=_of("comm_share")),
    Column[Any]("ranks_identical", "`--tp`: every rank generated rank 0's tokens in every timed run",
                read=_of("ranks_identical"), read_pair=_agree),
)  # fmt: skip
SPLIT_PAIR = declare(
    _RANKS, _KV_RANK,
    Column[Any]("uncached_comm_ms", "`--tp`: milliseconds per generated token spent in collectives (all-reduces, "
                      "gathers), cache off: the slowest rank's time covered by collectives over one extra, profiled "
                      "run, divided by new_tokens", "ms", side=(OFF, "comm_ms")),
    Column[Any]("cached_comm_ms", "`--tp`: the same, cache on (each step communicates one token's activations, "
                      "not the prefix's)", "ms", side=(DYNAMIC, "comm_ms")),
    Column[Any]("uncached_comm_share", "`--tp`: the share of the profiled uncached run spent in collectives "
                      "(the slowest rank's)", "share", side=(OFF, "comm_share")),
    Column[Any]("cached_comm_share", "`--tp`: the same, cache on", "share", side=(DYNAMIC, "comm_share")),
    SPLIT_ROWS[-1],
)  # fmt: skip


def split_notes(result: BenchmarkRecord) -> list[str]:
    """How the model was split, what the split cost at the longest configuration, and any rank whose tokens
    differed."""
    split = split_of(result)
    if split is None:
        return []
    views = [(m, ranks) for m in result.measurements if (ranks := ranks_of(m)) is not None]
    same = "; every rank generated the same tokens" if all(ranks.agree for _, ranks in views) else ""
    found = [f"split over {split}; times are the slowest rank's{same}"]
    pairs = [pair for config in result.configs if (pair := result.only_pair(config)) is not None]
    if pairs:
        pair = max(pairs, key=lambda p: (p.config.prompt_tokens + p.config.new_tokens, p.config.batch))
        uncached, cached = _ranks(pair.reference), _ranks(pair.other)
        total, ms, mib = (pair.other.kv_bytes or 0) / MIB, cell("comm_ms"), cell("kv_rank_mib")
        found.append(
            f"{pair.config}: collectives took {uncached['comm_share']:.0%} of an uncached run "
            f"({ms(uncached['comm_ms'])} ms per step) and {cached['comm_share']:.0%} of a cached one "
            f"({ms(cached['comm_ms'])} ms per step); the KV cache is {mib(cached['kv_rank_mib'])} MiB per "
            f"rank, {mib(total)} MiB in all"
        )
    for m, ranks in views:
        if not ranks.agree:
            other = ", ".join(str(rank) for rank, tokens in enumerate(ranks.tokens) if tokens != ranks.tokens[0])
            found.append(f"{m.config}: rank {other} generated other tokens than rank 0 ({m.strategy})")
    return found
