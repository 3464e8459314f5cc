"""What the front ends do around a benchmark: ask which add-on, if any, runs the request in place of
``run_benchmark``, read the baseline it is compared with first, save and compare after."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvmagic.core.addon import AddOn, addons
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from kvmagic.results.result import BenchmarkResult
    from kvmagic.results.serialize import Kept

__all__ = ["finish", "read_baseline", "taker"]


def taker(args: argparse.Namespace, configured: Mapping[str, Any], host: str) -> AddOn | None:
    """The add-on that runs this request itself (:meth:`~kvmagic.core.addon.AddOn.takes`), the first the registry
    lists; None where the front end runs it. Every add-on is asked, so that each refuses what it cannot go with."""
    taking = [addon for addon in addons() if addon.takes(args, configured, host)]
    return taking[0] if taking else None


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


def finish(
    args: argparse.Namespace,
    result: Kept,
    baseline: BenchmarkResult | None,
    say: Callable[[str], None],
) -> tuple[Any, str]:
    """Save the result if asked, saying where in one line (``say``); return what to show (the result, or its
    comparison with the baseline) and, where the save failed after all, why: the measured result is never lost to
    a file that could not be written (a full disk, a folder that changed since it was checked)."""
    failed = ""
    if args.save:
        try:
            result.save(args.save)
        except KVMagicError as error:
            failed = str(error)
        else:
            say(f"saved {Path(args.save).expanduser().resolve()}")
    if baseline is None:
        return result, failed
    from kvmagic.results.compare import compare

    return compare(result, baseline, name=args.compare), failed
