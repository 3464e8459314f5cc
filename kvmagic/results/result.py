"""What a benchmark found, as data with its statistics; how it is shown lives in the sibling modules
(:mod:`~kvmagic.results.report` rows and notes, :mod:`~kvmagic.results.serialize` files, HTML, figures)."""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvmagic.core import stats
from kvmagic.core.costmodel import CostModel
from kvmagic.core.frontier import FitCheck, FrontierRow
from kvmagic.core.intervals import speedup_interval
from kvmagic.core.limits import Hardware, Limits
from kvmagic.core.sequential import auto_interval
from kvmagic.core.spec import CACHED, UNCACHED, BenchSpec
from kvmagic.errors import KVMagicError
from kvmagic.results.frontier_table import reach_from_dict, reach_to_dict
from kvmagic.results.limits_table import bounds_from_dict, bounds_to_dict
from kvmagic.results.records import Mismatch, Prediction, StepProfile, times_of
from kvmagic.results.serialize import floats_back, seconds_back

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["MIN_REPEAT_FOR_SPREAD", "BenchmarkResult", "Measurement"]

MIN_REPEAT_FOR_SPREAD = 3  # fewer runs give no meaningful IQR or interval
JSON_FORMAT = "kvmagic-benchmark"
JSON_VERSION = 2  # 2: the request (spec), strategies and skipped reasons as fields; missing numbers as null


@dataclass
class Measurement:
    """One configuration (prompt length, new tokens, batch): every timed run of both conditions.

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
    sequential: bool = False  # the number of rounds was chosen by looking at the times (-r auto)
    ttft_s: dict[str, float] = field(default_factory=dict)  # condition -> a one-token run: time to first token
    kv_bytes: dict[str, int] = field(default_factory=dict)  # condition -> what the cache its timed run returned held
    peak_bytes: dict[str, int] = field(default_factory=dict)  # condition -> peak memory over its timed runs
    kv_position_bytes: int | None = None  # what one cached position takes in full precision (from the config)
    peak_source: str = ""  # where peak_bytes comes from (see kvmagic.measure.accelerator.PeakMemory.source)
    batch: int = 1  # sequences per generate, all from the same prompt: times, KV bytes and peaks are the batch's

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
        """95% interval of the true speed-up, from the per-pair speed-ups (see :mod:`kvmagic.core.intervals`);
        after ``-r auto``, the anytime interval that holds whenever the loop stopped. NaNs below
        MIN_REPEAT_FOR_SPREAD pairs."""
        uncached, cached = self.times(UNCACHED), self.times(CACHED)
        pairs = min(len(uncached), len(cached))
        if pairs < MIN_REPEAT_FOR_SPREAD:
            return math.nan, math.nan
        interval = (auto_interval if self.sequential else speedup_interval)(uncached[:pairs], cached[:pairs])
        return interval if interval is not None else (math.nan, math.nan)

    def steps(self) -> pd.DataFrame:
        """Per-step seconds of each condition's hooked run, indexed by the position of the new token:
        uncached grows with position (it recomputes the whole prefix), cached stays flat."""
        import pandas as pd

        columns = {f"{name}_s": list(profile.step_s) for name, profile in self.profiles.items()}
        index = pd.RangeIndex(self.prompt_tokens, self.prompt_tokens + self.new_tokens, name="position")
        return pd.DataFrame(columns, index=index)

    def decode_tok_s(self, condition: str) -> float:
        """Tokens after the first per second of decoding, over every sequence of the batch: the median timed run
        less the time to first token."""
        decoding = statistics.median(self.times(condition)) - self.ttft_s.get(condition, math.nan)
        return self.batch * (self.new_tokens - 1) / decoding if self.new_tokens > 1 and decoding > 0 else math.nan

    @property
    def uncached_s(self) -> float:
        return statistics.median(self.times(UNCACHED))

    @property
    def cached_s(self) -> float:
        return statistics.median(self.times(CACHED))

    @property
    def speedup(self) -> float:
        """How many times faster the cached run was: a ratio of medians."""
        return self.uncached_s / self.cached_s

    @property
    def identical(self) -> bool:
        return self.mismatch is None


@dataclass
class BenchmarkResult:
    """What ``%%kvbench`` found: one :class:`Measurement` per configuration, the request, and metadata.

    ``metadata`` records how it was measured (environment, prompt hash, the request's settings).
    With ``predict``, ``predictions`` holds the cost model's figures for every configuration,
    including those left unmeasured because measuring them would break the time budget. In a cache
    comparison, ``strategies`` names the conditions compared, in order, and ``skipped`` why some
    could not run here; both are empty for the plain off/on run.
    """

    model: str
    measurements: list[Measurement]
    metadata: dict[str, Any] = field(default_factory=dict)
    partial: bool = False  # a sweep interrupted before its last configuration: the rows here are complete
    predictions: list[Prediction] = field(default_factory=list)
    cost_model: CostModel | None = None
    spec: BenchSpec = field(default_factory=BenchSpec)
    strategies: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    hardware: Hardware | None = None  # with ``limits``: what the device reached in its probes
    limits: list[Limits] = field(default_factory=list)  # with ``limits``: each configuration's bound
    frontier: list[FrontierRow] = field(default_factory=list)  # with ``frontier``: each strategy's reach
    frontier_checks: list[FitCheck] = field(default_factory=list)  # with ``frontier="check"``: runs at it

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

    def to_dataframe(self) -> pd.DataFrame:
        from kvmagic.results.report import table

        return table(self)

    def notes(self) -> list[str]:
        """Plain-language remarks a reader of the table should not miss."""
        from kvmagic.results.report import notes

        return notes(self)

    def __str__(self) -> str:
        """The shown table (``to_dataframe()`` has every column) and the notes."""
        from kvmagic.results.shown import shown_text

        return shown_text(self.to_dataframe(), self.notes())

    def __repr__(self) -> str:
        if self.strategies:
            rows = f"{len(self.measurements)} configurations x strategies {', '.join(self.strategies)}"
        else:
            rows = ", ".join(
                f"{m.prompt_tokens}+{m.new_tokens}{f'x{m.batch}' if m.batch > 1 else ''} tokens: {m.speedup:.2f}x"
                for m in self.measurements
            )
        partial = "; partial" if self.partial else ""
        return f"<BenchmarkResult {self.model}: {rows}; identical={self.identical}{partial}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        from kvmagic.results.display import to_html

        return to_html(self.to_dataframe(), {"model": self.model, **self.metadata}, self.notes())

    def plot(self) -> Figure:
        """Time and speed-up against length, and per-step latency when measured; ``.savefig(path)`` saves it."""
        from kvmagic.results.plot import plot_result

        return plot_result(self)

    def to_dict(self) -> dict[str, Any]:
        """Everything measured, the request and the metadata: what :meth:`from_dict` reads back."""
        return {
            "format": JSON_FORMAT,
            "version": JSON_VERSION,
            "model": self.model,
            "partial": self.partial,
            "spec": self.spec.to_dict(),
            "strategies": list(self.strategies),
            "skipped": self.skipped,
            "metadata": self.metadata,
            "measurements": [dataclasses.asdict(m) for m in self.measurements],
            "predictions": [dataclasses.asdict(p) for p in self.predictions],
            "cost_model": None if self.cost_model is None else self.cost_model.to_dict(),
            **bounds_to_dict(self.hardware, self.limits),
            **reach_to_dict(self.frontier, self.frontier_checks),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchmarkResult:
        if not isinstance(data, dict) or data.get("format") != JSON_FORMAT:
            raise KVMagicError("this is not a kvmagic benchmark: save one with {save} (a .json name)", "save")
        if data.get("version", 0) > JSON_VERSION:
            raise KVMagicError(
                f"this benchmark was saved by a newer kvmagic (format {data['version']}): upgrade kvmagic"
            )
        metadata = dict(data.get("metadata", {}))
        # Format 1 kept the comparison's strategies and reasons in the metadata.
        strategies = data.get("strategies", metadata.pop("strategies", ()))
        skipped = data.get("skipped", metadata.pop("skipped", {}))
        metadata.pop("compiled", None)
        return cls(
            model=data["model"],
            measurements=[_measurement_from_dict(m) for m in data["measurements"]],
            metadata=metadata,
            partial=bool(data.get("partial", False)),
            predictions=[Prediction(**seconds_back(p)) for p in data.get("predictions", [])],
            cost_model=None if data.get("cost_model") is None else CostModel.from_dict(data["cost_model"]),
            spec=BenchSpec.from_dict(data.get("spec") or {}),
            strategies=list(strategies),
            skipped=dict(skipped),
            **bounds_from_dict(data),
            **reach_from_dict(data),
        )

    def to_json(self, path: str | Path | None = None) -> str | None:
        """The whole result as strict JSON (times, ids, request, metadata); the text when no ``path`` is given."""
        from kvmagic.results.serialize import json_text, write_text

        return write_text(json_text(self.to_dict()), path)

    @classmethod
    def from_json(cls, text: str) -> BenchmarkResult:
        from kvmagic.results.serialize import parse_json

        return cls.from_dict(parse_json(text))

    @classmethod
    def read_json(cls, path: str | Path) -> BenchmarkResult:
        """Load what ``to_json(path)`` or ``save(path)`` wrote."""
        from kvmagic.results.serialize import read_text

        return cls.from_json(read_text(path))

    def to_csv(self, path: str | Path | None = None) -> str | None:
        """The table as CSV (no metadata: use to_json to keep everything)."""
        from kvmagic.results.serialize import write_text

        return write_text(self.to_dataframe().to_csv(index=False), path)

    def to_markdown(self, path: str | Path | None = None) -> str | None:
        """The table as a Markdown pipe table, followed by the notes."""
        from kvmagic.results.serialize import markdown_table, write_text

        return write_text(markdown_table(self.to_dataframe(), self.notes()), path)

    def save(self, path: str | Path) -> None:
        """Write the format the suffix names: .csv, .json or .md."""
        from kvmagic.results.serialize import export_format

        getattr(self, f"to_{export_format(path)}")(path)


def _measurement_from_dict(data: dict[str, Any]) -> Measurement:
    names = {f.name for f in dataclasses.fields(Measurement)}
    values = {k: floats_back(v) for k, v in data.items() if k in names}
    if values.get("mismatch") is not None:
        values["mismatch"] = Mismatch(**values["mismatch"])
    values["mismatches"] = {name: Mismatch(**m) for name, m in values.get("mismatches", {}).items()}
    values["profiles"] = {
        condition: StepProfile(**{k: floats_back(v) for k, v in profile.items()})
        for condition, profile in values.get("profiles", {}).items()
    }
    values["compile_s"] = {k: math.nan if v is None else v for k, v in values.get("compile_s", {}).items()}
    try:
        return Measurement(**values)
    except TypeError as error:
        raise KVMagicError(f"this kvmagic benchmark is incomplete: {error}") from None
