"""The hardware's limit beside what was measured (``limits``): its columns and its note.

A measured time alone does not say whether it is good; its share of what the device's copy bandwidth
and matrix throughput allow does (:mod:`kvmagic.core.limits` holds the arithmetic).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kvmagic.core.limits import Limits, limits_note
from kvmagic.results.columns import added, cell

if TYPE_CHECKING:
    from kvmagic.core.config import Config
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement, Pair

__all__ = [
    "limit_values",
    "limits_notes",
    "matching",
    "strategy_limit_values",
]


def limit_values(pair: Pair, limits: Limits | None) -> dict[str, float]:
    """The plain row's limit columns: bound tokens/s counted as the measured tok_s are (decode, every sequence),
    the measured share of the bound (bound seconds / measured seconds) and the speed-up the bounds imply."""
    if limits is None:
        return dict.fromkeys(added("--limits").pair, math.nan)
    batch = pair.config.batch
    return {
        "uncached_limit_tok_s": batch * limits.uncached.decode_tok_s,
        "cached_limit_tok_s": batch * limits.cached.decode_tok_s,
        "uncached_of_limit": limits.uncached.reached(pair.reference.median_s),
        "cached_of_limit": limits.cached.reached(pair.other.median_s),
        "limit_speedup": limits.speedup,
    }


def strategy_limit_values(m: Measurement | None, limits: Limits | None) -> dict[str, float]:
    """A strategy row's bound tok/s and the share of it measured: ``off`` is bound as the uncached strategy, a
    cache of full-precision keys and values as the cached one. A quantized cache and a press (which drops
    positions) move fewer bytes than the bound counts, and a warm twin computes less than the bound counts (not
    its prompt's prefix): none of them has one."""
    if limits is None or m is None or not m.strategy.lossless or m.strategy.warm:
        return dict.fromkeys(added("--limits").rows, math.nan)
    bound = limits.cached if m.strategy.caches else limits.uncached
    return {"limit_tok_s": m.config.batch * bound.decode_tok_s, "of_limit": bound.reached(m.median_s)}


def matching(result: BenchmarkRecord, config: Config) -> Limits | None:
    return next((limits for limits in result.limits if limits.config == config), None)


def limits_notes(result: BenchmarkRecord) -> list[str]:
    """Which bound governs, for the longest configuration measured, and the probed hardware it is read against."""
    found = [(config, limits) for config in result.configs if (limits := matching(result, config)) is not None]
    if not found or result.hardware is None:
        return []
    config, limits = max(found, key=lambda pair: (pair[0].prompt_tokens + pair[0].new_tokens, pair[0].batch))
    pair = result.only_pair(config)
    # A cache comparison's rows say each strategy's share of its bound (of_limit); the note, what governs.
    note = limits_note(limits) if pair is None else limits_note(limits, pair.reference.median_s, pair.other.median_s)
    speedup = f"; {_speedup(limits, pair)}" if math.isfinite(limits.speedup) else ""  # a saved file's may be gone
    return [f"limits ({result.hardware.describe()}), at {config}: {note}{speedup}"]


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
