"""A regression gate over a comparison: ``--fail-on speedup:-5%`` for CI steps and ``git bisect run``.

A row fails a threshold when its value moved past the threshold against the saved run *and* the
comparison calls the row's change significant (its ``significant`` column, which judges the row as a
whole): a move inside the runs' noise never fails a build.
Where a row moved past a threshold but the comparison has no verdict (a run timed a single round), where no
row matches a saved one, or where a row lacks the metric, the gate cannot answer and says so, with what would
let it, rather than guess either way.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvmagic.addons.baseline.compare import row_key
from kvmagic.core.config import Config
from kvmagic.core.strategy import Strategy
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from kvmagic.addons.baseline.compare import Comparison

__all__ = [
    "METRICS", "STRATEGY_METRICS", "GateVerdict", "Row", "Threshold", "fail_on_form", "gate", "judge", "parse_fail_on",
]  # fmt: skip

METRICS = ("speedup", "uncached_s", "cached_s")
STRATEGY_METRICS = ("speedup", "seconds")  # a comparison of strategies has one row per strategy
_FORM = (
    "METRIC:+N% or METRIC:-N% with METRIC one of {metrics}, e.g. speedup:-5% or {timed}:+10%; several comma-separated"
)
_SPEC = re.compile(r"^\s*(?P<metric>[a-z_]+)\s*:\s*(?P<sign>[+-])\s*(?P<size>\d+(?:\.\d*)?|\.\d+)\s*%\s*$")
_ROUNDING = 1e-9  # a change exactly at the threshold is not past it, whatever floating point makes of it


@dataclass(frozen=True)
class Threshold:
    """Fail when ``metric`` changed by more than ``change`` (a signed fraction) in its direction."""

    metric: str
    change: float

    def crossed(self, now: float, was: float) -> bool:
        moved = now / was - 1
        return moved < self.change - _ROUNDING if self.change < 0 else moved > self.change + _ROUNDING

    def __str__(self) -> str:
        return f"{self.metric}:{self.change * 100:+g}%"


def parse_fail_on(specs: str | Iterable[str], strategies: bool = False) -> tuple[Threshold, ...]:
    """Thresholds from ``"speedup:-5%,cached_s:+10%"`` (or several such strings, as a repeated flag gives);
    with ``strategies`` (a ``cache`` comparison), the metrics its rows have: ``speedup`` and ``seconds``."""
    metrics, form = STRATEGY_METRICS if strategies else METRICS, fail_on_form(strategies)
    parts = [part for spec in ([specs] if isinstance(specs, str) else specs) for part in spec.split(",")]
    thresholds = []
    for part in parts:
        match = _SPEC.match(part)
        if match is None or match["metric"] not in metrics:
            raise KVMagicError(f"cannot read {{fail_on}} {part.strip()!r}: write {form}", "fail_on")
        size = float(match["size"]) / 100
        if match["sign"] == "-" and size >= 1:  # a ratio or a time is above 0: it cannot fall by all of itself
            raise KVMagicError(
                f"{{fail_on}} {part.strip()!r} can never fail: {match['metric']} cannot fall by 100% or more; "
                f"write a fall under 100%, e.g. {match['metric']}:-5%",
                "fail_on",
            )
        thresholds.append(Threshold(match["metric"], -size if match["sign"] == "-" else size))
    if not thresholds:
        raise KVMagicError(f"{{fail_on}} is empty: write {form}", "fail_on")
    return tuple(thresholds)


def fail_on_form(strategies: bool = False) -> str:
    """How a threshold is written, naming the metrics the rows have (``strategies``: a comparison of strategies)."""
    metrics = STRATEGY_METRICS if strategies else METRICS
    form = _FORM.format(metrics=", ".join(metrics), timed=metrics[-1])
    return form + " (a comparison of strategies has one row per strategy, with its seconds)" if strategies else form


@dataclass(frozen=True)
class GateVerdict:
    """What the gate found: the rows that failed, and the rows it could not judge, each as one line; ``fix``
    says, in one line that follows ``--fail-on``, why it could not judge them and what would let it."""

    failed: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    fix: str = ""

    @property
    def passed(self) -> bool:
        return not self.failed and not self.undecided


Row = Mapping[str, Any]


def judge(
    rows: Sequence[Row],
    saved: Mapping[tuple[Config, Strategy], Row] | Mapping[tuple[Config, str], Row],
    thresholds: Sequence[Threshold],
) -> GateVerdict:
    """Judge each of ``rows`` (a comparison's, with its ``significant``) against its saved row.

    ``saved`` maps (configuration, strategy) to the saved run's row, a strategy by itself or by its name, as a
    row names it; rows without one are not judged,
    and when no row has one there is nothing to judge, which is not a pass. A metric a row or its saved row
    does not have (a comparison of strategies has no ``cached_s``, the plain run no ``seconds``) cannot be
    judged there. The verdict's ``fix`` says, per cause, what would let the gate judge.
    """
    verdict = GateVerdict()
    fixes: dict[str, None] = {}  # each cause's fix once, in the order found
    named = {_named(key): row for key, row in saved.items()}  # as a table's rows name theirs: without a width
    matched = [(row, named[key]) for row in rows if (key := _named(row_key(row))) in named]
    if not matched:
        verdict.undecided.append(
            "no row matches a saved row (the same prompt_tokens, new_tokens, batch and strategy): nothing to judge"
        )
        fixes["matches no saved row: give the saved run's prompt, -n, -p, -b and --cache"] = None
    for row, was in matched:
        for threshold in thresholds:
            if threshold.metric not in row or threshold.metric not in was:
                verdict.undecided.append(f"{Config.of(row)}{_strategy(row)}: no {threshold.metric} to judge")
                whose = "this run's" if threshold.metric not in row else "the saved run's"
                fixes[f"cannot judge {threshold.metric}, which {whose} rows lack: judge speedup"] = None
                continue
            now_value, was_value = row[threshold.metric], was[threshold.metric]
            if not threshold.crossed(now_value, was_value):
                continue
            line = (
                f"{Config.of(row)}{_strategy(row)}: {threshold.metric} "
                f"{was_value:.4g} -> {now_value:.4g} ({now_value / was_value - 1:+.1%}, past {threshold})"
            )
            if row["significant"] is None:
                verdict.undecided.append(f"{line}, but the comparison has no verdict on whether that is noise")
                fixes["cannot judge a change timed in one round: time both runs with -r 2 or more"] = None
            elif row["significant"]:
                verdict.failed.append(f"{line} and significant")
    return dataclasses.replace(verdict, fix="; ".join(fixes))


def gate(comparison: Comparison, thresholds: Sequence[Threshold]) -> GateVerdict:
    """:func:`judge` a comparison's rows against its baseline's."""
    return judge(comparison.rows(), comparison.saved_rows(), thresholds)


def _named(key: tuple[Config, Strategy | str]) -> tuple[Config, str]:
    """A row's configuration and its strategy's name (``press:knorm:.5`` as ``press:knorm:0.5``)."""
    config, strategy = key
    return config, str(Strategy.of(strategy))


def _strategy(row: Mapping[str, Any]) -> str:
    return f", {row['strategy']}" if "strategy" in row else ""
