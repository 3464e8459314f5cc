"""``--compare base.json``: a run set beside a run saved before, each row's change in speed-up and whether it is
beyond both runs' noise, and any difference in how they were run (:mod:`~kvmagic.addons.baseline.compare`, the
``Comparison`` that ``kvmagic.compare()`` returns); ``--fail-on``: the command's regression gate over that comparison
(:mod:`~kvmagic.addons.baseline.gate`). :mod:`~kvmagic.addons.baseline.baseline_request` reads both before the run and
makes the command's exit status after it. A request read from a saved run (``--replay``'s) is compared with that run.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from kvmagic.addons.baseline.compare import COMPARED
from kvmagic.core.addon import AddOn, SavedRequest
from kvmagic.frontends.option import Option

if TYPE_CHECKING:
    from kvmagic.addons.baseline.baseline_request import Baseline
    from kvmagic.addons.baseline.compare import Comparison

__all__ = ["ADDON"]

_WHAT = "what to show"


class _Baseline(AddOn):
    name = "baseline"
    options = (
        Option(("--compare",), "Compare with a run saved by --save PATH.json: the change in speed-up per row, whether "
               "it exceeds both runs' spread, and any difference in how they were run.", "compare", metavar="PATH",
               examples=("baseline.json",), purpose=_WHAT),
        Option(("--fail-on",), "With --compare, exit with status 1 when a row moved past SPEC and the comparison "
               "calls the change significant: speedup:-5%% (fell by more than 5%%), cached_s:+10%%, uncached_s:+10%% "
               "(with --cache or an option that adds strategies, a row per strategy: speedup, seconds:+10%%); "
               "comma-separated or repeated.", "fail_on", action="append", metavar="SPEC", hosts=("cli",),
               examples=("speedup:-50%",), purpose=_WHAT,
               instead="in a notebook, --compare PATH shows each change and whether it is significant"),
    )  # fmt: skip
    tables = (
        ("## Beside a baseline: `--compare`\n\nEither table gains, per row matched by configuration and strategy:",
         COMPARED),
    )  # fmt: skip
    api: ClassVar[Mapping[str, str]] = {
        "Comparison": "kvmagic.addons.baseline.compare",
        "compare": "kvmagic.addons.baseline.compare",
    }

    def read_ahead(self, args: argparse.Namespace, saved: SavedRequest | None) -> Baseline | None:
        """``--fail-on`` read and the baseline: ``--compare``'s file, or the run a saved request was read from."""
        from kvmagic.addons.baseline.baseline_request import read_baseline

        return read_baseline(args, saved)

    def showing(self, args: argparse.Namespace, shown: object, ahead: Baseline | None) -> object:
        """The result set beside its baseline, where there is one."""
        return shown if ahead is None else ahead.compared(shown)

    def exit_status(self, args: argparse.Namespace, shown: Comparison, ahead: Baseline | None) -> int:
        """``--fail-on``'s verdict on the comparison."""
        if ahead is None:
            return 0
        from kvmagic.addons.baseline.baseline_request import gated

        return gated(shown, ahead.thresholds)


ADDON = _Baseline()
