"""Peak bytes of live tensors on any device, where no allocator counts them (CPU).

On CUDA, ``max_memory_allocated`` counts the tensors alive at the worst moment; on a CPU the only
peak is the process's resident memory, which also holds what the C heap keeps of freed blocks. To
tell an arithmetic model of memory (one that counts tensors) from the allocator's overhead, this
counts every storage an operator creates while the mode is on, from its creation until the last
tensor viewing it is gone. Storages that existed before (the weights) are not counted, except those
handed over as ``existing``: they count from the start, so that freeing them (a cache replaced by a
longer one) lowers what is alive, and the peak is reported above them.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["LiveTensors", "track_tensors"]


class LiveTensors(TorchDispatchMode):
    """A dispatch mode that keeps ``live_bytes`` and ``peak_bytes`` of the storages created under it."""

    def __init__(self, existing: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.live_bytes = 0
        self._storages: dict[tuple[str, int], list[int]] = {}  # (device, pointer) -> [bytes, tensors alive]
        self._tensors: set[int] = set()
        self._most = 0
        for tensor in existing:
            if id(tensor) not in self._tensors:
                self._track(tensor)
        self._start = self._most = self.live_bytes

    @property
    def peak_bytes(self) -> int:
        """The most alive at once, above what was alive at the start."""
        return self._most - self._start

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        output = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(output)[0]:
            if isinstance(tensor, torch.Tensor) and id(tensor) not in self._tensors:
                self._track(tensor)
        return output

    def _track(self, tensor: torch.Tensor) -> None:
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):  # a wrapper subclass without real storage
            return
        if not storage.data_ptr() or tensor.device.type == "meta":
            return
        key = (str(tensor.device), storage.data_ptr())
        entry = self._storages.get(key)
        if entry is None:
            entry = self._storages[key] = [storage.nbytes(), 0]
            self.live_bytes += entry[0]
            self._most = max(self._most, self.live_bytes)
        entry[1] += 1
        self._tensors.add(id(tensor))
        weakref.finalize(tensor, self._release, key, id(tensor))

    def _release(self, key: tuple[str, int], ident: int) -> None:
        self._tensors.discard(ident)
        entry = self._storages.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] == 0:
                self.live_bytes -= entry[0]
                del self._storages[key]


@contextmanager
def track_tensors() -> Iterator[LiveTensors]:
    """``with track_tensors() as live: ...``; ``live.peak_bytes`` is the most that was alive at once.

    To count tensors that exist already, enter ``LiveTensors(existing)`` and keep no other reference
    to them, or they cannot be freed.
    """
    with LiveTensors() as mode:
        yield mode
