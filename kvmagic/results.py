"""What a benchmark found, kept apart from how it was measured and how it is shown."""

from __future__ import annotations

import html
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import stats
from .memory import MIB

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "COLUMNS",
    "MIN_REPEAT_FOR_SPREAD",
    "NEAR_TIE",
    "BenchmarkResult",
    "Measurement",
    "Mismatch",
    "StepProfile",
    "first_mismatch",
]

COLUMNS = (
    "prompt_tokens", "new_tokens", "uncached_s", "cached_s", "speedup", "identical",
    "uncached_ttft_s", "cached_ttft_s", "uncached_tok_s", "cached_tok_s",
    "kv_cache_mib", "kv_predicted_mib", "uncached_peak_mib", "cached_peak_mib",
    "uncached_min_s", "cached_min_s", "uncached_iqr_s", "cached_iqr_s", "speedup_ci_low", "speedup_ci_high",
)  # fmt: skip
MIN_REPEAT_FOR_SPREAD = 3  # fewer runs give no meaningful IQR or interval
NEAR_TIE = 0.05  # a logit gap this small is within the rounding noise of half precision


@dataclass(frozen=True)
class Mismatch:
    """Where one run's generated tokens first left the reference run's (the first uncached one)."""

    run: int  # index into Measurement.runs
    position: int  # index among the generated tokens
    expected_id: int
    actual_id: int
    expected_token: str = ""
    actual_token: str = ""
    margin: float | None = None  # top-2 score gap of the differing run's condition at that step

    def describe(self, runs: Sequence[str]) -> str:
        text = (
            f"generated tokens differ from position {self.position}: {self.expected_token!r} "
            f"(id {self.expected_id}, first uncached run) vs {self.actual_token!r} "
            f"(id {self.actual_id}, {runs[self.run]} run)"
        )
        if self.margin is not None:
            text += f"; there the {runs[self.run]} run's top two logits were {self.margin:.4g} apart"
            if self.margin < NEAR_TIE:
                text += " (a near tie: rounding in float16/bfloat16 can flip it)"
        return text


@dataclass(frozen=True)
class StepProfile:
    """One extra, hooked run of a condition: what the headline timings cannot show.

    ``step_s[0]`` is the time to first token (prefill, measured from the ``generate`` call);
    ``step_s[i]`` the time from token ``i - 1`` to token ``i``. ``margins[i]`` is the gap
    between the two highest scores at step ``i``. ``peak_bytes`` is the peak memory during
    the run (see :class:`kvmagic.memory.PeakMemory`); ``kv_bytes`` what the returned cache held.
    """

    step_s: tuple[float, ...]
    margins: tuple[float, ...]
    generated_ids: tuple[int, ...]
    peak_bytes: int
    kv_bytes: int

    @property
    def ttft_s(self) -> float:
        return self.step_s[0]

    @property
    def tok_s(self) -> float:
        """Decode speed: tokens after the first per second of decoding (NaN for one token)."""
        decode = self.step_s[1:]
        return len(decode) / sum(decode) if decode else math.nan


def first_mismatch(reference: Sequence[int], others: Sequence[Sequence[int]]) -> tuple[int, int] | None:
    """Return ``(which, position)`` of the first token in ``others`` that differs from ``reference``."""
    for which, ids in enumerate(others):
        for position, (want, got) in enumerate(zip(reference, ids)):
            if want != got:
                return which, position
        if len(ids) != len(reference):
            return which, min(len(ids), len(reference))
    return None


@dataclass
class Measurement:
    """One configuration (prompt length, new tokens): every timed run of both conditions.

    ``runs`` names each timed run in the order it ran (``"uncached"``/``"cached"``, interleaved);
    ``seconds`` holds their times.
    """

    prompt_tokens: int
    new_tokens: int
    runs: tuple[str, ...]
    seconds: tuple[float, ...]
    generated_ids: tuple[int, ...]
    generated_text: str
    mismatch: Mismatch | None = None
    profiles: dict[str, StepProfile] = field(default_factory=dict)  # condition -> its extra hooked run
    kv_predicted_bytes: int | None = None

    def times(self, condition: str) -> list[float]:
        return [s for run, s in zip(self.runs, self.seconds) if run == condition]

    def spread(self, condition: str) -> float:
        """IQR/median of a condition's timed runs; NaN below MIN_REPEAT_FOR_SPREAD runs."""
        times = self.times(condition)
        return stats.relative_spread(times) if len(times) >= MIN_REPEAT_FOR_SPREAD else math.nan

    def iqr_s(self, condition: str) -> float:
        times = self.times(condition)
        return stats.iqr(times) if len(times) >= MIN_REPEAT_FOR_SPREAD else math.nan

    @property
    def speedup_ci(self) -> tuple[float, float]:
        """95% bootstrap interval of the speed-up over the interleaved pairs; NaNs with too few."""
        uncached, cached = self.times("uncached"), self.times("cached")
        pairs = min(len(uncached), len(cached))
        if pairs < MIN_REPEAT_FOR_SPREAD:
            return math.nan, math.nan
        return stats.bootstrap_ratio_ci(uncached[:pairs], cached[:pairs])

    def steps(self) -> pd.DataFrame:
        """Per-step seconds of each condition's hooked run, indexed by the position of the new token:
        uncached grows with position (it recomputes the whole prefix), cached stays flat."""
        import pandas as pd

        columns = {f"{name}_s": list(profile.step_s) for name, profile in self.profiles.items()}
        index = pd.RangeIndex(self.prompt_tokens, self.prompt_tokens + self.new_tokens, name="position")
        return pd.DataFrame(columns, index=index)

    def _profiled(self, condition: str, value: str, scale: float = 1.0) -> float:
        profile = self.profiles.get(condition)
        return getattr(profile, value) / scale if profile is not None else math.nan

    @property
    def uncached_s(self) -> float:
        return statistics.median(self.times("uncached"))

    @property
    def cached_s(self) -> float:
        return statistics.median(self.times("cached"))

    @property
    def speedup(self) -> float:
        """How many times faster the cached run was: a ratio of medians."""
        return self.uncached_s / self.cached_s

    @property
    def identical(self) -> bool:
        return self.mismatch is None

    def row(self) -> dict[str, Any]:
        ci_low, ci_high = self.speedup_ci
        return {
            "prompt_tokens": self.prompt_tokens,
            "new_tokens": self.new_tokens,
            "uncached_s": self.uncached_s,
            "cached_s": self.cached_s,
            "speedup": self.speedup,
            "identical": self.identical,
            "uncached_ttft_s": self._profiled("uncached", "ttft_s"),
            "cached_ttft_s": self._profiled("cached", "ttft_s"),
            "uncached_tok_s": self._profiled("uncached", "tok_s"),
            "cached_tok_s": self._profiled("cached", "tok_s"),
            "kv_cache_mib": self._profiled("cached", "kv_bytes", MIB),
            "kv_predicted_mib": math.nan if self.kv_predicted_bytes is None else self.kv_predicted_bytes / MIB,
            "uncached_peak_mib": self._profiled("uncached", "peak_bytes", MIB),
            "cached_peak_mib": self._profiled("cached", "peak_bytes", MIB),
            "uncached_min_s": min(self.times("uncached")),
            "cached_min_s": min(self.times("cached")),
            "uncached_iqr_s": self.iqr_s("uncached"),
            "cached_iqr_s": self.iqr_s("cached"),
            "speedup_ci_low": ci_low,
            "speedup_ci_high": ci_high,
        }


@dataclass
class BenchmarkResult:
    """What ``%%kvbench`` found: one :class:`Measurement` per configuration, plus metadata."""

    model: str
    measurements: list[Measurement]
    metadata: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        # A single-configuration result reads like its one measurement: result.speedup.
        if name.startswith("_") or name not in Measurement.__dataclass_fields__ and not hasattr(Measurement, name):
            raise AttributeError(name)
        if len(self.measurements) != 1:
            raise AttributeError(f"{name!r} is per measurement: this result has {len(self.measurements)}; use .measurements")
        return getattr(self.measurements[0], name)

    @property
    def identical(self) -> bool:
        return all(m.identical for m in self.measurements)

    def to_dataframe(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([m.row() for m in self.measurements], columns=list(COLUMNS))

    def notes(self) -> list[str]:
        """Plain-language remarks a reader of the table should not miss."""
        notes = []
        for m in self.measurements:
            where = f"{m.prompt_tokens}+{m.new_tokens} tokens"
            if m.mismatch is not None:
                notes.append(f"{where}: {m.mismatch.describe(m.runs)}")
            for condition in ("uncached", "cached"):
                spread = m.spread(condition)
                if spread > stats.SPREAD_WARNING:
                    notes.append(
                        f"{where}: warning: {condition} times vary (IQR is {spread:.0%} of the median, over "
                        f"{stats.SPREAD_WARNING:.0%}): close other work or raise -r before trusting the speed-up"
                    )
        return notes

    def __str__(self) -> str:
        return "\n".join([self.to_dataframe().to_string(index=False), *self.notes()])

    def __repr__(self) -> str:
        rows = ", ".join(
            f"{m.prompt_tokens}+{m.new_tokens} tokens: {m.speedup:.2f}x" for m in self.measurements
        )
        return f"<BenchmarkResult {self.model}: {rows}; identical={self.identical}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        notes = "".join(f"<p>{html.escape(note)}</p>" for note in self.notes())
        return self.to_dataframe()._repr_html_() + notes
