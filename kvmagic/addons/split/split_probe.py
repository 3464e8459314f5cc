"""What a split model's communication costs: the time one ``generate`` spends in collectives, from torch's profiler.

A model split by tensor parallelism all-reduces its activations after every row-wise layer and gathers
its logits at the end of every forward. Without the cache each step does so over the whole prefix, with
it over one token; the bytes differ, the number of collectives does not. The profiler records each
collective as the backend ran it (gloo's ``gloo:all_reduce`` on its own thread, NCCL's kernels on the
GPU) and the calls that launched or waited for it; the time covered by any of them is the time the run
spent communicating. The profiler slows the run it watches, so this run is extra and untimed, like the
hooked run of ``steps``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING

from kvmagic.measure.accelerator import synchronize
from kvmagic.measure.lockstep import barrier
from kvmagic.measure.timing import generate_once

if TYPE_CHECKING:
    import torch
    from transformers import GenerationConfig, PreTrainedModel

__all__ = ["COLLECTIVE_MARKS", "CommunicationRun", "communication_run", "covered_seconds", "is_collective"]

# Names of profiler events that are collectives or their launch and wait: gloo's own ("gloo:all_reduce"),
# NCCL's kernels ("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), c10d's ops and the functional collectives'.
COLLECTIVE_MARKS = ("gloo:", "nccl", "c10d::", "_c10d_functional::")


@dataclass(frozen=True)
class CommunicationRun:
    """One profiled ``generate``: its seconds, the seconds covered by collectives, how many the backend ran."""

    seconds: float
    communication_s: float
    collectives: int


def is_collective(name: str) -> bool:
    lowered = name.lower()
    return any(mark.lower() in lowered for mark in COLLECTIVE_MARKS)


def covered_seconds(spans: Iterable[tuple[float, float]]) -> float:
    """The length of the union of ``(start, end)`` spans: nested and overlapping ones count once."""
    total, reach = 0.0, -float("inf")
    for start, end in sorted(spans):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Keep the native stderr quiet while the profiler starts and stops: torch's profiler writes a line to it
    each time (``USDT: ... profiler_start``), past Python's ``sys.stderr``."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def communication_run(
    model: PreTrainedModel,
    inputs: Mapping[str, torch.Tensor],
    config: GenerationConfig,
    devices: Iterable[torch.device],
) -> CommunicationRun:
    """One ``generate`` under torch's profiler, after a barrier and between device synchronizations; what it
    spent in collectives on this rank."""
    from torch.profiler import ProfilerActivity, profile

    devices = tuple(devices)
    activities = [ProfilerActivity.CPU]
    if any(device.type == "cuda" for device in devices):
        activities.append(ProfilerActivity.CUDA)
    profiler = profile(activities=activities)
    barrier()
    with _quiet_stderr():
        profiler.start()
    try:
        synchronize(devices)
        start = perf_counter()
        generate_once(model, inputs, config)
        synchronize(devices)
        seconds = perf_counter() - start
    finally:
        with _quiet_stderr():
            profiler.stop()
    spans, ran = [], 0
    for event in profiler.events():
        if is_collective(event.name):
            spans.append((event.time_range.start / 1e6, event.time_range.end / 1e6))
            ran += any(mark in event.name.lower() for mark in ("gloo:", "nccl"))
    return CommunicationRun(seconds, covered_seconds(spans), ran)
