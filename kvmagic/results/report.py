"""A result as a table: one row per (configuration, strategy), each one measurement against the reference's at the
same configuration.

The plain run is the comparison ``off,dynamic``; its table is a view of those two rows side by side, one row per
configuration, whose ``uncached_*`` and ``cached_*`` columns name the row and column they show (the column registry,
:mod:`~kvmagic.results.columns`). The notes beneath the table live in :mod:`~kvmagic.results.notes`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kvmagic.core.config import Config
from kvmagic.core.strategy import FULL_CACHE, REFERENCE, Strategy
from kvmagic.results.choice import pareto_marks
from kvmagic.results.columns import PAIR_VIEW, REGISTRY, ROW_COLUMNS, added
from kvmagic.results.limits_table import limit_values, matching, strategy_limit_values
from kvmagic.results.measurement import Pair
from kvmagic.results.prefix_table import prefix_values
from kvmagic.results.split_table import split_values, strategy_split_values

if TYPE_CHECKING:
    import pandas as pd

    from kvmagic.core.kvbytes import KVSizes
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement
    from kvmagic.results.records import Mismatch

__all__ = ["COLUMNS", "MIB", "STRATEGY_COLUMNS", "figures", "row", "short_mismatch", "strategy_row", "table"]

MIB = 2**20
COLUMNS = PAIR_VIEW  # the plain run's table
STRATEGY_COLUMNS = ROW_COLUMNS  # a comparison's table


def figures(m: Measurement) -> dict[str, float]:
    """One measurement's figures, as the tables show them: its times and spread, what its runs left, its
    compile. A measurement read from an older file may hold its bytes only in its hooked run."""
    profile = m.profile
    kv_bytes = m.kv_bytes if m.kv_bytes is not None or profile is None else profile.kv_bytes
    peak_bytes = m.peak_bytes if m.peak_bytes is not None or profile is None else profile.peak_bytes
    return {
        "s": m.median_s,
        "min_s": min(m.seconds),
        "iqr_s": m.iqr_s,
        "ttft_s": m.ttft_s if not math.isnan(m.ttft_s) or profile is None else profile.ttft_s,
        "tok_s": m.decode_tok_s,
        "kv_cache_mib": math.nan if kv_bytes is None else kv_bytes / MIB,
        "peak_mib": math.nan if peak_bytes is None else peak_bytes / MIB,
        "compile_s": m.compile_s,
    }


def row(pair: Pair, sizes: KVSizes | None = None) -> dict[str, Any]:
    """The plain run's row: its two strategies' rows side by side, each ``uncached_*`` and ``cached_*`` column the
    one of ``off``'s or ``dynamic``'s row the registry names; ``sizes`` predict the cache's bytes, layer by layer."""
    config, reference = pair.config, pair.reference
    rows = {
        m.strategy: strategy_row(config, m.strategy, m, reference, sequential=pair.sequential)
        for m in (reference, pair.other)
    }
    values: dict[str, Any] = config._asdict()
    for name in PAIR_VIEW:
        side = REGISTRY[name].side
        if side is not None:
            values[name] = rows[side[0]][side[1]]
    values["identical"] = pair.identical
    values["kv_predicted_mib"] = math.nan if sizes is None else sizes.after(*config) / MIB
    return {name: values[name] for name in PAIR_VIEW}


def strategy_row(
    config: Config, strategy: Strategy | str, m: Measurement | None, reference: Measurement | None, note: str = "",
    sizes: KVSizes | None = None, full_bytes: int | None = None, sequential: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """One strategy's line of a cache comparison; a strategy with no runs here is its ``note`` alone, and one
    that ran notes what its reader should know (``note``, and a press that held no less than ``full_bytes``,
    the full cache's). Its speed-up and interval are its :class:`Pair` with the ``reference``'s runs, as the
    plain run's row is (``sequential``: after ``-r auto``, the anytime interval)."""
    strategy = Strategy.of(strategy)
    values: dict[str, Any] = {**config._asdict(), "strategy": str(strategy)}
    if m is None:
        empty = dict.fromkeys(STRATEGY_COLUMNS[4:], math.nan)
        return {**values, **empty, "identical": None, "first_mismatch": "", "note": note}
    summary = figures(m)
    return {
        **values,
        "seconds": summary.pop("s"),
        **summary,  # its other figures are its columns of the same names
        **_speedup(m, reference, sequential),
        "identical": m.identical,
        "first_mismatch": "" if m.mismatch is None else short_mismatch(m.mismatch),
        **_quality(m),
        # Positions the returned cache has room for, in full-precision keys and values: a static cache's
        # length (sized for this row, not an earlier longer one), fewer than it holds for a quantized one.
        "cache_tokens": math.nan if m.kv_bytes is None or sizes is None else sizes.positions(m.kv_bytes, config.batch),
        "kv_promised_mib": _promised_mib(strategy, config, sizes),
        "note": "; ".join(text for text in (note, _masked(strategy, m, config, full_bytes)) if text),
    }


def _speedup(m: Measurement, reference: Measurement | None, sequential: bool) -> dict[str, float]:
    """The speed-up over the reference and its 95% interval; the reference's own row is 1 by definition, with
    no interval to give."""
    if reference is None:
        return dict.fromkeys(("speedup", "speedup_ci_low", "speedup_ci_high"), math.nan)
    pair = Pair(reference, m, sequential)
    low, high = (math.nan, math.nan) if m is reference else pair.interval
    return {"speedup": pair.speedup, "speedup_ci_low": low, "speedup_ci_high": high}


def _promised_mib(strategy: Strategy, config: Config, sizes: KVSizes | None) -> float:
    """What a press's ratio promises the cache holds at the end, in full precision; NaN for other strategies."""
    press = strategy.press
    if press is None or sizes is None:
        return math.nan
    return sizes.held_bytes(press.promised_positions(config.prompt_tokens, config.new_tokens), config.batch) / MIB


def _masked(strategy: Strategy, m: Measurement, config: Config, full_bytes: int | None) -> str:
    """What a press's row must say: that its ratio drops none of this prompt's tokens (its cache is the full one),
    or that it dropped prompt positions yet held as many bytes as the full cache, hiding them from attention
    (kvpress's head-wise masks) instead of freeing them, or its bytes read as a broken promise."""
    press = strategy.press
    if press is None:
        return ""
    if press.kept(config.prompt_tokens) >= config.prompt_tokens:
        return (
            f"{press.method} at ratio {press.ratio:g} drops none of the {config.prompt_tokens} prompt tokens: its "
            "cache is the full one"
        )
    if m.kv_bytes is None or not full_bytes or m.kv_bytes < full_bytes:
        return ""
    return (
        f"holds {m.kv_bytes / MIB:.4g} MiB, no less than the full cache: {press.method} masks the positions it "
        "drops (attention skips them) instead of freeing them"
    )


def _quality(m: Measurement) -> dict[str, float]:
    q = m.quality
    if q is None:
        return dict.fromkeys(("top1_agreement", "kl_nats", "ppl_ratio"), math.nan)
    return {"top1_agreement": q.top1_agreement, "kl_nats": q.kl_nats, "ppl_ratio": q.ppl_ratio}


def table(result: BenchmarkRecord) -> pd.DataFrame:
    """The result's table: one row per configuration (per strategy, in a cache comparison)."""
    import pandas as pd

    sizes = result.facts.kv_sizes
    # One of the two places the plain run differs (the other: shown_name): it is shown as its two rows side by side.
    if not result.plain:
        return _strategy_table(result)
    divided = result.split is not None
    extra = [*(added("--limits").pair if result.limits else ()), *(added("--tp").pair if divided else ())]
    measured = {
        pair.config: {
            **row(pair, sizes),
            **(limit_values(pair, matching(result, pair.config)) if result.limits else {}),
            **(split_values(pair) if divided else {}),
        }
        for pair in result.pairs()
    }
    if not result.predictions:
        return pd.DataFrame(list(measured.values()), columns=[*COLUMNS, *extra])
    rows = []
    for p in result.predictions:
        values: dict[str, Any] = measured.get(p.config) or p.config._asdict()
        values.update(zip(added("--predict").pair, (p.uncached_s, p.cached_s, p.speedup, p.config in measured)))
        rows.append(values)
    return pd.DataFrame(rows, columns=[*COLUMNS, *extra, *added("--predict").pair])


def _full_bytes(result: BenchmarkRecord, config: Config, sizes: KVSizes | None) -> int | None:
    """The full cache's bytes at ``config``: the dynamic row's where it ran, else as predicted layer by layer."""
    dynamic = result.measurement(FULL_CACHE, config)
    if dynamic is not None and dynamic.kv_bytes:
        return dynamic.kv_bytes
    return None if sizes is None else sizes.after(*config)


def _strategy_table(result: BenchmarkRecord) -> pd.DataFrame:
    """A comparison's table: a row per (configuration, strategy), its limit and prefix columns where asked for."""
    import pandas as pd

    sizes, reused = result.facts.kv_sizes, result.facts.prefix_tokens is not None
    divided = result.split is not None
    sequential = result.spec.repeat == "auto"
    marks = pareto_marks(result)
    rows = []
    for config in result.configs:
        reference, limits = result.measurement(REFERENCE, config), matching(result, config)
        full = _full_bytes(result, config, sizes)
        for strategy in result.strategies:
            m = result.measurement(strategy, config)
            note = result.skipped.get(strategy, "") or result.remarks.get(strategy, "")
            found = strategy_row(config, strategy, m, reference, note, sizes, full, sequential)
            found["pareto"] = marks.get((config, strategy))
            found.update(strategy_limit_values(m, limits) if result.limits else {})
            found.update(strategy_split_values(m) if divided else {})
            rows.append({**found, **(prefix_values(result, m) if reused else {})})
    extra = (
        *(added("--limits").rows if result.limits else ()),
        *(added("--tp").rows if divided else ()),
        *(added("--prefix").rows if reused else ()),
    )
    return pd.DataFrame(rows, columns=[*STRATEGY_COLUMNS, *extra])


def short_mismatch(mismatch: Mismatch) -> str:
    """Where, and which tokens, for a table cell."""
    sequence = f" in sequence {mismatch.sequence + 1}" if mismatch.sequence else ""
    return f"{mismatch.position}: {mismatch.expected} vs {mismatch.actual}{sequence}"
