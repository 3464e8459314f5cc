"""The accelerators a model sits on: wait for their queued work, read their peak memory, free their caches.

A leaf: it imports nothing of kvmagic's, so loading, timing and the guards can all lean on it.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["PeakMemory", "release_memory", "synchronize", "track_peak"]

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def _synchronizers() -> dict[str, Callable[[torch.device], None]]:
    import torch

    return {
        "cuda": torch.cuda.synchronize,
        "xpu": lambda device: torch.xpu.synchronize(device),
        "mps": lambda device: torch.mps.synchronize(),
    }


def synchronize(devices: Iterable[torch.device]) -> None:
    """Wait for queued work on every accelerator in ``devices``; CPU work is already done."""
    synchronizers = _synchronizers()
    for device in devices:
        wait = synchronizers.get(device.type)
        if wait is not None:
            wait(device)


def release_memory() -> None:
    """Collect what was dropped and hand cached accelerator memory back to the driver."""
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class PeakMemory:
    """Peak memory during one run: CUDA's allocator peak on CUDA, the process's peak RSS otherwise.

    On CUDA it is ``torch.cuda.max_memory_allocated`` summed over the model's CUDA devices, reset
    at the start: tensors only (weights, cache, activations), not the allocator's reserve. Elsewhere
    it is the peak resident set size of the whole process: exact on Linux (the kernel's high-water
    mark, reset at the start), else sampled every ``interval`` seconds by a thread.
    """

    def __init__(self, devices: Iterable[torch.device], *, interval: float = 0.001, sample: bool | None = None) -> None:
        self.cuda = tuple(d for d in devices if d.type == "cuda")
        self.interval = interval
        self.sample = (not _kernel_peak_available()) if sample is None else sample
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        import torch

        if self.cuda:
            for device in self.cuda:
                torch.cuda.reset_peak_memory_stats(device)
        elif self.sample:
            import psutil

            process = psutil.Process()
            self.peak_bytes = process.memory_info().rss
            self._stop.clear()
            self._thread = threading.Thread(target=self._poll, args=(process,), daemon=True)
            self._thread.start()
        else:
            _CLEAR_REFS.write_text("5")  # resets VmHWM, the kernel's peak RSS

    def stop(self) -> int:
        import torch

        if self.cuda:
            self.peak_bytes = sum(torch.cuda.max_memory_allocated(device) for device in self.cuda)
        elif self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        else:
            self.peak_bytes = _status_kib("VmHWM") * 1024
        return self.peak_bytes

    def _poll(self, process: Any) -> None:
        while not self._stop.wait(self.interval):
            self.peak_bytes = max(self.peak_bytes, process.memory_info().rss)
        self.peak_bytes = max(self.peak_bytes, process.memory_info().rss)


@contextmanager
def track_peak(devices: Iterable[torch.device], **kwargs: Any) -> Iterator[PeakMemory]:
    """``with track_peak(devices) as peak: ...``; ``peak.peak_bytes`` is set on exit."""
    tracker = PeakMemory(devices, **kwargs)
    tracker.start()
    try:
        yield tracker
    finally:
        tracker.stop()


@functools.cache
def _kernel_peak_available() -> bool:
    """Linux lets a process reset its own peak RSS (``clear_refs`` 5, since 4.0); containers may forbid it."""
    try:
        _CLEAR_REFS.write_text("5")
        return _status_kib("VmHWM") > 0
    except OSError:
        return False


def _status_kib(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"{_STATUS} has no {field}")
