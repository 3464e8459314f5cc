"""The KV bytes a full-precision dynamic cache holds, layer by layer, as the installed transformers keeps them.

A full-attention layer holds every cached position. A sliding-window layer of window w holds them all too
under a cache that does not window it (transformers 4.55's), and under one that does (5.x's), the w - 1
most recent between writes; those are a view of the last write's concatenation, so the storage that stays
allocated is theirs plus that write's: w positions after a decode step, the whole prompt after the prefill.
How the installed cache keeps a sliding layer is probed (kvmagic.measure.memory), not assumed here.
Pure arithmetic, checkable by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["KVSizes", "SlidingKeep"]


@dataclass(frozen=True)
class SlidingKeep:
    """How a dynamic cache keeps a sliding-window layer of window w: the default keeps every position."""

    windowed: bool = False  # whether it stops growing past the window at all
    kept: int = 0  # positions kept between writes, past the window: w + kept (transformers 5: w - 1)
    view: bool = False  # the kept positions are a view of the last write's concatenation, whose storage stays
    fixed_bytes: int = 0  # per sliding layer, beside its keys and values (transformers 5: its window as a tensor)

    def held(self, window: int | None, positions: int, written: int = 1) -> int:
        """Positions of storage a layer holds with ``positions`` cached, the last ``written`` of them in one write."""
        if window is None or not self.windowed:
            return positions
        if self.view:
            return min(positions - written, window + self.kept) + written
        return min(positions, window + self.kept)

    def cap(self, window: int | None) -> float:
        """The most a layer holds after a decode step, however many positions are cached."""
        return math.inf if window is None or not self.windowed else window + self.kept + int(self.view)


@dataclass(frozen=True)
class KVSizes:
    """A model's KV cache sizes: one position's keys and values in one layer of one sequence, each layer's
    window (None for full attention), and how the installed cache keeps a sliding layer."""

    position_bytes: int
    windows: tuple[int | None, ...]
    keep: SlidingKeep = field(default_factory=SlidingKeep)

    def held_bytes(self, positions: int, batch: int = 1, written: int = 1) -> int:
        """Bytes held with ``positions`` cached per sequence, the last ``written`` of them written at once."""
        held = sum(self.keep.held(window, positions, written) for window in self.windows)
        sliding = sum(window is not None for window in self.windows) if self.keep.windowed else 0
        return batch * self.position_bytes * held + sliding * self.keep.fixed_bytes

    def after(self, prompt_tokens: int, new_tokens: int, batch: int = 1) -> int:
        """Bytes the cache holds after a ``generate`` of ``new_tokens`` after ``prompt_tokens``: every position
        but the last token's, the last write the prompt's when only the prefill wrote."""
        written = prompt_tokens if new_tokens == 1 else 1
        return self.held_bytes(prompt_tokens + new_tokens - 1, batch, written)

    def positions(self, nbytes: float, batch: int = 1) -> float:
        """The cached positions per sequence at which a cache past the prefill holds ``nbytes`` (the inverse of
        ``held_bytes``); NaN where no number of positions does (every layer already at its window)."""
        sliding = sum(window is not None for window in self.windows) if self.keep.windowed else 0
        rest = (nbytes - sliding * self.keep.fixed_bytes) / (batch * self.position_bytes)
        caps = sorted(self.keep.cap(window) for window in self.windows)
        for index, cap in enumerate(caps):  # between the windows below and this one, the layers not full grow
            growing = len(caps) - index
            at = (rest - sum(caps[:index])) / growing
            if at <= cap:
                return at
        return math.nan
