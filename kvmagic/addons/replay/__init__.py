"""``--replay run.json``: rerun the request a saved run holds (its prompt, lengths, strategies, repeats and options)
and compare the new run with it in the same step, as ``--compare run.json`` does.

The file's request takes the place of the defaults: an option typed beside ``--replay`` overrides the file's. The run
is on the model the notebook loaded (or ``-m``'s), and in the command on ``-m``'s, by default the file's. What cannot
run here (a strategy this transformers or a missing package cannot run, another device) is said in one line and the
rest runs. :mod:`~kvmagic.addons.replay.saved_file` reads the file (JSON, an older format, or a report page that holds
its record); :mod:`~kvmagic.addons.replay.here` says what of it runs here; :mod:`~kvmagic.addons.replay.filled`
fills the request in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kvmagic.core.addon import AddOn, SavedRequest
from kvmagic.frontends.option import Option

if TYPE_CHECKING:
    import argparse

__all__ = ["ADDON"]


class _Replay(AddOn):
    name = "replay"
    options = (
        Option(("--replay",), "Rerun the request a run saved with --save FILE.json (or a report page, .html) holds: "
               "its prompt, lengths, strategies, repeats and options, on the model loaded (the command: -m, by "
               "default the file's), and compare with it as --compare does. Options given beside it override the "
               "file's (e.g. -r 5); what cannot run here is said in one line, and the rest runs.", "replay",
               metavar="FILE", examples=("baseline.json",), purpose="what to show"),
    )  # fmt: skip

    def saved(
        self, args: argparse.Namespace, typed: frozenset[str], host: str, prompt: Callable[[], str | None]
    ) -> SavedRequest | None:
        if getattr(args, "replay", None) is None:
            return None
        from kvmagic.addons.replay.filled import fill

        return fill(args, typed, host, prompt)


ADDON = _Replay()
