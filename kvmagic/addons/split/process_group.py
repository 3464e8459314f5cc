"""The ranks torchrun starts: whether this process is one of them, and joining and leaving their process group.

torchrun starts one process per device and tells each, in its environment, which rank it is and where the others
meet; the ranks join one process group on the backend of this machine's accelerator, then keep the lockstep of
:mod:`kvmagic.measure.lockstep`, and leave the group together once every rank is done.
"""

from __future__ import annotations

import os

from kvmagic.errors import KVMagicError
from kvmagic.measure.lockstep import World, barrier, world

__all__ = ["LAUNCH_ENV", "join", "launched", "leave"]

LAUNCH_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")  # what torchrun sets for each rank
_BACKENDS = {"cuda": "nccl", "cpu": "gloo"}  # as transformers' own tensor parallelism picks them


def launched() -> bool:
    """Whether torchrun (or another launcher speaking its protocol) started this process as one of several ranks."""
    return all(name in os.environ for name in LAUNCH_ENV)


def join() -> World:
    """Join the ranks torchrun started (once per process), on the backend of this machine's accelerator."""
    if not launched():
        raise KVMagicError(
            "a split model needs the ranks torchrun starts: run this under torchrun, one rank per device"
        )
    found = world()
    if found is not None:
        return found
    import torch
    import torch.distributed as dist

    kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group(backend=_BACKENDS[kind])
    joined = world()
    assert joined is not None
    return joined


def leave() -> None:
    """Leave the process group once every rank is done: a rank that exits while another still tears its
    connections down can make that one abort."""
    if world() is not None:
        import torch.distributed as dist

        barrier()
        dist.destroy_process_group()
