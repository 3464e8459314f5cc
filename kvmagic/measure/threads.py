"""torch's CPU threads for one run, put back afterwards.

On a CPU the thread count changes timings more than anything else a user can set (on a shared
machine, two threads on two busy cores ran about ten times slower than one), so a run may choose
it, and a notebook must not keep that choice after the run, whether it finished or failed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kvmagic.errors import KVMagicError

__all__ = ["torch_threads"]


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(n)``; None leaves torch's own setting alone."""
    if n is None:
        yield
        return
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise KVMagicError(
            f"{{threads}} must be a whole number >= 1 (or None for torch's default), got {n!r}", "threads"
        )
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
