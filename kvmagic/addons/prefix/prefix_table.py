"""A reused prefix beside its cold run (``prefix``): what a result keeps, each warm twin's columns and the note that
sums them up.

A warm twin (``dynamic+prefix``) and its cold self (``dynamic``) ran the same configuration in the same
rounds; the one started from the cache of the prompt's first tokens, the other from nothing. Everything
here comes from those two measurements and the number of tokens reused, all a result keeps of ``--prefix``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kvmagic.addons.prefix.prefix_request import NAME
from kvmagic.results.columns import Column, cell, declare, interval, some_value
from kvmagic.results.measurement import Pair

if TYPE_CHECKING:
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement

__all__ = ["PREFIX_ROWS", "prefix_notes", "prefix_values", "reused"]


def reused(result: BenchmarkRecord) -> int | None:
    """The prompt's first tokens whose cache the warm twins started from; None where the run reused none."""
    found: int | None = result.addons.get(NAME)
    return found


def _cold(result: BenchmarkRecord, m: Measurement) -> Measurement | None:
    """The measurement of the strategy a warm twin twins, at its configuration."""
    return result.measurement(m.strategy.cold, m.config) if m.strategy.warm else None


def prefix_values(result: BenchmarkRecord, m: Measurement | None) -> dict[str, Any]:
    """A row's prefix columns: the tokens it reused (0 for a cold strategy), and for a warm twin how many times
    faster than its cold self it ran (whole run, time to first token) and whether its first run generated its cold
    self's first run's tokens."""
    empty: dict[str, Any] = {"reused_tokens": math.nan, "warm_speedup": math.nan, "warm_ttft_speedup": math.nan}
    empty["same_as_cold"] = None
    if m is None:
        return empty
    cold = _cold(result, m)
    if cold is None:
        return {**empty, "reused_tokens": 0}
    return {
        "reused_tokens": reused(result),
        "warm_speedup": cold.median_s / m.median_s,
        "warm_ttft_speedup": cold.ttft_s / m.ttft_s if m.ttft_s > 0 else math.nan,
        "same_as_cold": m.generated_ids == cold.generated_ids,
    }


def _of(name: str) -> Any:
    return lambda row: prefix_values(row.record, row.m)[name]


PREFIX_ROWS = declare(
    Column[Any]("reused_tokens", "`--prefix`: the prompt's first tokens whose cache a warm twin (`NAME+prefix`) "
                  "starts each run from (a copy of one built once, untimed); 0 for a strategy that starts cold",
                  "tokens", read=_of("reused_tokens")),
    Column[Any]("warm_speedup", "`--prefix`: the cold strategy's median seconds over its warm twin's (`dynamic` "
                  "over `dynamic+prefix`): what keeping the prefix's cache saves", "times faster", "speedup",
                  read=_of("warm_speedup"), shown=True, after="identical", shown_when=some_value("warm_speedup")),
    Column[Any]("warm_ttft_speedup", "`--prefix`: the same for the time to first token, where the saving shows "
                  "most", "times faster", "speedup", read=_of("warm_ttft_speedup")),
    Column[Any]("same_as_cold", "`--prefix`: whether the warm twin's first run generated the same tokens as its "
                  "cold self's first run", read=_of("same_as_cold")),
)  # fmt: skip


def prefix_notes(result: BenchmarkRecord) -> list[str]:
    """Per configuration, what each warm twin saved against its cold self, in a sentence."""
    tokens = reused(result)
    if tokens is None:
        return []
    found = []
    for config in result.configs:
        parts = [_saved(result, m) for m in result.measurements if m.config == config and _cold(result, m)]
        if parts:
            found.append(
                f"{config if len(result.configs) > 1 else 'prefix'}: the prompt's first {tokens} tokens reused: each "
                f"warm run starts from a copy of their cache, built once, untimed; {'; '.join(parts)}"
            )
    return found


def _saved(result: BenchmarkRecord, m: Measurement) -> str:
    cold = _cold(result, m)
    assert cold is not None
    values = prefix_values(result, m)
    same = "the same tokens" if values["same_as_cold"] else "other tokens than cold"
    seconds = cell("ttft_s")
    rounds = Pair(cold, m, sequential=result.spec.repeat == "auto")  # the same rounds: the cold run as reference
    return (
        f"{m.strategy} reached its first token in {seconds(m.ttft_s)} s against {seconds(cold.ttft_s)} s cold "
        f"({_ratio(values['warm_ttft_speedup'])}), the whole run {_ratio(values['warm_speedup'], rounds.interval)}, "
        f"with {same}"
    )


def _ratio(speedup: float, spread: tuple[float, float] = (math.nan, math.nan)) -> str:
    """A warm-over-cold ratio in words: below 1 the warm run was the slower one, and says so; one that reads 1.00x
    either way up, or whose pairs' 95% interval holds 1, is neither faster nor slower."""
    if not speedup > 0:
        return "not timed"
    ratio = cell("warm_speedup")
    low, high = spread
    if low <= 1 <= high:
        return f"{ratio(speedup)}x: about as fast (its 95% interval {interval('warm_speedup', low, high)} holds 1)"
    if ratio(max(speedup, 1 / speedup)) == ratio(1.0):
        return f"{ratio(speedup)}x: about as fast"
    return f"{ratio(1 / speedup)}x slower" if speedup < 1 else f"{ratio(speedup)}x faster"
