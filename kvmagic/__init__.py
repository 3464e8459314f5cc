"""kvmagic: see what the KV cache does for a language model, in two IPython magics.

``%load_ext kvmagic`` registers ``%kvload`` and ``%%kvbench``. The same work is
available without IPython through :func:`load_model` and :func:`run_benchmark`, and
an add-on's own through the names it adds here (``AddOn.api``; ``dir(kvmagic)`` lists them).

Importing this package stays cheap: torch, transformers and pandas are imported
only when a model is loaded or a benchmark runs.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .errors import KVMagicError
from .version import __version__

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from .addons.baseline.compare import Comparison, compare
    from .core.spec import BenchSpec
    from .model.loading import DEFAULT_MODEL, LoadedModel, load_model
    from .results.result import BenchmarkResult
    from .runner.benchmark import run_benchmark


__all__ = [
    "DEFAULT_MODEL",
    "BenchSpec",
    "BenchmarkResult",
    "Comparison",
    "KVMagicError",
    "LoadedModel",
    "__version__",
    "compare",
    "load_ipython_extension",
    "load_model",
    "run_benchmark",
    "unload_ipython_extension",
]

_LAZY = {
    "DEFAULT_MODEL": "model.loading",
    "LoadedModel": "model.loading",
    "load_model": "model.loading",
    "run_benchmark": "runner.benchmark",
    "BenchmarkResult": "results.result",
    "BenchSpec": "core.spec",
}


def __getattr__(name: str) -> Any:
    module = f".{_LAZY[name]}" if name in _LAZY else _addons_api().get(name)
    if module is None:
        raise AttributeError(f"module 'kvmagic' has no attribute {name!r}")
    return getattr(import_module(module, __name__), name)


def __dir__() -> list[str]:
    return sorted({*__all__, *_addons_api()})


def _addons_api() -> dict[str, str]:
    """The names each add-on adds to the API (its runs, its results), with the module that defines each."""
    from .core.addon import addons

    return {name: module for addon in addons() for name, module in addon.api.items()}


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """Register the magics; called by ``%load_ext kvmagic``."""
    from IPython.core.error import UsageError
    from traitlets import TraitError

    from .frontends.magics import KVMagics

    try:
        ipython.register_magics(KVMagics)
    except TraitError as error:  # a bad default in the profile: one line, not a traceback from traitlets
        raise UsageError(f"{error}: fix it in the IPython profile's ipython_config.py") from None


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """Drop the loaded model and free its memory; called by ``%unload_ext kvmagic``."""
    from .frontends.magics import KVMagics

    magics = ipython.magics_manager.registry.pop(KVMagics.__name__, None)
    if magics is not None:
        magics.unload()
        for kind in ("line", "cell"):
            for name in ("kvload", "kvbench"):
                ipython.magics_manager.magics[kind].pop(name, None)
