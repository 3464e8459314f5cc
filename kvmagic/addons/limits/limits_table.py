"""The hardware's limit beside what was measured (``limits``): what a result keeps, its columns and its note.

A measured time alone does not say whether it is good; its share of what the device's copy bandwidth
and matrix throughput allow does (:mod:`kvmagic.addons.limits.bounds` holds the arithmetic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvmagic.addons.limits.bounds import Hardware, Limits, limits_note
from kvmagic.core.strategy import DYNAMIC, OFF
from kvmagic.results.columns import Column, cell, declare

if TYPE_CHECKING:
    from kvmagic.core.config import Config
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Pair
    from kvmagic.results.rows import PairRow, Row

__all__ = ["LIMITS_PAIR", "LIMITS_ROWS", "Bounds", "bounds", "limits_notes", "matching"]

NAME = "limits"


@dataclass(frozen=True)
class Bounds:
    """What a result keeps of ``--limits``: the hardware the probes found (None in a file that kept no probe) and
    each measured configuration's bound."""

    hardware: Hardware | None
    limits: tuple[Limits, ...]


def bounds(result: BenchmarkRecord) -> Bounds | None:
    found: Bounds | None = result.addons.get(NAME)
    return found


def _bound(row: Row) -> tuple[float, float]:
    """A strategy row's bound tok/s and the share of it measured: ``off`` is bound as the uncached strategy, a
    cache of full-precision keys and values as the cached one. A quantized cache and a press (which drops
    positions) move fewer bytes than the bound counts, and a warm twin computes less than the bound counts (not
    its prompt's prefix): none of them has one."""
    limits, m = matching(row.record, row.config), row.m
    if limits is None or m is None or not m.strategy.lossless or m.strategy.warm:
        return math.nan, math.nan
    bound = limits.cached if m.strategy.caches else limits.uncached
    return m.config.batch * bound.decode_tok_s, bound.reached(m.median_s)


def _limit_speedup(row: PairRow) -> float:
    limits = matching(row.record, row.config)
    return math.nan if limits is None else limits.speedup


LIMITS_ROWS = declare(
    Column[Any]("limit_tok_s", "`--limits`: the most decode tok/s the device allows this strategy (`off` from the "
                  "uncached limit, a full-precision cache from the cached one; none for a quantized cache or a press, "
                  "which move fewer bytes, nor for a warm twin, which skips its prefix)", "tokens/s",
                  read=lambda row: _bound(row)[0]),
    Column[Any]("of_limit", "`--limits`: the limit's seconds / the measured seconds for this strategy", "share",
                  read=lambda row: _bound(row)[1]),
)  # fmt: skip
# The plain row's: bound tokens/s counted as the measured tok_s are (decode, every sequence), the measured share of
# the bound (bound seconds / measured seconds), each its side's, and the speed-up the bounds imply.
LIMITS_PAIR = declare(
    Column[Any]("uncached_limit_tok_s", "`--limits`: the most decode tok/s the device allows with the cache "
                      "off, counted as the measured tok/s are (every sequence)", "tokens/s",
                      side=(OFF, "limit_tok_s")),
    Column[Any]("cached_limit_tok_s", "`--limits`: the most decode tok/s the device allows with the cache on",
                      "tokens/s", side=(DYNAMIC, "limit_tok_s")),
    Column[Any]("uncached_of_limit", "`--limits`: the limit's seconds / the measured seconds, cache off (1 = at "
                      "the device's limit)", "share", side=(OFF, "of_limit")),
    Column[Any]("cached_of_limit", "`--limits`: the limit's seconds / the measured seconds, cache on", "share",
                      side=(DYNAMIC, "of_limit")),
    Column[Any]("limit_speedup", "`--limits`: the speed-up with each strategy at its limit, uncached limit's "
                      "seconds / cached's; not a ceiling on the measured `speedup`, which is it x `cached_of_limit` / "
                      "`uncached_of_limit`", "times faster", "speedup", read_pair=_limit_speedup),
)  # fmt: skip


def matching(result: BenchmarkRecord, config: Config) -> Limits | None:
    found = bounds(result)
    return None if found is None else next((limits for limits in found.limits if limits.config == config), None)


def limits_notes(result: BenchmarkRecord) -> list[str]:
    """Which bound governs, for the longest configuration measured, and the probed hardware it is read against."""
    found = [(config, limits) for config in result.configs if (limits := matching(result, config)) is not None]
    hardware = None if (kept := bounds(result)) is None else kept.hardware
    if not found or hardware is None:
        return []
    config, limits = max(found, key=lambda pair: (pair[0].prompt_tokens + pair[0].new_tokens, pair[0].batch))
    pair = result.only_pair(config)
    # A cache comparison's rows say each strategy's share of its bound (of_limit); the note, what governs.
    note = limits_note(limits) if pair is None else limits_note(limits, pair.reference.median_s, pair.other.median_s)
    speedup = f"; {_speedup(limits, pair)}" if math.isfinite(limits.speedup) else ""  # a saved file's may be gone
    return [f"limits ({hardware.describe()}), at {config}: {note}{speedup}"]


def _speedup(limits: Limits, pair: Pair | None) -> str:
    """The speed-up with each strategy at its limit, and the measured one beside it where there is one: a ratio of
    two least times bounds neither, so a run further from its limit than the other moves the measured one past it."""
    said = f"with each at its limit, the speed-up would be {cell('limit_speedup')(limits.speedup)}x"
    if pair is None:
        return f"{said}, a ratio of two least times, not a ceiling on the measured one"
    cached, uncached = limits.cached.reached(pair.other.median_s), limits.uncached.reached(pair.reference.median_s)
    return (
        f"{said} (limit_speedup), a ratio of two least times, not a ceiling: the measured "
        f"{cell('speedup')(pair.speedup)}x is that times cached's share of its limit over uncached's "
        f"({cached:.0%} / {uncached:.0%})"
    )
