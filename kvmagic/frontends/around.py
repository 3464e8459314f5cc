"""What the front ends do around a benchmark: ask whether an add-on fills the request in from a saved run and which,
if any, runs it in place of ``run_benchmark``, check the output's name and let each add-on read what it needs before
the run, then save the result and show what the add-ons make of it, and end the command with their exit status."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvmagic.core.addon import AddOn, SavedRequest, addons
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from kvmagic.results.serialize import Kept

__all__ = ["exit_status", "finish", "read_ahead", "saved_request", "taker"]

Ahead = Mapping[AddOn, Any]  # what each add-on read before the run (:meth:`~kvmagic.core.addon.AddOn.read_ahead`)


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


def read_ahead(args: argparse.Namespace, saved: SavedRequest | None = None) -> Ahead:
    """Check the output name, then read what each add-on needs before the benchmark, not after a long run."""
    from kvmagic.results.serialize import export_format, writable

    if args.save:
        export_format(args.save)
        writable(args.save)
    return {addon: addon.read_ahead(args, saved) for addon in addons()}


def finish(args: argparse.Namespace, result: Kept, ahead: Ahead, say: Callable[[str], None]) -> tuple[Any, str]:
    """Save the result if asked, saying where in one line (``say``); return what to show (the result, or what the
    add-ons make of it) and, where the save failed after all, why: the measured result is never lost to a file that
    could not be written (a full disk, a folder that changed since it was checked)."""
    failed = ""
    if args.save:
        try:
            result.save(args.save)
        except KVMagicError as error:
            failed = str(error)
        else:
            say(f"saved {Path(args.save).expanduser().resolve()}")
    shown: Any = result
    for addon, read in ahead.items():
        shown = addon.showing(args, shown, read)
    return shown, failed


def exit_status(args: argparse.Namespace, shown: Any, ahead: Ahead) -> int:
    """The command's exit status once its output is out: the first an add-on gives other than 0, every one asked."""
    statuses = [addon.exit_status(args, shown, read) for addon, read in ahead.items()]
    return next((status for status in statuses if status), 0)
