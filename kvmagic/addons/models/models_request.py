"""``-m A,B`` in both front ends: the names as typed, what a request of several models cannot also ask, and how each
model loads.

The command's ``-m`` is its one model's (``%kvload``'s) where it names one, the notebook's ``-m`` a model measured in
place of the one ``%kvload`` loaded, each loaded with the settings of ``%config KVMagics``. A comparison with a saved
run (``--compare``) sets one model's rows against one model's; a split model (``--tp``) splits one model over its
ranks. Each is refused with several models in one line, before anything loads; the names themselves are checked by
:func:`~kvmagic.addons.models.models_run.model_loads`, also before anything loads.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from kvmagic.errors import KVMagicError
from kvmagic.model.tiny import TINY_NAME

__all__ = ["check_models_request", "model_names", "refuse_several", "requested"]

_ONE_MODEL = {
    "tp": "splits one model over its ranks",
    "compare": "sets one model's run against a saved one",
}
_CONFIGURED = ("dtype", "device_map", "attn_implementation")  # the settings the notebook loads each model with


def model_names(text: str | None) -> list[str]:
    """The models ``-m`` names, comma-separated (a local directory whose name holds a comma is one model)."""
    if text is None:
        return []
    if os.path.exists(os.path.expanduser(text)):
        return [text]
    return [name.strip() for name in text.split(",")]


def check_models_request(args: argparse.Namespace, names: list[str]) -> None:
    """Refuse what several models cannot be asked together, and random weights for tiny alone or (in the notebook)
    for no model named."""
    if getattr(args, "random_weights", False) and not names:
        raise KVMagicError("{random_weights} builds the models {models} names: add {models} MODEL, or use "
                           "%kvload MODEL --random-weights", "random_weights", "models")  # fmt: skip
    if getattr(args, "random_weights", False) and names == [TINY_NAME]:
        raise KVMagicError("{models} tiny has seeded random weights already: drop {random_weights}", "models",
                           "random_weights")  # fmt: skip
    if len(names) < 2:
        return
    for name, why in _ONE_MODEL.items():
        if getattr(args, name, None) not in (None, False):
            raise KVMagicError(f"{{{name}}} {why}, not each of several {{models}}: drop it, or name one model",
                               name, "models")  # fmt: skip


def requested(args: argparse.Namespace, configured: Mapping[str, Any], host: str) -> tuple[list[str], dict[str, Any]]:
    """The models a request names, and the ``load_model`` keywords each loads with (but its name): the command's
    load options, or the notebook's settings and its ``--random-weights``."""
    if host == "magic":
        load = {key: configured[key] for key in _CONFIGURED}
        return model_names(args.models), {**load, "random_weights": args.random_weights}
    from kvmagic.frontends.options import load_kwargs

    load = load_kwargs(args, configured)
    return model_names(load.pop("name")), load


def refuse_several(name: str) -> None:
    """``%kvload`` loads one model: several names are a request for ``%%kvbench -m``."""
    if len(model_names(name)) > 1:
        raise KVMagicError(f"%kvload loads one model: to measure several side by side, use %%kvbench -m {name}")
