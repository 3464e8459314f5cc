"""What the front ends do around a benchmark: ask whether an add-on fills the request in from a saved run and which,
if any, runs it in place of ``run_benchmark``, read the baseline it is compared with first, save and compare after."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvmagic.core.addon import AddOn, SavedRequest, addons
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from kvmagic.results.result import BenchmarkResult
    from kvmagic.results.serialize import Kept

__all__ = ["finish", "read_baseline", "saved_request", "taker"]


def taker(args: argparse.Namespace, configured: Mapping[str, Any], host: str) -> AddOn | None:
    """The add-on that runs this request itself (:meth:`~kvmagic.core.addon.AddOn.takes`), the first the registry
    lists; None where the front end runs it. Every add-on is asked, so that each refuses what it cannot go with."""
    taking = [addon for addon in addons() if addon.takes(args, configured, host)]
    return taking[0] if taking else None


def saved_request(
    args: argparse.Namespace, typed: frozenset[str], host: str, prompt: Callable[[], str | None]
) -> SavedRequest | None:
    """The saved run the request starts from (:meth:`~kvmagic.core.addon.AddOn.saved`), ``args`` filled in from it;
    None where the request is the one typed."""
    return next((found for addon in addons() if (found := addon.saved(args, typed, host, prompt)) is not None), None)


def read_baseline(args: argparse.Namespace, saved: SavedRequest | None = None) -> BenchmarkResult | None:
    """Check the output name and read the baseline before the benchmark, not after a long run (a saved request's
    own, where there is one)."""
    from kvmagic.results.result import BenchmarkResult
    from kvmagic.results.serialize import export_format, writable

    if args.save:
        export_format(args.save)
        writable(args.save)
    if saved is not None:
        found: BenchmarkResult = saved.baseline
        return found
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
