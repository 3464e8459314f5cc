"""Peak memory and memory release per backend, with fake CUDA, XPU and MPS backends standing in for real ones.

The fakes of ``torch.accelerator``'s memory functions are added where the installed torch lacks them
(``raising=False``): torch 2.6, the declared floor, has the module but not all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kvmagic.measure import accelerator, capabilities
from kvmagic.measure.accelerator import HOST_DELTA, PROCESS_PEAK, PeakMemory, release_memory, track_peak

CUDA0, CUDA1, XPU0, MPS, CPU = (torch.device(*d) for d in (("cuda", 0), ("cuda", 1), ("xpu", 0), ("mps",), ("cpu",)))
KIB = 1024


class FakeAllocator:
    """A backend's peak statistics: each device's peak, the resets, the reads."""

    def __init__(self, peaks: dict[torch.device, int]) -> None:
        self.peaks = peaks
        self.calls: list[tuple[str, torch.device]] = []

    def reset(self, device: torch.device) -> None:
        self.calls.append(("reset", device))

    def read(self, device: torch.device) -> int:
        self.calls.append(("read", device))
        return self.peaks[device]


@pytest.fixture(autouse=True)
def asked_again() -> Iterator[None]:
    """Which functions ``torch.accelerator`` has is asked afresh in each test, after its fakes are in place."""
    capabilities.accelerator_functions.cache_clear()
    yield
    capabilities.accelerator_functions.cache_clear()


@pytest.fixture
def host(monkeypatch, tmp_path: Path) -> dict[str, int]:
    """The kernel's resident figures, in KiB: VmRSS when the run starts, VmHWM when it ends."""
    figures = {"VmRSS": 1000, "VmHWM": 1600}
    monkeypatch.setattr(accelerator, "_CLEAR_REFS", tmp_path / "clear_refs")
    monkeypatch.setattr(accelerator, "_status_kib", lambda field: figures[field])
    return figures


def _no_accelerator_api(monkeypatch) -> None:
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *args, **kwargs: None, raising=False)


def _backend(monkeypatch, kind: str, allocator: FakeAllocator) -> None:
    backend = getattr(torch, kind)
    monkeypatch.setattr(backend, "reset_peak_memory_stats", allocator.reset, raising=False)
    monkeypatch.setattr(backend, "max_memory_allocated", allocator.read, raising=False)


def test_cuda_uses_torch_accelerator_where_it_serves_cuda(monkeypatch, host) -> None:
    api = FakeAllocator({CUDA0: 300, CUDA1: 200})
    monkeypatch.setattr(
        torch.accelerator, "current_accelerator", lambda *args, **kwargs: torch.device("cuda"), raising=False
    )
    monkeypatch.setattr(torch.accelerator, "reset_peak_memory_stats", api.reset, raising=False)
    monkeypatch.setattr(torch.accelerator, "max_memory_allocated", api.read, raising=False)
    _backend(monkeypatch, "cuda", FakeAllocator({}))  # must not be asked
    with track_peak([CUDA0, CUDA1], sample=False) as peak:
        pass
    assert (peak.peak_bytes, peak.source, peak.parts) == (500, "cuda allocator", {"cuda allocator": 500})
    assert api.calls == [("reset", CUDA0), ("reset", CUDA1), ("read", CUDA0), ("read", CUDA1)]


def test_cuda_falls_back_to_its_own_statistics(monkeypatch, host) -> None:
    _no_accelerator_api(monkeypatch)
    cuda = FakeAllocator({CUDA0: 123})
    _backend(monkeypatch, "cuda", cuda)
    with track_peak([CUDA0], sample=False) as peak:
        pass
    assert (peak.peak_bytes, peak.source) == (123, "cuda allocator")
    assert cuda.calls == [("reset", CUDA0), ("read", CUDA0)]


def test_xpu_reports_its_allocator_not_host_memory(monkeypatch, host) -> None:
    _no_accelerator_api(monkeypatch)
    _backend(monkeypatch, "xpu", FakeAllocator({XPU0: 4096}))
    with track_peak([XPU0], sample=False) as peak:
        pass
    assert (peak.peak_bytes, peak.source) == (4096, "xpu allocator")


def test_the_cpu_share_of_a_mixed_map_is_counted_beside_the_gpu(monkeypatch, host) -> None:
    _no_accelerator_api(monkeypatch)
    _backend(monkeypatch, "cuda", FakeAllocator({CUDA0: 10 * KIB}))
    with track_peak([CPU, CUDA0], sample=False) as peak:
        pass
    assert peak.parts == {"cuda allocator": 10 * KIB, HOST_DELTA: (1600 - 1000) * KIB}
    assert peak.source == f"cuda allocator + {HOST_DELTA}"
    assert peak.peak_bytes == (10 + 600) * KIB


@pytest.mark.parametrize("devices", [[CPU], [MPS], []], ids=["cpu", "mps", "none"])
def test_without_allocator_statistics_the_process_peak_stands(monkeypatch, host, devices) -> None:
    _no_accelerator_api(monkeypatch)
    with track_peak(devices, sample=False) as peak:
        pass
    assert (peak.peak_bytes, peak.source) == (1600 * KIB, PROCESS_PEAK)


def test_the_sampled_host_share_is_a_delta_too(monkeypatch) -> None:
    _no_accelerator_api(monkeypatch)
    _backend(monkeypatch, "cuda", FakeAllocator({CUDA0: 0}))
    tracker = PeakMemory([CPU, CUDA0], sample=True, interval=0.001)
    tracker.start()
    block = bytearray(32 * 2**20)
    block[::4096] = b"\x01" * len(range(0, len(block), 4096))  # every page written: resident
    tracker.stop()  # its last sample sees the block, still alive
    del block
    assert tracker.parts["cuda allocator"] == 0
    assert 28 * 2**20 <= tracker.parts[HOST_DELTA] < tracker.rss_peak_bytes


def _backends(monkeypatch, cuda: bool, xpu: bool, mps: bool, accelerator: bool) -> list[str]:
    """Fake backends that say whether they are available and record which cache was emptied."""
    emptied: list[str] = []
    for kind in ("cuda", "xpu", "mps"):
        monkeypatch.setattr(getattr(torch, kind), "empty_cache", lambda kind=kind: emptied.append(kind), raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.xpu, "is_available", lambda: xpu)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: accelerator, raising=False)
    monkeypatch.setattr(torch.accelerator, "empty_cache", lambda: emptied.append("accelerator"), raising=False)
    return emptied


def test_release_empties_every_available_backend(monkeypatch) -> None:
    emptied = _backends(monkeypatch, cuda=True, xpu=True, mps=True, accelerator=True)
    release_memory()
    assert emptied == ["cuda", "xpu", "mps", "accelerator"]


def test_release_leaves_absent_backends_alone(monkeypatch) -> None:
    emptied = _backends(monkeypatch, cuda=False, xpu=True, mps=False, accelerator=False)
    release_memory()
    assert emptied == ["xpu"]


@pytest.mark.gpu
def test_release_hands_cuda_memory_back() -> None:
    block = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    del block
    held = torch.cuda.memory_reserved()
    release_memory()
    assert torch.cuda.memory_reserved() <= held - 256 * 2**20
