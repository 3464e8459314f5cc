"""The device's best: memory bandwidth from a large copy, matrix throughput from a matmul at the model's dtype.

Both are the most a step of generation can use (a decode step streams weights and cache, a long forward
multiplies (tokens x hidden) by (hidden x hidden) matrices), so the limits of kvmagic.addons.limits.bounds hold
against them. Each probe warms up, then times the median of a few
repeats between device synchronizations; results are kept for the life of the process: the
bandwidth per device, the throughput per device, dtype and hidden size.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING

from kvmagic.addons.limits.bounds import Hardware
from kvmagic.measure.accelerator import synchronize

if TYPE_CHECKING:
    import torch

__all__ = ["Hardware", "copy_bandwidth", "matmul_throughput", "measure_hardware"]

REPEAT = 5
COPY_BYTES = {"cpu": 256 << 20, "cuda": 1 << 30}  # per buffer: far beyond any cache; a few ms per copy
_OTHER_COPY_BYTES = 256 << 20
MATMUL_SECONDS = {"cpu": 0.03, "cuda": 0.002}  # one matmul at least this long: saturated, sync cost negligible
_OTHER_MATMUL_SECONDS = 0.005
MAX_TOKENS = {"cpu": 4096, "cuda": 65536}
_OTHER_MAX_TOKENS = 16384
_bandwidths: dict[str, float] = {}
_throughputs: dict[tuple[str, str, int], float] = {}


def measure_hardware(device: torch.device, dtype: torch.dtype, hidden_size: int) -> Hardware:
    """Both probes on ``device``, each measured once per process (a second call costs nothing)."""
    started = perf_counter()
    key = str(device)
    if key not in _bandwidths:
        _bandwidths[key] = copy_bandwidth(device)
    flops_key = (key, str(dtype), hidden_size)
    if flops_key not in _throughputs:
        _throughputs[flops_key] = matmul_throughput(device, dtype, hidden_size)
    return Hardware(
        bandwidth_bytes_s=_bandwidths[key],
        flops_s=_throughputs[flops_key],
        device=key,
        dtype=str(dtype).removeprefix("torch."),
        probe_s=perf_counter() - started,
    )


def copy_bandwidth(device: torch.device, nbytes: int | None = None) -> float:
    """Bytes read plus bytes written per second by a copy between two buffers of ``nbytes``."""
    import torch

    nbytes = nbytes or _copy_bytes(device)
    source = torch.ones(nbytes, dtype=torch.uint8, device=device)
    target = torch.zeros_like(source)  # both touched now: page faults stay out of the timing
    return 2 * nbytes / _median_seconds(lambda: target.copy_(source), device)


def matmul_throughput(device: torch.device, dtype: torch.dtype, hidden_size: int) -> float:
    """FLOP/s of (tokens x hidden) @ (hidden x hidden), tokens doubled until one product takes long enough."""
    import torch

    generator = torch.Generator(device=device).manual_seed(0)
    weight = torch.randn(hidden_size, hidden_size, generator=generator, device=device).to(dtype)
    tokens = 64
    while True:
        inputs = torch.randn(tokens, hidden_size, generator=generator, device=device).to(dtype)
        seconds = _median_seconds(partial(torch.matmul, inputs, weight), device, repeat=1)
        if seconds >= MATMUL_SECONDS.get(device.type, _OTHER_MATMUL_SECONDS) or tokens >= _max_tokens(device):
            break
        tokens *= 2
    seconds = _median_seconds(lambda: torch.matmul(inputs, weight), device)
    return 2 * tokens * hidden_size * hidden_size / seconds


def _median_seconds(work: Callable[[], object], device: torch.device, repeat: int = REPEAT) -> float:
    """Median wall time of ``work`` over ``repeat`` runs after one warm-up, synchronized on both sides."""
    import torch

    devices = (device,)
    times = []
    with torch.inference_mode():
        work()
        for _ in range(repeat):
            synchronize(devices)
            start = perf_counter()
            work()
            synchronize(devices)
            times.append(perf_counter() - start)
    return statistics.median(times)


def _copy_bytes(device: torch.device) -> int:
    import torch

    wanted = COPY_BYTES.get(device.type, _OTHER_COPY_BYTES)
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
        wanted = min(wanted, free // 8)  # two buffers, with room to spare beside the model
    return max(wanted, 1 << 20)


def _max_tokens(device: torch.device) -> int:
    return MAX_TOKENS.get(device.type, _OTHER_MAX_TOKENS)
