"""Forcing a real run to generate a chosen token, so that what kvmagic says about a difference can be checked."""

from __future__ import annotations

from typing import Any

__all__ = ["FlipCachedStep"]


class FlipCachedStep:
    """Wraps a model's forward so that, with the cache on, generated token ``step`` of sequence ``row``
    becomes ``target`` (only in runs whose batch has that row).

    The target's logit is set 1.0 above the best one, so the cached run's top-2 gap there is 1.0.
    """

    def __init__(self, forward: Any, step: int, target: int, row: int = 0) -> None:
        self.forward, self.step, self.target, self.row, self.position = forward, step, target, row, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        output = self.forward(*args, **kwargs)
        if kwargs.get("use_cache") and output.logits.shape[0] > self.row:
            self.position = 0 if output.logits.shape[1] > 1 else self.position + 1  # prefill gives token 0
            if self.position == self.step:
                last = output.logits[self.row, -1]
                last[self.target] = last.max() + 1.0
        return output
