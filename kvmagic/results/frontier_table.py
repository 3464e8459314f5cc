"""How far memory reaches (``frontier``): per cache strategy the longest context and the largest batch
that fit in the memory free, its note, its table, and its records as JSON.

The arithmetic is :mod:`kvmagic.core.frontier`'s; a check run at a predicted frontier sits beside it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kvmagic.core.frontier import FitCheck, FrontierRow

if TYPE_CHECKING:
    import pandas as pd

    from kvmagic.results.result import BenchmarkResult

__all__ = ["FRONTIER_COLUMNS", "frontier_notes", "frontier_table", "reach_from_dict", "reach_to_dict"]

FRONTIER_COLUMNS = (
    "strategy", "prompt_tokens", "new_tokens", "batch", "kv_bytes_per_token", "peak_mib", "max_new_tokens",
    "max_context", "max_prompt", "max_batch", "limited_by", "checked_peak_mib", "check_error", "fitted",
)  # fmt: skip
_MIB = 2**20


def frontier_table(result: BenchmarkResult) -> pd.DataFrame:
    """One row per strategy: its predicted reach, and where a check ran, what the run took against it."""
    import pandas as pd

    checks = {check.strategy: check for check in result.frontier_checks}
    rows = []
    for row in result.frontier:
        check = checks.get(row.strategy)
        values = {**dataclasses.asdict(row), "peak_mib": row.peak_bytes / _MIB, "max_context": row.max_context}
        values.update(
            checked_peak_mib=math.nan if check is None else check.tensor_bytes / _MIB,
            check_error=math.nan if check is None else check.error,
            fitted=None if check is None else check.fitted,
        )
        rows.append(values)
    return pd.DataFrame(rows, columns=list(FRONTIER_COLUMNS))


def frontier_notes(result: BenchmarkResult) -> list[str]:
    """Per strategy, in a sentence: how long a context and how large a batch fit, and what a check found."""
    if not result.frontier:
        return []
    free = result.metadata.get("frontier_free_bytes", math.nan) / 2**30
    first = result.frontier[0]
    where = f"{first.prompt_tokens}+{first.new_tokens} tokens x {first.batch}"
    parts = [
        f"{row.strategy} holds up to {row.max_context} tokens of context and a batch of {row.max_batch}"
        + (" (the model's positions come first)" if row.limited_by == "positions" else "")
        for row in result.frontier
    ]
    notes = [f"frontier ({free:.3g} GiB free, around {where}): " + "; ".join(parts)]
    for strategy, seconds in result.metadata.get("frontier_unchecked", {}).items():
        notes.append(f"frontier check, {strategy}: not run, it would take about {seconds:.3g} s, past max_seconds")
    for check in result.frontier_checks:
        verdict = "fitted" if check.fitted else "did not fit"
        notes.append(
            f"frontier check, {check.strategy} at {check.prompt_tokens}+{check.new_tokens} tokens: {verdict} in "
            f"{check.budget_bytes / 2**30:.3g} GiB; its tensors took {check.error:+.1%} against the prediction, and "
            f"the device's peak was {check.measured_bytes / 2**20:.4g} MiB (on a CPU, the whole process's growth)"
        )
    return notes


def reach_to_dict(frontier: list[FrontierRow], checks: list[FitCheck]) -> dict[str, Any]:
    return {
        "frontier": [dataclasses.asdict(r) for r in frontier],
        "frontier_checks": [dataclasses.asdict(c) for c in checks],
    }


def reach_from_dict(data: Mapping[str, Any]) -> dict[str, Any]:
    """What :func:`reach_to_dict` wrote, as a result's fields; a result saved without them has none."""
    return {
        "frontier": [FrontierRow(**row) for row in data.get("frontier", [])],
        "frontier_checks": [FitCheck(**_numbers(check)) for check in data.get("frontier_checks", [])],
    }


def _numbers(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: math.nan if v is None else v for k, v in data.items()}
