"""What a strategy's cache costs in quality: its next-token distributions against the full cache's, step by step.

Both are read teacher-forced along the same continuation (the full cache's greedy tokens, or a given text),
so every step is judged on the same context, not on a text that has already wandered off. Per step, three
figures come from the two distributions (:class:`Step`); a strategy's :class:`Quality` is their mean over
the steps. A lossless strategy whose logits equal the full cache's scores exactly 1, 0 and 1. Pure Python:
the per-step figures are computed next to the logits (:mod:`kvmagic.measure.forcing`), the summary here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Quality", "Step", "quality_of"]


@dataclass(frozen=True)
class Step:
    """One forced step: whether the two argmaxes agree, KL(full || strategy), and each side's loss on the
    forced token (its negative log-probability, in nats)."""

    agrees: bool
    kl_nats: float
    full_nll: float
    nll: float


@dataclass(frozen=True)
class Quality:
    """A strategy's next-token distributions against the full cache's over ``steps`` forced steps.

    ``top1_agreement``: the share of steps whose argmax is the full cache's. ``kl_nats``: the mean
    KL(full || strategy) per step. ``ppl_ratio``: the perplexity of the forced continuation under the
    strategy over its perplexity under the full cache (above 1: the strategy finds the text less likely).
    ``along``: ``greedy`` (the full cache's own greedy tokens) or ``text`` (a given text).
    """

    steps: int
    top1_agreement: float
    kl_nats: float
    ppl_ratio: float
    along: str = "greedy"


def quality_of(steps: Sequence[Step], along: str = "greedy") -> Quality:
    """The mean of each figure over ``steps``; the perplexity ratio is ``exp(mean nll - mean full nll)``."""
    if not steps:
        return Quality(0, math.nan, math.nan, math.nan, along)
    count = len(steps)
    agreement = sum(step.agrees for step in steps) / count
    kl = sum(step.kl_nats for step in steps) / count
    log_ratio = sum(step.nll - step.full_nll for step in steps) / count
    return Quality(count, agreement, kl, math.exp(log_ratio), along)
