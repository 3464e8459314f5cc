"""What a benchmark found, kept apart from how it was measured and how it is shown."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvmagic.core import stats
from kvmagic.core.costmodel import CostModel
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = [
    "COLUMNS",
    "EXPORTS",
    "MIB",
    "MIN_REPEAT_FOR_SPREAD",
    "NEAR_TIE",
    "PREDICTED_COLUMNS",
    "STRATEGY_COLUMNS",
    "BenchmarkResult",
    "Measurement",
    "Mismatch",
    "Prediction",
    "StepProfile",
    "export_format",
    "first_mismatch",
    "markdown_table",
    "times_of",
]

COLUMNS = (
    "prompt_tokens", "new_tokens", "uncached_s", "cached_s", "speedup", "identical",
    "uncached_ttft_s", "cached_ttft_s", "uncached_tok_s", "cached_tok_s",
    "kv_cache_mib", "kv_predicted_mib", "uncached_peak_mib", "cached_peak_mib",
    "uncached_min_s", "cached_min_s", "uncached_iqr_s", "cached_iqr_s", "speedup_ci_low", "speedup_ci_high",
)  # fmt: skip
PREDICTED_COLUMNS = ("predicted_uncached_s", "predicted_cached_s", "predicted_speedup", "measured")
# With --cache: one row per (prompt_tokens, new_tokens, strategy), each strategy against the "off" runs.
STRATEGY_COLUMNS = (
    "prompt_tokens", "new_tokens", "strategy", "seconds", "tok_s", "speedup", "identical", "first_mismatch",
    "kv_cache_mib", "peak_mib", "compile_s", "note",
)  # fmt: skip
MIN_REPEAT_FOR_SPREAD = 3  # fewer runs give no meaningful IQR or interval
MIB = 2**20
NEAR_TIE = 0.05  # a logit gap this small is within the rounding noise of half precision
EXPORTS = {".csv": "csv", ".json": "json", ".md": "markdown", ".markdown": "markdown"}  # suffix -> format
JSON_FORMAT = "kvmagic-benchmark"
JSON_VERSION = 1


def export_format(path: str | Path) -> str:
    """The format a file name asks for, checked before a long benchmark rather than after it."""
    kind = EXPORTS.get(Path(path).suffix.lower())
    if kind is None:
        raise KVMagicError(f"cannot tell a format from the name {str(path)!r}: end it with .csv, .json or .md")
    return kind


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

    def short(self) -> str:
        """Where, and which tokens, for a table cell."""
        expected = f"{self.expected_token!r} (id {self.expected_id})"
        return f"{self.position}: {expected} vs {self.actual_token!r} (id {self.actual_id})"

    def describe(self, runs: Sequence[str]) -> str:
        text = (
            f"generated tokens differ from position {self.position}: {self.expected_token!r} "
            f"(id {self.expected_id}, first {runs[0]} run) vs {self.actual_token!r} "
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


def times_of(runs: Sequence[str], seconds: Sequence[float], condition: str) -> list[float]:
    """The seconds of ``condition``'s runs, in order, from the interleaved record of a measurement."""
    return [s for run, s in zip(runs, seconds) if run == condition]


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
    mismatches: dict[str, Mismatch] = field(default_factory=dict)  # condition -> where it left the first run
    compile_s: dict[str, float] = field(default_factory=dict)  # compiled condition -> its first call's extra

    def times(self, condition: str) -> list[float]:
        return times_of(self.runs, self.seconds, condition)

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

    def strategy_row(self, name: str, note: str = "") -> dict[str, Any]:
        """One strategy's line of the --cache table; a strategy with no runs here is its ``note`` alone."""
        row: dict[str, Any] = {"prompt_tokens": self.prompt_tokens, "new_tokens": self.new_tokens, "strategy": name}
        times, reference = self.times(name), self.times(self.runs[0])
        if not times:
            empty = dict.fromkeys(STRATEGY_COLUMNS[3:], math.nan)
            return {**row, **empty, "identical": None, "first_mismatch": "", "note": note}
        mismatch = self.mismatches.get(name)
        return {
            **row,
            "seconds": statistics.median(times),
            "tok_s": self._profiled(name, "tok_s"),
            "speedup": statistics.median(reference) / statistics.median(times),
            "identical": mismatch is None,
            "first_mismatch": "" if mismatch is None else mismatch.short(),
            "kv_cache_mib": self._profiled(name, "kv_bytes", MIB),
            "peak_mib": self._profiled(name, "peak_bytes", MIB),
            "compile_s": self.compile_s.get(name, math.nan),
            "note": "",
        }

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


@dataclass(frozen=True)
class Prediction:
    """What the cost model expects of one configuration, measured or not (``--predict``)."""

    prompt_tokens: int
    new_tokens: int
    uncached_s: float
    cached_s: float
    kv_bytes: int | None = None  # the cache at its longest, predicted from the config

    @property
    def speedup(self) -> float:
        return self.uncached_s / self.cached_s if self.cached_s > 0 else math.nan


@dataclass
class BenchmarkResult:
    """What ``%%kvbench`` found: one :class:`Measurement` per configuration, plus metadata.

    With ``--predict``, ``predictions`` holds the cost model's figures for every configuration,
    including those left unmeasured because measuring them would break the time budget.
    """

    model: str
    measurements: list[Measurement]
    metadata: dict[str, Any] = field(default_factory=dict)
    partial: bool = False  # a sweep interrupted before its last configuration: the rows here are complete
    predictions: list[Prediction] = field(default_factory=list)
    cost_model: CostModel | None = None

    def __getattr__(self, name: str) -> Any:
        # A single-configuration result reads like its one measurement: result.speedup.
        if name.startswith("_") or (name not in Measurement.__dataclass_fields__ and not hasattr(Measurement, name)):
            raise AttributeError(name)
        if len(self.measurements) != 1:
            raise AttributeError(
                f"{name!r} is per measurement: this result has {len(self.measurements)}; use .measurements"
            )
        return getattr(self.measurements[0], name)

    @property
    def identical(self) -> bool:
        return all(m.identical for m in self.measurements)

    @property
    def strategies(self) -> list[str]:
        """The --cache strategies compared, in order; empty for the plain two-condition run."""
        return list(self.metadata.get("strategies", ()))

    def to_dataframe(self) -> pd.DataFrame:
        import pandas as pd

        if self.strategies:
            skipped = self.metadata.get("skipped", {})
            rows = [m.strategy_row(name, skipped.get(name, "")) for m in self.measurements for name in self.strategies]
            return pd.DataFrame(rows, columns=list(STRATEGY_COLUMNS))
        if not self.predictions:
            return pd.DataFrame([m.row() for m in self.measurements], columns=list(COLUMNS))
        measured = {(m.prompt_tokens, m.new_tokens): m for m in self.measurements}
        rows = []
        for p in self.predictions:
            found = measured.get((p.prompt_tokens, p.new_tokens))
            row = found.row() if found is not None else {"prompt_tokens": p.prompt_tokens, "new_tokens": p.new_tokens}
            row.update(zip(PREDICTED_COLUMNS, (p.uncached_s, p.cached_s, p.speedup, found is not None)))
            rows.append(row)
        return pd.DataFrame(rows, columns=[*COLUMNS, *PREDICTED_COLUMNS])

    def notes(self) -> list[str]:
        """Plain-language remarks a reader of the table should not miss."""
        notes = [*self._sweep_notes(), *self._prediction_notes(), *self._auto_repeat_notes()]
        if self.metadata.get("profile") is False:
            notes.append("--no-profile: no hooked runs, so time to first token, tokens/s, KV cache and peak memory "
                         "were not measured")  # fmt: skip
        for m in self.measurements:
            where = f"{m.prompt_tokens}+{m.new_tokens} tokens"
            if m.mismatch is not None and not self.strategies:  # with --cache, first_mismatch says it per strategy
                notes.append(f"{where}: {m.mismatch.describe(m.runs)}")
            for condition in dict.fromkeys(m.runs):
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
        if self.strategies:
            rows = f"{len(self.measurements)} configurations x strategies {', '.join(self.strategies)}"
        else:
            rows = ", ".join(f"{m.prompt_tokens}+{m.new_tokens} tokens: {m.speedup:.2f}x" for m in self.measurements)
        partial = "; partial" if self.partial else ""
        return f"<BenchmarkResult {self.model}: {rows}; identical={self.identical}{partial}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        from kvmagic.results.display import to_html

        return to_html(self.to_dataframe(), {"model": self.model, **self.metadata}, self.notes())

    def _sweep_notes(self) -> list[str]:
        notes = []
        if self.partial:
            planned = self.metadata.get("configurations", "?")
            notes.append(
                f"partial: interrupted after {len(self.measurements)} of {planned} configurations; "
                "the rows shown are complete, the rest were not measured"
            )
        natural = self.metadata.get("natural_prompt_tokens")
        if self.metadata.get("prompt_stretched") and natural:
            lengths = ", ".join(str(n) for n in dict.fromkeys(m.prompt_tokens for m in self.measurements))
            notes.append(f"prompt stretched: the cell's {natural} tokens repeated (or cut) to {lengths} tokens")
        return notes

    def _prediction_notes(self) -> list[str]:
        if not self.predictions or self.cost_model is None:
            return []
        notes = []
        measured = {(m.prompt_tokens, m.new_tokens) for m in self.measurements}
        skipped = [p for p in self.predictions if (p.prompt_tokens, p.new_tokens) not in measured]
        if skipped and not self.partial:
            where = ", ".join(f"{p.prompt_tokens}+{p.new_tokens}" for p in skipped)
            budget = self.metadata.get("max_seconds", 0)
            notes.append(f"predicted only (measured=False): {where} tokens; measuring them would pass the {budget:g} s "
                         "budget (--max-seconds)")  # fmt: skip
        largest = max(self.predictions, key=lambda p: p.prompt_tokens + p.new_tokens)
        notes += self.cost_model.explain(largest.prompt_tokens, largest.new_tokens, kv_bytes=largest.kv_bytes,
                                         weight_bytes=self.metadata.get("weight_bytes"))  # fmt: skip
        return notes

    def _auto_repeat_notes(self) -> list[str]:
        if self.metadata.get("repeat") != "auto":
            return []
        target, cap = self.metadata["ci_target"], self.metadata["auto_cap"]
        notes = []
        for m in self.measurements:
            low, high = m.speedup_ci
            width = stats.relative_half_width(m.speedup, low, high)
            verdict = (
                f"within the ±{target:.0%} target" if width <= target else f"the {cap:g} s cap (--auto-cap) came first"
            )
            notes.append(f"-r auto: {m.prompt_tokens}+{m.new_tokens} tokens took {len(m.times('cached'))} pairs; "
                         f"95% interval {low:.3g}-{high:.3g}x is ±{width:.1%} of {m.speedup:.3g}x: {verdict}")  # fmt: skip
        return notes

    def plot(self) -> Figure:
        """Time and speed-up against length, and per-step latency when measured; ``.savefig(path)`` saves it."""
        from kvmagic.results.plot import plot_result

        return plot_result(self)

    def to_dict(self) -> dict[str, Any]:
        """Everything measured, plus the metadata: what :meth:`from_dict` reads back."""
        return {
            "format": JSON_FORMAT,
            "version": JSON_VERSION,
            "model": self.model,
            "partial": self.partial,
            "metadata": self.metadata,
            "measurements": [dataclasses.asdict(m) for m in self.measurements],
            "predictions": [dataclasses.asdict(p) for p in self.predictions],
            "cost_model": None if self.cost_model is None else self.cost_model.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchmarkResult:
        if not isinstance(data, dict) or data.get("format") != JSON_FORMAT:
            raise KVMagicError("this is not a kvmagic benchmark: save one with `%%kvbench --save NAME.json`")
        if data.get("version", 0) > JSON_VERSION:
            raise KVMagicError(
                f"this benchmark was saved by a newer kvmagic (format {data['version']}): upgrade kvmagic"
            )
        return cls(
            model=data["model"],
            measurements=[_measurement_from_dict(m) for m in data["measurements"]],
            metadata=dict(data.get("metadata", {})),
            partial=bool(data.get("partial", False)),
            predictions=[Prediction(**p) for p in data.get("predictions", [])],
            cost_model=None if data.get("cost_model") is None else CostModel.from_dict(data["cost_model"]),
        )

    def to_json(self, path: str | Path | None = None) -> str | None:
        """The whole result as JSON (times, ids, metadata); returns the text when no ``path`` is given."""
        text = json.dumps(self.to_dict(), indent=1, ensure_ascii=False, default=str)
        return _write(text, path)

    @classmethod
    def from_json(cls, text: str) -> BenchmarkResult:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise KVMagicError(f"this is not a kvmagic benchmark (not JSON: {error})") from None
        return cls.from_dict(data)

    @classmethod
    def read_json(cls, path: str | Path) -> BenchmarkResult:
        """Load what ``to_json(path)`` or ``%%kvbench --save NAME.json`` wrote."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise KVMagicError(f"cannot read {str(path)!r}: {error.strerror or error}") from None
        return cls.from_json(text)

    def to_csv(self, path: str | Path | None = None) -> str | None:
        """The table as CSV (no metadata: use to_json to keep everything)."""
        return _write(self.to_dataframe().to_csv(index=False), path)

    def to_markdown(self, path: str | Path | None = None) -> str | None:
        """The table as a Markdown pipe table, followed by the notes."""
        return _write(markdown_table(self.to_dataframe(), self.notes()), path)

    def save(self, path: str | Path) -> None:
        """Write the format the suffix names: .csv, .json or .md."""
        kind = export_format(path)
        getattr(self, f"to_{kind}")(path)


def markdown_table(frame: pd.DataFrame, notes: Sequence[str] = ()) -> str:
    """A DataFrame as a Markdown pipe table (numbers right-aligned), followed by the notes as a list."""
    lines = [
        "| " + " | ".join(frame.columns) + " |",
        "| " + " | ".join("---:" if frame[c].dtype.kind in "iuf" else "---" for c in frame.columns) + " |",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines) + ("\n\n" + "\n".join(f"- {n}" for n in notes) if notes else "") + "\n"


def _measurement_from_dict(data: dict[str, Any]) -> Measurement:
    names = {f.name for f in dataclasses.fields(Measurement)}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in names}
    if values.get("mismatch") is not None:
        values["mismatch"] = Mismatch(**values["mismatch"])
    values["mismatches"] = {name: Mismatch(**m) for name, m in values.get("mismatches", {}).items()}
    values["profiles"] = {
        condition: StepProfile(**{k: tuple(v) if isinstance(v, list) else v for k, v in profile.items()})
        for condition, profile in values.get("profiles", {}).items()
    }
    try:
        return Measurement(**values)
    except TypeError as error:
        raise KVMagicError(f"this kvmagic benchmark is incomplete: {error}") from None


def _cell(value: Any) -> str:
    if isinstance(value, float) and not isinstance(value, bool):
        return "" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def _write(text: str, path: str | Path | None) -> str | None:
    if path is None:
        return text
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as error:
        raise KVMagicError(f"cannot write {str(path)!r}: {error.strerror or error}") from None
    return None
