"""The records a result is made of: one strategy at one configuration, and two of them paired round by round.

The plain run is the two-strategy case (``off`` and ``dynamic``): its speed-up and interval come from its
two measurements as a :class:`Pair`.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvmagic.core import stats
from kvmagic.core.addon import answered
from kvmagic.core.config import Config
from kvmagic.core.intervals import speedup_interval
from kvmagic.core.quality import Quality
from kvmagic.core.sequential import auto_interval
from kvmagic.core.strategy import Strategy
from kvmagic.results.records import Mismatch, StepProfile

__all__ = ["MIN_REPEAT_FOR_SPREAD", "Measurement", "Pair"]

MIN_REPEAT_FOR_SPREAD = 3  # fewer runs give no meaningful IQR or interval


@dataclass(frozen=True)
class Measurement:
    """One strategy at one configuration: its timed runs, in round order, and what they left behind. ``addons`` holds
    what an add-on keeps of it, by the add-on's name; a measurement answers what an add-on says of its data as
    attributes (``m.ranks``)."""

    config: Config
    strategy: Strategy  # a spelling given here is read once, as every file and older caller gives it
    seconds: tuple[float, ...]
    generated_ids: tuple[int, ...] = ()  # what its first run generated (the batch's first sequence)
    generated_text: str = ""
    mismatch: Mismatch | None = None  # where its runs first left the reference's first run
    ttft_s: float = math.nan  # a one-token run: time to first token
    kv_bytes: int | None = None  # what the cache its timed run returned held
    peak_bytes: int | None = None  # peak memory over its timed runs
    peak_source: str = ""  # where peak_bytes comes from (see kvmagic.measure.accelerator.PeakMemory.source)
    compile_s: float = math.nan  # a compiled strategy: its first call's extra seconds
    profile: StepProfile | None = None  # its hooked run (steps), or the one that explains a mismatch
    quality: Quality | None = None  # a comparison of strategies: its logits against the full cache's, teacher-forced
    addons: dict[str, Any] = field(default_factory=dict, hash=False)  # add-on name -> what it kept of the runs

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", Strategy.of(self.strategy))

    if not TYPE_CHECKING:  # what an add-on says of its data (``m.ranks``); the centre reads ``addons``

        def __getattr__(self, name: str) -> Any:
            return answered(self, name, "measurement_attributes")

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds)

    @property
    def iqr_s(self) -> float:
        return stats.iqr(self.seconds) if len(self.seconds) >= MIN_REPEAT_FOR_SPREAD else math.nan

    @property
    def spread(self) -> float:
        """IQR/median of the timed runs; NaN below MIN_REPEAT_FOR_SPREAD runs."""
        return stats.relative_spread(self.seconds) if len(self.seconds) >= MIN_REPEAT_FOR_SPREAD else math.nan

    @property
    def identical(self) -> bool:
        return self.mismatch is None

    @property
    def decode_tok_s(self) -> float:
        """Tokens after the first per second of decoding, over every sequence of the batch: the median timed run
        less the time to first token."""
        decoding, config = self.median_s - self.ttft_s, self.config
        return config.batch * (config.new_tokens - 1) / decoding if config.new_tokens > 1 and decoding > 0 else math.nan


@dataclass(frozen=True)
class Pair:
    """The reference and one other strategy at one configuration, their runs paired round by round."""

    reference: Measurement
    other: Measurement
    sequential: bool = False  # the rounds were counted by looking at the times (-r auto): an anytime interval

    @property
    def config(self) -> Config:
        return self.other.config

    @property
    def rounds(self) -> list[tuple[float, float]]:
        return list(zip(self.reference.seconds, self.other.seconds))

    @property
    def speedup(self) -> float:
        """How many times faster the other strategy ran: a ratio of medians."""
        return self.reference.median_s / self.other.median_s

    @property
    def interval(self) -> tuple[float, float]:
        """95% interval of the true speed-up, from the per-round speed-ups (see :mod:`kvmagic.core.intervals`);
        after ``-r auto``, the anytime interval. NaNs below MIN_REPEAT_FOR_SPREAD rounds."""
        rounds = self.rounds
        if len(rounds) < MIN_REPEAT_FOR_SPREAD:
            return math.nan, math.nan
        reference, other = [r for r, _ in rounds], [o for _, o in rounds]
        found = (auto_interval if self.sequential else speedup_interval)(reference, other)
        return found if found is not None else (math.nan, math.nan)

    @property
    def identical(self) -> bool:
        return self.reference.identical and self.other.identical

    @property
    def mismatch(self) -> tuple[Measurement, Mismatch] | None:
        """The first run, in the order they ran, that left the reference's first run, and where."""
        found = [(m.mismatch.run, i, m) for i, m in enumerate((self.reference, self.other)) if m.mismatch is not None]
        if not found:
            return None
        *_, first = min(found, key=lambda entry: entry[:2])
        assert first.mismatch is not None
        return first, first.mismatch
