"""What of a saved run can run here, asked before anything loads: each strategy it names (this transformers, the
packages installed), the device it ran on, and the model it names (on disk, in the local cache, or on a Hub that
answers)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Mapping

from kvmagic.core.strategy import BACKENDS, Strategy
from kvmagic.errors import KVMagicError

__all__ = ["device_kind", "here_device", "model_here", "not_here", "runnable"]

_ACCELERATORS = ("cuda", "xpu", "mps")


def not_here(names: Iterable[str]) -> dict[str, str]:
    """Each strategy of ``names`` that cannot run here, with why in a few words (a strategy the model itself cannot
    run, a static cache on a model without one, is found out by the run, which says so in its notes)."""
    return {name: why for name in names if (why := _why(name))}


def _why(name: str) -> str:
    from kvmagic.measure import capabilities
    from kvmagic.measure.strategies import checked

    strategy = Strategy.of(name)
    try:
        checked([strategy])
    except KVMagicError:
        return f"transformers {capabilities.transformers_version()} has no such cache"
    if strategy.quantized:
        backend = BACKENDS[strategy.backend]
        if capabilities.quantized_backend_reason(strategy.backend):
            return f"transformers {capabilities.transformers_version()} has no {strategy.backend} quantized cache"
        if backend.module and importlib.util.find_spec(backend.module) is None:
            return f"{backend.package} is not installed"
    if strategy.press is not None and capabilities.press_reason():
        return "kvpress cannot run here"
    return ""


def device_kind(device: str) -> str:
    """``cuda`` of ``cuda:0 (NVIDIA H100)``: the kind a saved run's device names."""
    return device.split(",")[0].split("(")[0].split(":")[0].strip()


def here_device() -> str:
    """The accelerator a model loads on here (``--device-map auto``), or ``cpu``."""
    from kvmagic.measure.capabilities import device_available

    return next((kind for kind in _ACCELERATORS if device_available(kind)), "cpu")


def model_here(name: str, revision: str | None) -> bool:
    """Whether ``name`` can load here: tiny, a folder, a hub id in the local cache, or any while the Hub answers."""
    from kvmagic.model.tiny import TINY_NAME

    if name == TINY_NAME or os.path.exists(os.path.expanduser(name)):
        return True
    from huggingface_hub import constants, try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(name, "config.json", revision=revision)
    except Exception:  # not a hub id (a path that is not here): nothing loads it
        return False
    if isinstance(cached, str):
        return True
    from kvmagic.measure.capabilities import hub_reachable

    return not constants.HF_HUB_OFFLINE and hub_reachable(constants.ENDPOINT)


def runnable(cache: Iterable[str], unread: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The saved strategies that run here, in order, and those that do not, with why (``unread``: those this kvmagic
    could not even read)."""
    names = list(cache)
    dropped = {**unread, **not_here(n for n in names if n not in unread)}
    return [n for n in names if n not in dropped], dropped
