"""Keep a long notebook session healthy when a run fails: memory advice, and frames that pin a model.

A failed ``generate`` leaves behind an exception whose traceback frames still reference the
model, its inputs and half-built caches. Until those frames go, dropping the model frees
nothing and an accelerator stays full. Nothing here imports torch at import time.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

from kvmagic.errors import KVMagicError

__all__ = ["forget_frames", "forget_last_failure", "is_out_of_memory", "with_memory_advice"]

T = TypeVar("T")
_PACKAGE = __name__.partition(".")[0]


def is_out_of_memory(error: BaseException) -> bool:
    """torch's ``OutOfMemoryError`` (CUDA, XPU), or the plain ``RuntimeError`` MPS and cuBLAS raise instead."""
    import torch

    if isinstance(error, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


def with_memory_advice(run: Callable[[], T], advice: str, *params: str) -> T:
    """Return ``run()``; if it runs out of memory, free the cache and raise ``KVMagicError(advice, *params)``.

    The memory is released only after the ``except`` block has ended, because until then the
    error's frames keep every tensor of the failed call alive. The new error has no context,
    so it pins nothing either.
    """
    try:
        return run()
    except RuntimeError as error:
        if not is_out_of_memory(error):
            raise
    from kvmagic.measure.accelerator import release_memory

    release_memory()
    raise KVMagicError(advice, *params)


def forget_frames(error: BaseException | None) -> None:
    """Release what the frames of ``error``, its causes and contexts hold, where kvmagic's calls made them.

    Clearing alone is not enough: a frame still holds its function, and a closure can hold the model;
    so the part of each traceback that kvmagic's calls made is detached as well.
    """
    for link in _chain(error):
        link.__traceback__ = _forget_kvmagic_part(link.__traceback__)


def forget_last_failure() -> None:
    """Release what the last uncaught error's frames hold; IPython keeps that error for ``%debug``.

    Called before a model is dropped: otherwise an interrupted ``%%kvbench`` keeps the old model
    alive through ``sys.last_traceback`` until some later error replaces it. Only the frames that
    kvmagic's calls made are cleared and detached: the traceback up to the magic stays for ``%tb``
    and ``%debug``, and the user's frames, whose variables may be the notebook's own namespace,
    are never touched. An error that did not come through kvmagic is left whole.
    """
    last_traceback = getattr(sys, "last_traceback", None)
    if last_traceback is not None:
        sys.last_traceback = _forget_kvmagic_part(last_traceback)
    forget_frames(getattr(sys, "last_value", None))


def _chain(error: BaseException | None) -> list[BaseException]:
    """``error`` and the causes or contexts behind it, each once."""
    found: list[BaseException] = []
    while error is not None and all(error is not link for link in found):
        found.append(error)
        error = error.__cause__ or error.__context__
    return found


def _forget_kvmagic_part(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` cut just before its first kvmagic frame, the frames from there on cleared; ``tb`` whole when no
    frame of it is kvmagic's (None when its first one is)."""
    head, kept = tb, None
    while tb is not None and str(tb.tb_frame.f_globals.get("__name__", "")).partition(".")[0] != _PACKAGE:
        kept, tb = tb, tb.tb_next
    if tb is None:
        return head
    _clear_frames(tb)
    if kept is None:
        return None
    kept.tb_next = None
    return head


def _clear_frames(tb: TracebackType | None) -> None:
    """``traceback.clear_frames``, plus the snapshot of locals that Python < 3.13 keeps once a
    traceback printer has read ``frame.f_locals`` (IPython's does): clearing leaves it full.

    Only a function's frame has such a snapshot; the locals of a module, a class body or an ``exec``
    are a real namespace (a notebook cell's are the user's variables), so those are never emptied.
    """
    while tb is not None:
        frame = tb.tb_frame
        try:
            frame.clear()
        except RuntimeError:  # the frame is still running: its variables are in use
            pass
        else:
            if sys.version_info < (3, 13) and frame.f_code.co_flags & inspect.CO_OPTIMIZED:
                frame.f_locals.clear()
        tb = tb.tb_next
