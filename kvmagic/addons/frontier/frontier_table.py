"""What fits in memory (``frontier``): per cache strategy the longest context and the largest batch
that fit in the memory free, as a result keeps it: its note and its table.

The arithmetic is :mod:`~kvmagic.addons.frontier.reach`'s; a check run at a predicted frontier sits beside it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from kvmagic.results.columns import Column, Form, names

if TYPE_CHECKING:
    import pandas as pd

    from kvmagic.addons.frontier.reach import Frontier
    from kvmagic.results.benchmark_record import BenchmarkRecord

__all__ = ["FRONTIER", "FRONTIER_COLUMNS", "NAME", "frontier_notes", "frontier_of", "frontier_table"]

NAME = "frontier"

# A table of its own: its columns are not the benchmark's, though some share a name (not declared with them).
_DECLARED: tuple[tuple[str, str, str, Form], ...] = (
    ("strategy", "the strategy (`uncached`/`cached` for the plain run's pair)", "", "text"),
    ("prompt_tokens", ("the prompt tokens of the configuration the frontier is predicted around (the largest "
     "measured)"), "tokens", "figure"),
    ("new_tokens", "that configuration's new tokens", "tokens", "figure"),
    ("batch", "that configuration's batch", "", "figure"),
    ("kv_bytes_per_token", "KV bytes per position per sequence, averaged over the configuration's cached positions",
     "bytes", "figure"),
    ("peak_mib", "the configuration's predicted peak memory beyond the weights", "MiB", "figure"),
    ("max_new_tokens", "the most new tokens that fit after the given prompt; 0 if not even one fits", "tokens",
     "figure"),
    ("max_context", "the longest context, the prompt plus `max_new_tokens` (0 if none fits)", "tokens", "figure"),
    ("max_prompt", "the longest prompt that still leaves room for the given new tokens; 0 if none does", "tokens",
     "figure"),
    ("max_batch", "the largest batch that fits at the given prompt and new tokens", "", "figure"),
    ("limited_by", "`memory`, or `positions` where the model's position limit comes before memory", "", "text"),
    ("checked_peak_mib", "`--frontier check`: the tensors the check run took at the predicted length", "MiB",
     "figure"),
    ("check_error", "`--frontier check`: the prediction's error on tensors (+0.05: they took 5% more than predicted)",
     "share", "figure"),
    ("fitted", "`--frontier check`: whether the device's peak stayed within the memory free", "", "text"),
)  # fmt: skip
FRONTIER = tuple(Column[Any](name, meaning, unit, form) for name, meaning, unit, form in _DECLARED)
FRONTIER_COLUMNS = names(FRONTIER)
_MIB = 2**20


def frontier_of(result: BenchmarkRecord) -> Frontier | None:
    """What ``result`` keeps of the frontier; None where it predicted none."""
    found: Frontier | None = result.addons.get(NAME)
    return found


def frontier_table(result: BenchmarkRecord) -> pd.DataFrame:
    """One row per strategy: its predicted frontier, and where a check ran, what the run took against it."""
    import pandas as pd

    found = frontier_of(result)
    checks = {check.strategy: check for check in (found.checks if found else [])}
    rows = []
    for row in found.rows if found else []:
        check = checks.get(row.strategy)
        values = {**dataclasses.asdict(row), "peak_mib": row.peak_bytes / _MIB, "max_context": row.max_context}
        values.update(
            strategy=result.shown_name(row.strategy),
            checked_peak_mib=math.nan if check is None else check.tensor_bytes / _MIB,
            check_error=math.nan if check is None else check.error,
            fitted=None if check is None else check.fitted,
        )
        rows.append(values)
    return pd.DataFrame(rows, columns=list(FRONTIER_COLUMNS))


def frontier_notes(result: BenchmarkRecord) -> list[str]:
    """Per strategy, in a sentence: how long a context and how large a batch fit, and what a check found."""
    found, name = frontier_of(result), result.shown_name
    if not found or not found.rows:
        return []
    parts = [
        f"{name(row.strategy)} holds up to {row.max_context} tokens of context and a batch of {row.max_batch}"
        + (" (the model's positions come first)" if row.limited_by == "positions" else "")
        for row in found.rows
    ]
    notes = [f"frontier ({found.free_bytes / 2**30:.3g} GiB free, around {found.rows[0].config}): " + "; ".join(parts)]
    for strategy, seconds in found.unchecked.items():
        notes.append(
            f"frontier check, {name(strategy)}: not run, it would take about {seconds:.3g} s, past max_seconds"
        )
    for check in found.checks:
        verdict = "fitted" if check.fitted else "did not fit"
        notes.append(
            f"frontier check, {name(check.strategy)} at {check.config}: {verdict} in "
            f"{check.budget_bytes / 2**30:.3g} GiB; its tensors took {check.error:+.1%} against the prediction, and "
            f"the device's peak was {check.measured_bytes / 2**20:.4g} MiB (on a CPU, the whole process's growth)"
        )
    return notes
