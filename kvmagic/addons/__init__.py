"""The add-ons: each capability beyond the plain pair and a comparison of strategies, in a folder of its own.

Each folder's ``ADDON`` (a :class:`~kvmagic.core.addon.AddOn`) is all the centre sees of it; this registry lists
them, in the order their hooks run and their columns follow the table's own. A new add-on is a folder and one
line here.
"""

from __future__ import annotations

from kvmagic.addons import (
    baseline,
    choice,
    frontier,
    html_report,
    limits,
    models,
    plot,
    predict,
    prefix,
    random_weights,
    replay,
    split,
)
from kvmagic.core.addon import AddOn

__all__ = ["ADDONS"]

ADDONS: tuple[AddOn, ...] = (
    random_weights.ADDON,
    baseline.ADDON,
    models.ADDON,
    split.ADDON,
    limits.ADDON,
    predict.ADDON,
    frontier.ADDON,
    prefix.ADDON,
    choice.ADDON,
    plot.ADDON,
    html_report.ADDON,
    replay.ADDON,
)
