"""Busy loops beside a measurement: ``while :; do :; done`` in bash, ``per_core`` of them for every core."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["busy", "load_average"]


@contextmanager
def busy(per_core: int, settle_s: float = 2.0) -> Iterator[None]:
    """``per_core`` busy loops per core for the block (none at 0), started ``settle_s`` before it, stopped after."""
    loops = [subprocess.Popen(["bash", "-c", "while :; do :; done"]) for _ in range(per_core * (os.cpu_count() or 1))]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a killed benchmark stops its loops too
    try:
        if loops:
            time.sleep(settle_s)
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def load_average() -> float:
    """The one-minute load average (what else runs on the machine shows here too)."""
    return os.getloadavg()[0]
