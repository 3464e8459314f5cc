"""``--tp`` in both front ends: what a split model refuses, and a request as the command's words.

The command runs as every rank of a torchrun run; the notebook launches that command. What neither can
do with a split model is refused here, before anything starts, in one line naming both options:
``predict``, ``limits`` and ``frontier`` probe one device (its cost per step, its bounds, its free
memory) and would read one rank's share of the model as the whole; a ``device_map`` places a whole model,
where the ranks each place their share. A comparison of strategies runs split as on one device: a strategy
that cannot run split says why in its row, found by trying it.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from kvmagic.core.spec import BenchSpec, names
from kvmagic.errors import KVMagicError
from kvmagic.frontends.options import BENCH_OPTIONS, LOAD_OPTIONS

__all__ = ["bench_words", "check_split_request", "load_words"]

_ONE_DEVICE = {
    "predict": "fits its cost model to one device's steps",
    "limits": "bounds the run by one device's bandwidth and throughput",
    "frontier": "reads one device's free memory",
}


def check_split_request(request: BenchSpec | argparse.Namespace, *, device_map: object = None) -> None:
    """Refuse what a model split over ranks cannot be asked, naming the option and ``tp``: ``request`` is a
    :class:`BenchSpec`, or a front end's parsed options."""
    for name, why in _ONE_DEVICE.items():
        if getattr(request, name, None) not in (None, False):
            raise KVMagicError(f"{{{name}}} {why}, not a model split by {{tp}}: drop one of them", name, "tp")
    if device_map is not None:
        raise KVMagicError(
            "{device_map} places a whole model, while {tp} has each rank place its share on its own device: "
            "drop one of them",
            "device_map",
            "tp",
        )


def bench_words(spec: BenchSpec) -> list[str]:
    """The command's options that ask for exactly ``spec``, every field (an add-on's too) spelled out but the text
    ``quality_text`` holds (the command reads it from a file) and, without ``-r auto``, the targets only it reads
    (refused alone)."""
    words: list[str] = []
    left = {"quality_text"} | (set() if spec.repeat == "auto" else {"ci_target", "auto_cap"})
    fields = spec.to_dict()
    for option in BENCH_OPTIONS:
        if "cli" not in option.hosts or option.dest not in set(names()) - left:
            continue
        words += _spelled(option.spelling("cli")[0], option.action, fields[option.dest])
    return words


def load_words(load: Mapping[str, Any]) -> list[str]:
    """The command's options that load the model ``load`` (``load_model``'s keywords) names, but its
    ``device_map``: each rank places its own share."""
    words: list[str] = []
    for option in LOAD_OPTIONS:
        key = "name" if option.dest == "model" else option.dest
        if key != "device_map" and key in load:
            words += _spelled(option.spelling("cli")[0], option.action, load[key])
    return words


def _spelled(flag: str, action: object, value: Any) -> list[str]:
    if action == "store_true":
        return [flag] if value else []
    if action is argparse.BooleanOptionalAction:
        return [flag if value else f"--no-{flag.removeprefix('--')}"]
    if value is None:
        return []
    if isinstance(value, (tuple, list)):
        return [flag, ",".join(str(v) for v in value)]
    return [flag, str(value)]
