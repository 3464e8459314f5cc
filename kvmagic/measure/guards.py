"""Keep a long notebook session healthy when a run fails: memory advice, and frames that pin a model.

A failed ``generate`` leaves behind an exception whose traceback frames still reference the
model, its inputs and half-built caches. Until those frames go, dropping the model frees
nothing and an accelerator stays full. Nothing here imports torch at import time.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

from kvmagic.errors import KVMagicError

__all__ = ["forget_frames", "forget_last_failure", "is_out_of_memory", "with_memory_advice"]

T = TypeVar("T")


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
    """Drop the tracebacks of ``error``, its causes and contexts, clearing their frames' variables first.

    Clearing alone is not enough: a frame still holds its function, and a closure can hold the model.
    """
    for link in _chain(error):
        _clear_frames(link.__traceback__)
        link.__traceback__ = None


def forget_last_failure() -> None:
    """Release what the last uncaught error's frames hold; IPython keeps that error for ``%debug``.

    Called before a model is dropped: otherwise an interrupted ``%%kvbench`` keeps the old model
    alive through ``sys.last_traceback`` until some later error replaces it. Only an error that
    came through kvmagic is touched; its message stays, but ``%tb`` and ``%debug`` lose it.
    """
    last_traceback = getattr(sys, "last_traceback", None)
    last_value = getattr(sys, "last_value", None)
    if not any(_through_kvmagic(tb) for tb in (last_traceback, *(link.__traceback__ for link in _chain(last_value)))):
        return
    _clear_frames(last_traceback)
    sys.last_traceback = None
    forget_frames(last_value)


def _chain(error: BaseException | None) -> list[BaseException]:
    """``error`` and the causes or contexts behind it, each once."""
    found: list[BaseException] = []
    while error is not None and all(error is not link for link in found):
        found.append(error)
        error = error.__cause__ or error.__context__
    return found


def _through_kvmagic(tb: TracebackType | None) -> bool:
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).split(".")[0] == __name__.split(".")[0]:
            return True
        tb = tb.tb_next
    return False


def _clear_frames(tb: TracebackType | None) -> None:
    """``traceback.clear_frames``, plus the snapshot of locals that Python < 3.13 keeps once a
    traceback printer has read ``frame.f_locals`` (IPython's does): clearing leaves it full."""
    while tb is not None:
        frame = tb.tb_frame
        try:
            frame.clear()
        except RuntimeError:  # the frame is still running: its variables are in use
            pass
        else:
            if sys.version_info < (3, 13):
                frame.f_locals.clear()
        tb = tb.tb_next
