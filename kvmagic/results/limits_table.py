"""The hardware's limit beside what was measured (``limits``): its columns, its note, its records as JSON.

A measured time alone does not say whether it is good; its share of what the device's copy bandwidth
and matrix throughput allow does (:mod:`kvmagic.core.limits` holds the arithmetic).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kvmagic.core.frontier import layout
from kvmagic.core.limits import ConditionLimit, Hardware, Limits, limits_note

if TYPE_CHECKING:
    from kvmagic.results.result import BenchmarkResult, Measurement

__all__ = [
    "LIMIT_COLUMNS", "STRATEGY_LIMIT_COLUMNS", "bounds_from_dict", "bounds_to_dict", "hardware_from_dict",
    "limit_values", "limits_from_dict", "limits_notes", "matching", "strategy_limit_values",
]  # fmt: skip

LIMIT_COLUMNS = ("uncached_limit_tok_s", "cached_limit_tok_s", "uncached_of_limit", "cached_of_limit", "limit_speedup")
STRATEGY_LIMIT_COLUMNS = ("limit_tok_s", "of_limit")  # a cache comparison's row: its strategy's bound


def limit_values(m: Measurement, limits: Limits | None) -> dict[str, float]:
    """A row's limit columns: bound tokens/s counted as the measured tok_s are (decode, every sequence), the
    measured share of the bound (bound seconds / measured seconds) and the speed-up the bounds imply."""
    if limits is None:
        return dict.fromkeys(LIMIT_COLUMNS, math.nan)
    return {
        "uncached_limit_tok_s": m.batch * limits.uncached.decode_tok_s,
        "cached_limit_tok_s": m.batch * limits.cached.decode_tok_s,
        "uncached_of_limit": limits.uncached.reached(m.uncached_s),
        "cached_of_limit": limits.cached.reached(m.cached_s),
        "limit_speedup": limits.speedup,
    }


def strategy_limit_values(m: Measurement, name: str, limits: Limits | None) -> dict[str, float]:
    """A strategy row's bound tok/s and the share of it measured: ``off`` is bound as the uncached condition, a
    cache of full-precision keys and values as the cached one. A quantized cache moves fewer bytes than the
    bound counts, so it has none."""
    times, kind = m.times(name), layout(name).kind
    if limits is None or not times or kind == "quantized":
        return dict.fromkeys(STRATEGY_LIMIT_COLUMNS, math.nan)
    bound = limits.uncached if kind == "none" else limits.cached
    return {"limit_tok_s": m.batch * bound.decode_tok_s, "of_limit": bound.reached(statistics.median(times))}


def matching(result: BenchmarkResult, m: Measurement) -> Limits | None:
    for limits in result.limits:
        if (limits.prompt_tokens, limits.new_tokens, limits.batch) == (m.prompt_tokens, m.new_tokens, m.batch):
            return limits
    return None


def limits_notes(result: BenchmarkResult) -> list[str]:
    """Which bound governs, for the longest configuration measured, and the probed hardware it is read against."""
    found = [(m, limits) for m in result.measurements if (limits := matching(result, m)) is not None]
    if not found or result.hardware is None:
        return []
    m, limits = max(found, key=lambda pair: (pair[0].prompt_tokens + pair[0].new_tokens, pair[0].batch))
    where = f"{m.prompt_tokens}+{m.new_tokens} tokens" + (f" x {m.batch} sequences" if m.batch > 1 else "")
    # A cache comparison's rows say each strategy's share of its bound (of_limit); the note, what governs.
    note = limits_note(limits) if result.strategies else limits_note(limits, m.uncached_s, m.cached_s)
    return [f"limits ({result.hardware.describe()}), at {where}: {note}"]


def bounds_to_dict(hardware: Hardware | None, limits: list[Limits]) -> dict[str, Any]:
    """A result's probed hardware and bounds as JSON fields (a missing number becomes null on writing)."""
    return {
        "hardware": None if hardware is None else dataclasses.asdict(hardware),
        "limits": list(map(_asdict, limits)),
    }


def bounds_from_dict(data: Mapping[str, Any]) -> dict[str, Any]:
    """What :func:`bounds_to_dict` wrote, as a result's fields; a result saved without them has none."""
    return {
        "hardware": hardware_from_dict(data.get("hardware")),
        "limits": list(map(limits_from_dict, data.get("limits", []))),
    }


def _asdict(limits: Limits) -> dict[str, Any]:
    return dataclasses.asdict(limits)


def hardware_from_dict(data: Mapping[str, Any] | None) -> Hardware | None:
    return None if data is None else Hardware(**_numbers(data))


def limits_from_dict(data: Mapping[str, Any]) -> Limits:
    values = dict(data)
    for name in ("uncached", "cached"):
        values[name] = ConditionLimit(**_numbers(values[name]))
    if values.get("weights_share") is None:
        values["weights_share"] = math.nan
    return Limits(**values)


def _numbers(data: Mapping[str, Any]) -> dict[str, Any]:
    """Numbers strict JSON kept as null, back as NaN."""
    return {k: math.nan if v is None else v for k, v in data.items()}
