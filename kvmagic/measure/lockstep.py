"""Processes that run the same protocol in lockstep, as ranks a launcher started: the time and the decisions they
share.

Where a launcher starts several processes on one measurement (each a rank of a process group, say each holding a
share of the model), every rank runs the same protocol. Anything a rank decides from its own clock (when to stop
taking rounds, whether the estimate fits the budget) would let the ranks part ways, one waiting in a collective the
others never reach; so a time is reduced across the ranks (the slowest rank's) before anything reads it, and a
decision is the first rank's. Outside a process group every function here is the identity, and nothing imports
``torch.distributed``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import torch

    from kvmagic.core.stop import StopRule
    from kvmagic.core.strategy import Strategy

__all__ = [
    "Lockstep",
    "World",
    "any_reason",
    "barrier",
    "everyone",
    "from_first",
    "lockstep",
    "slowest",
    "slowest_each",
    "world",
]

T = TypeVar("T")


@dataclass(frozen=True)
class World:
    """This process's place among the ranks: which one it is, how many there are, how they talk."""

    rank: int
    size: int
    local_rank: int
    backend: str
    device: str  # where this rank computes: cpu, cuda:1

    @property
    def first(self) -> bool:
        """The rank that prints (rank 0)."""
        return self.rank == 0


def _initialized() -> bool:
    import torch.distributed as dist

    return bool(dist.is_available() and dist.is_initialized())


def world() -> World | None:
    """The process group this process belongs to, or None outside one."""
    if not _initialized():
        return None
    import torch
    import torch.distributed as dist

    backend = str(dist.get_backend())
    device = f"cuda:{torch.cuda.current_device()}" if backend == "nccl" else "cpu"
    local = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
    return World(dist.get_rank(), dist.get_world_size(), local, backend, device)


def barrier() -> None:
    """Wait for every rank (nothing outside a process group)."""
    if _initialized():
        import torch.distributed as dist

        dist.barrier()


def _device() -> torch.device:
    import torch

    found = world()
    return torch.device(found.device if found else "cpu")


def slowest(seconds: float) -> float:
    """The largest of every rank's ``seconds``: a run across ranks is done when its slowest rank is."""
    return slowest_each([seconds])[0]


def slowest_each(seconds: Sequence[float]) -> list[float]:
    """Element by element, the largest of every rank's ``seconds`` (each rank passes as many)."""
    if not _initialized() or not seconds:
        return list(seconds)
    import torch
    import torch.distributed as dist

    values = torch.tensor(list(seconds), dtype=torch.float64, device=_device())
    dist.all_reduce(values, op=dist.ReduceOp.MAX)
    return [float(v) for v in values.cpu().tolist()]


def everyone(value: T) -> list[T]:
    """Every rank's ``value``, in rank order, on every rank (``[value]`` outside a process group)."""
    if not _initialized():
        return [value]
    import torch.distributed as dist

    found: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(found, value)
    return found


def from_first(value: T) -> T:
    """Rank 0's ``value`` on every rank: the one decision all of them act on."""
    if not _initialized():
        return value
    import torch.distributed as dist

    box: list[Any] = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]  # type: ignore[no-any-return]


def any_reason(reason: str) -> str:
    """The first rank's non-empty ``reason`` to skip something, on every rank: skipped on one, skipped on all."""
    return next((said for said in everyone(reason) if said), "")


@dataclass(frozen=True)
class Lockstep:
    """A stop rule whose every answer is rank 0's: ``-r auto``'s time cap reads each rank's own clock."""

    rule: StopRule

    @property
    def sequential(self) -> bool:
        return self.rule.sequential

    def done(self, rounds: int, elapsed: float, times: Mapping[Strategy, Sequence[float]]) -> bool:
        return bool(from_first(self.rule.done(rounds, elapsed, times)))


def lockstep(rule: StopRule) -> StopRule:
    """``rule``, asked on rank 0 only when there are ranks."""
    return Lockstep(rule) if _initialized() else rule
