"""The comparison with a baseline as the front ends ask it: ``--fail-on`` and the baseline read before the run (a
mistyped threshold or a file that cannot be read costs no model load), the run set beside its baseline after it, and
the command's exit status from the gate."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvmagic.addons.baseline.compare import Comparison, compare
from kvmagic.core.addon import SavedRequest, addons
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from kvmagic.addons.baseline.gate import Threshold
    from kvmagic.results.result import BenchmarkResult

__all__ = ["Baseline", "fail_on", "gated", "read_baseline"]


@dataclass(frozen=True)
class Baseline:
    """The run a request is compared with, the name its verdict gives it, and ``--fail-on``'s thresholds."""

    result: BenchmarkResult
    name: str
    thresholds: tuple[Threshold, ...] = ()

    def compared(self, result: Any) -> Comparison:
        return compare(result, self.result, name=self.name)


def fail_on(args: argparse.Namespace) -> tuple[Threshold, ...]:
    """--fail-on, read before any model loads, so that a mistyped threshold costs nothing."""
    if not getattr(args, "fail_on", None):
        return ()
    if not args.compare:
        raise KVMagicError("--fail-on judges a change against a saved run: add --compare BASE.json")
    from kvmagic.addons.baseline.gate import parse_fail_on

    compared = args.cache is not None or any(addon.compares(vars(args)) for addon in addons())
    return parse_fail_on(args.fail_on, strategies=compared)


def read_baseline(args: argparse.Namespace, saved: SavedRequest | None) -> Baseline | None:
    """The baseline, read before the benchmark, not after a long run (a saved request's own, where there is one)."""
    thresholds = fail_on(args)
    if saved is not None:
        return Baseline(saved.baseline, saved.name, thresholds)
    if not args.compare:
        return None
    from kvmagic.results.result import BenchmarkResult

    baseline = BenchmarkResult.read_json(args.compare)
    if not baseline.measurements:
        raise KVMagicError(f"{args.compare!r} holds no measured rows to compare with: save a finished run")
    return Baseline(baseline, args.compare, thresholds)


def gated(comparison: Comparison, thresholds: tuple[Threshold, ...]) -> int:
    """0 when no row regressed past a threshold, 1 when one did (each on stderr), 2 when the gate cannot tell."""
    if not thresholds:
        return 0
    from kvmagic.addons.baseline.gate import gate
    from kvmagic.frontends.cli import PROG, error_line

    verdict = gate(comparison, thresholds)
    for line in verdict.failed:
        print(f"{PROG}: regression: {line}", file=sys.stderr)
    if verdict.failed:  # the rows it could not judge beside them, as the status is already a failure
        for line in verdict.undecided:
            print(f"{PROG}: cannot judge: {line}", file=sys.stderr)
        return 1
    if verdict.undecided:  # one line: why it cannot judge, and what would let it
        print(error_line(KVMagicError(f"--fail-on {verdict.fix}")), file=sys.stderr)
        return 2
    return 0
