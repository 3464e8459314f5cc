"""What a benchmark found, kept apart from how it was measured and how it is shown."""

from __future__ import annotations

import html
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLUMNS", "BenchmarkResult", "Measurement", "Mismatch", "first_mismatch"]

COLUMNS = ("prompt_tokens", "new_tokens", "uncached_s", "cached_s", "speedup", "identical")


@dataclass(frozen=True)
class Mismatch:
    """Where one run's generated tokens first left the reference run's (the first uncached one)."""

    run: int  # index into Measurement.runs
    position: int  # index among the generated tokens
    expected_id: int
    actual_id: int
    expected_token: str = ""
    actual_token: str = ""

    def describe(self, runs: Sequence[str]) -> str:
        return (
            f"generated tokens differ from position {self.position}: {self.expected_token!r} "
            f"(id {self.expected_id}, first uncached run) vs {self.actual_token!r} "
            f"(id {self.actual_id}, {runs[self.run]} run)"
        )


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

    def times(self, condition: str) -> list[float]:
        return [s for run, s in zip(self.runs, self.seconds) if run == condition]

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
        return {
            "prompt_tokens": self.prompt_tokens,
            "new_tokens": self.new_tokens,
            "uncached_s": self.uncached_s,
            "cached_s": self.cached_s,
            "speedup": self.speedup,
            "identical": self.identical,
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
        return [
            f"{m.prompt_tokens}+{m.new_tokens} tokens: {m.mismatch.describe(m.runs)}"
            for m in self.measurements
            if m.mismatch is not None
        ]

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
