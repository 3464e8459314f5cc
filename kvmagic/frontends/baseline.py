"""What the front ends do around a benchmark: read the baseline it is compared with first, save and compare after."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from kvmagic.results.models_result import ModelsResult
    from kvmagic.results.result import BenchmarkResult

__all__ = ["finish", "read_baseline"]


def read_baseline(args: argparse.Namespace) -> BenchmarkResult | None:
    """Check the output name and read the baseline before the benchmark, not after a long run."""
    from kvmagic.results.result import BenchmarkResult
    from kvmagic.results.serialize import export_format, writable

    if args.save:
        export_format(args.save)
        writable(args.save)
    if not args.compare:
        return None
    baseline = BenchmarkResult.read_json(args.compare)
    if not baseline.measurements:
        raise KVMagicError(f"{args.compare!r} holds no measured rows to compare with: save a finished run")
    return baseline


def finish(args: argparse.Namespace, result: BenchmarkResult | ModelsResult, baseline: BenchmarkResult | None) -> Any:
    """Save the result if asked; return what to show: the result, or its comparison with the baseline."""
    if args.save:
        result.save(args.save)
    if baseline is None:
        return result
    from kvmagic.results.compare import compare
    from kvmagic.results.result import BenchmarkResult

    assert isinstance(result, BenchmarkResult)  # several models are refused a baseline before they run
    return compare(result, baseline)
