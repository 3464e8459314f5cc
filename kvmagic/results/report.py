"""A result as a reader sees it: the table's rows and the plain-language notes beneath them.

One row builder serves both layouts: :func:`condition_summary` gives each condition's figures,
the plain run puts its two conditions side by side (``uncached_s``, ``cached_s``, ...), and a
``cache`` comparison puts one strategy per row.
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any

from kvmagic.core import stats
from kvmagic.core.intervals import speedup_estimate
from kvmagic.core.spec import CACHED, CONDITIONS, UNCACHED
from kvmagic.results.frontier_table import frontier_notes
from kvmagic.results.limits_table import (
    LIMIT_COLUMNS,
    STRATEGY_LIMIT_COLUMNS,
    limit_values,
    limits_notes,
    matching,
    strategy_limit_values,
)

if TYPE_CHECKING:
    import pandas as pd

    from kvmagic.results.records import Mismatch, Prediction
    from kvmagic.results.result import BenchmarkResult, Measurement

__all__ = [
    "COLUMNS", "MIB", "NEAR_TIE", "PREDICTED_COLUMNS", "STRATEGY_COLUMNS", "condition_summary", "describe_mismatch",
    "notes", "row", "short_mismatch", "strategy_row", "table", "where",
]  # fmt: skip

MIB = 2**20
NEAR_TIE = 0.05  # a logit gap this small is within the rounding noise of half precision
COLUMNS = (
    "prompt_tokens", "new_tokens", "batch", "uncached_s", "cached_s", "speedup", "identical",
    "uncached_ttft_s", "cached_ttft_s", "uncached_tok_s", "cached_tok_s",
    "kv_cache_mib", "kv_predicted_mib", "uncached_peak_mib", "cached_peak_mib",
    "uncached_min_s", "cached_min_s", "uncached_iqr_s", "cached_iqr_s", "speedup_ci_low", "speedup_ci_high",
)  # fmt: skip
PREDICTED_COLUMNS = ("predicted_uncached_s", "predicted_cached_s", "predicted_speedup", "measured")
# With a cache comparison: one row per (prompt_tokens, new_tokens, batch, strategy), each against the "off" runs.
STRATEGY_COLUMNS = (
    "prompt_tokens", "new_tokens", "batch", "strategy", "seconds", "tok_s", "speedup", "identical", "first_mismatch",
    "kv_cache_mib", "cache_tokens", "peak_mib", "compile_s", "note",
)  # fmt: skip


def condition_summary(m: Measurement, name: str) -> dict[str, float]:
    """One condition's figures in a measurement: its times and spread, what its runs left, its compile."""
    times, profile = m.times(name), m.profiles.get(name)
    kv_bytes, peak_bytes = m.kv_bytes.get(name), m.peak_bytes.get(name)
    if profile is not None:  # the hooked run tells what the timed runs could not (and what older results kept)
        kv_bytes = profile.kv_bytes if kv_bytes is None else kv_bytes
        peak_bytes = profile.peak_bytes if peak_bytes is None else peak_bytes
    return {
        "s": statistics.median(times),
        "min_s": min(times),
        "iqr_s": m.iqr_s(name),
        "ttft_s": m.ttft_s.get(name, profile.ttft_s if profile is not None else math.nan),
        "tok_s": m.decode_tok_s(name),
        "kv_cache_mib": math.nan if kv_bytes is None else kv_bytes / MIB,
        "peak_mib": math.nan if peak_bytes is None else peak_bytes / MIB,
        "compile_s": m.compile_s.get(name, math.nan),
    }


def row(m: Measurement) -> dict[str, Any]:
    """The plain run's row: both conditions side by side."""
    uncached, cached = condition_summary(m, UNCACHED), condition_summary(m, CACHED)
    ci_low, ci_high = m.speedup_ci
    values: dict[str, Any] = {"prompt_tokens": m.prompt_tokens, "new_tokens": m.new_tokens, "batch": m.batch}
    values.update(uncached_s=uncached["s"], cached_s=cached["s"], speedup=m.speedup, identical=m.identical)
    for key in ("ttft_s", "tok_s"):
        values.update({f"{name}_{key}": summary[key] for name, summary in zip(CONDITIONS, (uncached, cached))})
    values["kv_cache_mib"] = cached["kv_cache_mib"]
    values["kv_predicted_mib"] = math.nan if m.kv_predicted_bytes is None else m.kv_predicted_bytes / MIB
    for key in ("peak_mib", "min_s", "iqr_s"):
        values.update({f"{name}_{key}": summary[key] for name, summary in zip(CONDITIONS, (uncached, cached))})
    values.update(speedup_ci_low=ci_low, speedup_ci_high=ci_high)
    return values


def strategy_row(m: Measurement, name: str, note: str = "") -> dict[str, Any]:
    """One strategy's line of a cache comparison; a strategy with no runs here is its ``note`` alone."""
    values: dict[str, Any] = {"prompt_tokens": m.prompt_tokens, "new_tokens": m.new_tokens, "batch": m.batch}
    values["strategy"] = name
    if not m.times(name):
        empty = dict.fromkeys(STRATEGY_COLUMNS[4:], math.nan)
        return {**values, **empty, "identical": None, "first_mismatch": "", "note": note}
    summary, mismatch = condition_summary(m, name), m.mismatches.get(name)
    reference = statistics.median(m.times(m.runs[0]))
    return {
        **values,
        "seconds": summary["s"],
        "tok_s": summary["tok_s"],
        "speedup": reference / summary["s"],
        "identical": mismatch is None,
        "first_mismatch": "" if mismatch is None else short_mismatch(mismatch),
        "kv_cache_mib": summary["kv_cache_mib"],
        "cache_tokens": _positions(m, name),
        "peak_mib": summary["peak_mib"],
        "compile_s": summary["compile_s"],
        "note": "",
    }


def _positions(m: Measurement, name: str) -> float:
    """Positions the cache a strategy's timed run returned has room for, counted in full-precision keys
    and values: a static cache's length (sized for this row, not an earlier longer one), fewer for a
    quantized cache than the tokens it holds."""
    kv_bytes = m.kv_bytes.get(name)
    if kv_bytes is None or not m.kv_position_bytes:
        return math.nan
    return kv_bytes / m.kv_position_bytes


def table(result: BenchmarkResult) -> pd.DataFrame:
    """The result's table: one row per configuration (per strategy, in a cache comparison)."""
    import pandas as pd

    if result.strategies:
        rows = [
            {**strategy_row(m, n, result.skipped.get(n, "")), **_strategy_limits(result, m, n)}
            for m in result.measurements
            for n in result.strategies
        ]
        return pd.DataFrame(rows, columns=[*STRATEGY_COLUMNS, *(STRATEGY_LIMIT_COLUMNS if result.limits else ())])
    extra = list(LIMIT_COLUMNS) if result.limits else []
    if not result.predictions:
        rows = [{**row(m), **_limits(result, m)} for m in result.measurements]
        return pd.DataFrame(rows, columns=[*COLUMNS, *extra])
    measured = {(m.prompt_tokens, m.new_tokens, m.batch): m for m in result.measurements}
    rows = []
    for p in result.predictions:
        found = measured.get((p.prompt_tokens, p.new_tokens, p.batch))
        values: dict[str, Any] = (
            {**row(found), **_limits(result, found)}
            if found is not None
            else {"prompt_tokens": p.prompt_tokens, "new_tokens": p.new_tokens, "batch": p.batch}
        )
        values.update(zip(PREDICTED_COLUMNS, (p.uncached_s, p.cached_s, p.speedup, found is not None)))
        rows.append(values)
    return pd.DataFrame(rows, columns=[*COLUMNS, *extra, *PREDICTED_COLUMNS])


def _limits(result: BenchmarkResult, m: Measurement) -> dict[str, float]:
    return limit_values(m, matching(result, m)) if result.limits else {}


def _strategy_limits(result: BenchmarkResult, m: Measurement, name: str) -> dict[str, float]:
    return strategy_limit_values(m, name, matching(result, m)) if result.limits else {}


def short_mismatch(mismatch: Mismatch) -> str:
    """Where, and which tokens, for a table cell."""
    expected = f"{mismatch.expected_token!r} (id {mismatch.expected_id})"
    sequence = f" in sequence {mismatch.sequence + 1}" if mismatch.sequence else ""
    return f"{mismatch.position}: {expected} vs {mismatch.actual_token!r} (id {mismatch.actual_id}){sequence}"


def where(m: Measurement | Prediction) -> str:
    """A configuration as the notes name it: ``16+64 tokens``, ``16+64 tokens x 4 sequences`` in a batch."""
    return f"{m.prompt_tokens}+{m.new_tokens} tokens" + (f" x {m.batch} sequences" if m.batch > 1 else "")


def describe_mismatch(mismatch: Mismatch, runs: tuple[str, ...]) -> str:
    sequence = f", sequence {mismatch.sequence + 1} of its batch" if mismatch.sequence else ""
    text = (
        f"generated tokens differ from position {mismatch.position}: {mismatch.expected_token!r} "
        f"(id {mismatch.expected_id}, first {runs[0]} run) vs {mismatch.actual_token!r} "
        f"(id {mismatch.actual_id}, {runs[mismatch.run]} run{sequence})"
    )
    if mismatch.margin is not None:
        text += f"; there the {runs[mismatch.run]} run's top two logits were {mismatch.margin:.4g} apart"
        if mismatch.margin < NEAR_TIE:
            text += " (a near tie: rounding in float16/bfloat16 can flip it)"
    return text


def notes(result: BenchmarkResult) -> list[str]:
    """Plain-language remarks a reader of the table should not miss."""
    found = [*_sweep_notes(result), *_prediction_notes(result), *_auto_repeat_notes(result), *limits_notes(result)]
    found += frontier_notes(result)
    shipped = result.metadata.get("model_generation_settings")
    if shipped:
        settings = ", ".join(f"{key}={value!r}" for key, value in shipped.items())
        found.append(f"the model ships {settings}: turned off here, so its own defaults generate differently")
    for m in result.measurements:
        if m.mismatch is not None and not result.strategies:  # a comparison says it per strategy
            found.append(f"{where(m)}: {describe_mismatch(m.mismatch, m.runs)}")
        for condition in dict.fromkeys(m.runs):
            spread = m.spread(condition)
            if spread > stats.SPREAD_WARNING:
                found.append(
                    f"{where(m)}: warning: {condition} times vary (IQR is {spread:.0%} of the median, over "
                    f"{stats.SPREAD_WARNING:.0%}): close other work or raise -r before trusting the speed-up"
                )
    return found


def _sweep_notes(result: BenchmarkResult) -> list[str]:
    found = []
    if result.partial:
        planned = result.metadata.get("configurations", "?")
        stopped = result.metadata.get("stopped", "interrupted")
        found.append(
            f"partial: {stopped} after {len(result.measurements)} of {planned} configurations; "
            "the rows shown are complete, the rest were not measured"
        )
        if stopped.startswith("out of"):
            found.append("to measure the rest: lower -n or -p, or load the model with a smaller --dtype")
    natural = result.metadata.get("natural_prompt_tokens")
    if result.metadata.get("prompt_stretched") and natural:
        lengths = ", ".join(str(n) for n in dict.fromkeys(m.prompt_tokens for m in result.measurements))
        found.append(f"prompt stretched: the cell's {natural} tokens repeated (or cut) to {lengths} tokens")
    return found


def _prediction_notes(result: BenchmarkResult) -> list[str]:
    if not result.predictions or result.cost_model is None:
        return []
    found = []
    measured = {(m.prompt_tokens, m.new_tokens, m.batch) for m in result.measurements}
    skipped = [p for p in result.predictions if (p.prompt_tokens, p.new_tokens, p.batch) not in measured]
    if skipped and not result.partial:
        rows = ", ".join(where(p) for p in skipped)
        budget = result.metadata.get("max_seconds", 0)
        found.append(
            f"predicted only (measured=False): {rows}; measuring them would pass the {budget:g} s "
            "budget (--max-seconds)"
        )
    largest = max(result.predictions, key=lambda p: p.prompt_tokens + p.new_tokens)
    weights = result.metadata.get("weight_bytes")
    found += result.cost_model.explain(
        largest.prompt_tokens, largest.new_tokens, kv_bytes=largest.kv_bytes, weight_bytes=weights
    )
    return found


def _auto_repeat_notes(result: BenchmarkResult) -> list[str]:
    if result.metadata.get("repeat") != "auto":
        return []
    target, cap = result.metadata["ci_target"], result.metadata["auto_cap"]
    found = []
    for m in result.measurements:
        low, high = m.speedup_ci
        middle = speedup_estimate(m.times(UNCACHED), m.times(CACHED))  # what the stop rule measures from
        width = stats.relative_half_width(middle, low, high)
        verdict = (
            f"within the ±{target:.0%} target" if width <= target else f"the {cap:g} s cap (--auto-cap) came first"
        )
        found.append(
            f"-r auto: {where(m)} took {len(m.times(CACHED))} pairs; 95% interval "
            f"{low:.3g}-{high:.3g}x reaches ±{width:.1%} from the median pair's {middle:.3g}x: {verdict}"
        )
    return found
