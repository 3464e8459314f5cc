"""The accelerators a model sits on: wait for their queued work, read their peak memory, free their caches.

It imports nothing of kvmagic's but the capabilities, so loading, timing and the guards can all lean on it.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvmagic.measure.capabilities import accelerator_functions, device_available

if TYPE_CHECKING:
    import torch

__all__ = ["HOST_DELTA", "PROCESS_PEAK", "PeakMemory", "release_memory", "synchronize", "track_peak"]

PROCESS_PEAK = "process peak RSS"  # the whole process's resident peak: no device keeps its own statistics
HOST_DELTA = "host RSS delta"  # the growth of resident memory beside an accelerator's figure
_BACKENDS = ("cuda", "xpu", "mps")

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def synchronize(devices: Iterable[torch.device]) -> None:
    """Wait for queued work on every accelerator in ``devices``; CPU work is already done."""
    import torch

    synchronizers: dict[str, Callable[[torch.device], None]] = {
        "cuda": torch.cuda.synchronize,
        "xpu": lambda device: torch.xpu.synchronize(device),
        "mps": lambda device: torch.mps.synchronize(),
    }
    for device in devices:
        wait = synchronizers.get(device.type)
        if wait is not None:
            wait(device)


def release_memory() -> None:
    """Collect what was dropped and hand every accelerator's cached memory back to its driver."""
    import torch

    gc.collect()
    for kind in _BACKENDS:
        backend = getattr(torch, kind, None)
        if backend is not None and hasattr(backend, "empty_cache") and device_available(kind):
            backend.empty_cache()
    has = accelerator_functions()  # torch.accelerator also reaches backends named nowhere here
    if {"empty_cache", "is_available"} <= has and torch.accelerator.is_available():
        torch.accelerator.empty_cache()


def _allocator(kind: str) -> tuple[Callable[[torch.device], None], Callable[[torch.device], int]] | None:
    """How to reset and read the peak of ``kind``'s allocator: ``torch.accelerator`` where it serves
    that backend, else the backend's own statistics; None where neither keeps a peak (MPS)."""
    import torch

    if {"current_accelerator", "reset_peak_memory_stats", "max_memory_allocated"} <= accelerator_functions():
        current = torch.accelerator.current_accelerator()
        if current is not None and current.type == kind:
            return torch.accelerator.reset_peak_memory_stats, torch.accelerator.max_memory_allocated
    backend = getattr(torch, kind, None)
    if backend is not None and hasattr(backend, "reset_peak_memory_stats") and hasattr(backend, "max_memory_allocated"):
        return backend.reset_peak_memory_stats, backend.max_memory_allocated
    return None


class PeakMemory:
    """Peak memory during one run, from the best source each device has; ``source`` names them.

    An accelerator with allocator statistics (CUDA, XPU) gives its allocator's peak, summed over
    the model's devices of that kind and reset at the start: tensors only (weights, cache,
    activations), not the allocator's reserve. Devices without such statistics (the CPU, MPS)
    are counted from the process's resident memory: the whole process's peak when no device has
    allocator statistics, else the growth of its peak over the start, beside the accelerators'
    figures (the CPU share of a mixed device map). The resident peak is exact on Linux (the
    kernel's high-water mark, reset at the start), else sampled every ``interval`` seconds.
    """

    def __init__(self, devices: Iterable[torch.device], *, interval: float = 0.001, sample: bool | None = None) -> None:
        devices = tuple(devices)
        self.allocators = {d: api for d in devices if d.type != "cpu" and (api := _allocator(d.type)) is not None}
        self.host = not self.allocators or any(d not in self.allocators for d in devices)
        self.interval = interval
        self.sample = (not _kernel_peak_available()) if sample is None else sample
        self.parts: dict[str, int] = {}  # source -> bytes; peak_bytes is their sum
        self.peak_bytes = 0
        self._rss_start = 0
        self.rss_peak_bytes = 0  # the resident peak seen so far (live while a sampling thread runs)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def source(self) -> str:
        """Where the figure comes from, e.g. ``cuda allocator`` or ``cuda allocator + host RSS delta``."""
        return " + ".join(self.parts)

    def start(self) -> None:
        for device, (reset, _) in self.allocators.items():
            reset(device)
        if self.host:
            self._start_host()

    def stop(self) -> int:
        parts: dict[str, int] = {}
        for device, (_, read) in self.allocators.items():
            label = f"{device.type} allocator"
            parts[label] = parts.get(label, 0) + read(device)
        if self.host:
            peak = self._stop_host()
            if self.allocators:
                parts[HOST_DELTA] = max(0, peak - self._rss_start)
            else:
                parts[PROCESS_PEAK] = peak
        self.parts = parts
        self.peak_bytes = sum(parts.values())
        return self.peak_bytes

    def _start_host(self) -> None:
        if self.sample:
            import psutil

            process = psutil.Process()
            self._rss_start = self.rss_peak_bytes = process.memory_info().rss
            self._stop.clear()
            self._thread = threading.Thread(target=self._poll, args=(process,), daemon=True)
            self._thread.start()
        else:
            _CLEAR_REFS.write_text("5")  # resets VmHWM, the kernel's peak RSS, to the current RSS
            self._rss_start = _status_kib("VmRSS") * 1024

    def _stop_host(self) -> int:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            return self.rss_peak_bytes
        return _status_kib("VmHWM") * 1024

    def _poll(self, process: Any) -> None:
        while not self._stop.wait(self.interval):
            self.rss_peak_bytes = max(self.rss_peak_bytes, process.memory_info().rss)
        self.rss_peak_bytes = max(self.rss_peak_bytes, process.memory_info().rss)


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
