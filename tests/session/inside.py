"""What the harness runs inside the kernel or the terminal: read the user's namespace, show every bar.

Imported there (the checkout is on their PYTHONPATH). :func:`facts` is called with the user's
``globals()`` and only reads, so ``_``, ``Out`` and the user's variables stay as they were.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MISSING", "facts", "show_every_bar", "slow_forward"]

MISSING = "<missing>"


def _repr(ns: dict[str, Any], name: str) -> str:
    return repr(ns[name]) if name in ns else MISSING


def _last(ns: dict[str, Any]) -> str:
    """Whether ``_`` is the last output, as IPython's display hook keeps it ('' before any output)."""
    out, last = ns.get("Out"), ns.get("_", MISSING)
    if not isinstance(out, dict):
        return "Out is missing"
    if not out:
        return "ok" if isinstance(last, str) and last == "" else f"_ is {last!r:.60} with Out empty"
    return "ok" if last is out[max(out)] else f"_ is {last!r:.60}, not Out[{max(out)}]"


def _loaded(ns: dict[str, Any]) -> str | None:
    """The name of the model %kvbench would use; None with no model or no extension."""
    shell = ns.get("get_ipython", lambda: None)()
    magics = shell.magics_manager.registry.get("KVMagics") if shell is not None else None
    loaded = getattr(magics, "loaded", None)
    return None if loaded is None else str(loaded.name)


def facts(ns: dict[str, Any], names: str = "", outputs: tuple[int, ...] = (), results: str = "") -> str:
    """A JSON object: the repr of each of ``names``, the keys of ``Out`` and the repr of the ``outputs``
    among them, whether ``_`` is the last output and ``Out`` is ``_oh``, the type of each of ``results``,
    and the loaded model's name."""
    out = ns.get("Out")
    keys = sorted(out) if isinstance(out, dict) else MISSING
    return json.dumps(
        {
            "names": {name: _repr(ns, name) for name in names.split()},
            "out": keys,
            "outputs": {str(n): repr(out[n]) if isinstance(out, dict) and n in out else MISSING for n in outputs},
            "last": _last(ns),
            "oh": "ok" if out is not None and out is ns.get("_oh") else "Out is not _oh",
            "results": {name: type(ns[name]).__name__ if name in ns else MISSING for name in results.split()},
            "loaded": _loaded(ns),
        }
    )


def show_every_bar(every: bool = True) -> None:
    """Show the progress bar on every run from its start, as on a run that lasts past a second (a -n 2 run does not);
    or, with ``every=False``, only where kvmagic would."""
    from kvmagic.runner import benchmark as runner

    assert hasattr(runner, "PROGRESS_AFTER_S"), "kvmagic.runner.benchmark.PROGRESS_AFTER_S is gone: update the harness"
    shipped = _SHIPPED.setdefault("PROGRESS_AFTER_S", runner.PROGRESS_AFTER_S)
    runner.PROGRESS_AFTER_S = 0.0 if every else shipped


def slow_forward(seconds: float) -> None:
    """Make every forward of the loaded model take ``seconds`` longer (0: as it was), so that a run lasts long
    enough to watch its bar on any machine, as a real model's does."""
    import time

    for hook in _HOOKS:
        hook.remove()
    _HOOKS.clear()
    if seconds:
        shell = __import__("IPython").get_ipython()
        model = shell.magics_manager.registry["KVMagics"].loaded.model
        _HOOKS.append(model.register_forward_pre_hook(lambda module, args: time.sleep(seconds)))


_SHIPPED: dict[str, float] = {}
_HOOKS: list[Any] = []
