"""What a strategy's cache costs in quality: its next-token distributions against the full cache's, step by step.

Both are read teacher-forced along the same continuation (the full cache's greedy tokens, or a given text),
so every step is judged on the same context, not on a text that has already wandered off. Per step, three
figures come from the two distributions (:class:`Step`); a strategy's :class:`Quality` is their mean over
the steps. A lossless strategy whose logits equal the full cache's, or differ from them only by float32 rounding
(:data:`FLOAT_NOISE_NATS`), scores exactly 1, 0 and 1. Pure Python: the per-step figures are computed next to
the logits (:mod:`kvmagic.measure.forcing`), the summary here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kvmagic.core.intervals import log_mean_interval

__all__ = ["FLOAT_NOISE_NATS", "Quality", "Step", "quality_of"]

# A step's KL at or below this is float32 rounding, not a cache's loss: the same logits summed in another order
# (no cache against a cache, a static cache's padded length) differ by about 1e-6 of a logit, which moves the KL by
# about half its square (1e-12, the order seen on tiny); a lossy cache's KL is 1e-5 and more. Such a step counts
# as the full cache's own: agreeing, KL 0, the same loss. Half precision's rounding reaches a lossy cache's KL, and
# stays counted.
FLOAT_NOISE_NATS = 1e-9


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
    ``along``: ``greedy`` (the full cache's own greedy tokens) or ``text`` (a given text). ``ppl_interval``:
    a rough 95% interval of ``ppl_ratio`` from the steps' spread (Student's t on their log ratios, as if the
    steps were independent, which the steps of one text are not), None below 2 steps: where it holds 1, the
    ratio is within the noise of the steps read, neither better nor worse than the full cache's.
    """

    steps: int
    top1_agreement: float
    kl_nats: float
    ppl_ratio: float
    along: str = "greedy"
    ppl_interval: tuple[float, float] | None = None

    @property
    def lossless(self) -> bool:
        """Every step kept the full cache's prediction: nothing lost to trade against memory or speed."""
        return self.kl_nats == 0 and self.top1_agreement == 1


def quality_of(steps: Sequence[Step], along: str = "greedy") -> Quality:
    """The mean of each figure over ``steps``, a step within float noise (:data:`FLOAT_NOISE_NATS`) counted as
    the full cache's own; the perplexity ratio is ``exp(mean nll - mean full nll)``, with its rough interval."""
    if not steps:
        return Quality(0, math.nan, math.nan, math.nan, along)
    count = len(steps)
    exact = [step.kl_nats <= FLOAT_NOISE_NATS for step in steps]
    agreement = sum(step.agrees or same for step, same in zip(steps, exact)) / count
    kl = sum(0.0 if same else step.kl_nats for step, same in zip(steps, exact)) / count
    logs = [0.0 if same else step.nll - step.full_nll for step, same in zip(steps, exact)]
    interval = log_mean_interval(logs)
    ends = None if interval is None else (math.exp(interval[0]), math.exp(interval[1]))
    return Quality(count, agreement, kl, math.exp(math.fsum(logs) / count), along, ends)
