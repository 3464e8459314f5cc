"""Exports and the plot of a sweep's result, on hand-made measurements (no model needed)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

import pandas as pd
import pytest

from kvmagic import KVMagicError
from kvmagic.results.records import Mismatch
from kvmagic.results.report import COLUMNS
from kvmagic.results.result import BenchmarkResult, Measurement
from kvmagic.results.serialize import export_format


def _measurement(new_tokens: int, uncached: float, cached: float, prompt_tokens: int = 16) -> Measurement:
    return Measurement(
        prompt_tokens=prompt_tokens,
        new_tokens=new_tokens,
        runs=("uncached", "cached", "uncached", "cached"),
        seconds=(uncached, cached, uncached * 1.1, cached * 0.9),
        generated_ids=tuple(range(new_tokens)),
        generated_text="x" * new_tokens,
    )


def _result(**kwargs: object) -> BenchmarkResult:
    measurements = [_measurement(16, 1.0, 0.5), _measurement(64, 8.0, 2.0), _measurement(256, 100.0, 8.0)]
    measurements[1].mismatch = Mismatch(
        run=2, position=3, expected_id=5, actual_id=7, expected_token="a", actual_token="b"
    )
    metadata = {"prompt_sha256": "ab" * 32, "chat": False, "repeat": 2, "configurations": 4}
    return BenchmarkResult(model="tiny", measurements=measurements, metadata=metadata, **kwargs)


def test_json_round_trips_everything_including_metadata(tmp_path) -> None:
    result = _result(partial=True)
    loaded = BenchmarkResult.from_json(result.to_json())
    assert loaded == result
    assert loaded.measurements[1].mismatch == result.measurements[1].mismatch
    assert loaded.partial and loaded.metadata == result.metadata
    path = tmp_path / "sweep.json"
    assert result.to_json(path) is None
    assert BenchmarkResult.read_json(path) == result
    assert json.loads(path.read_text())["metadata"]["prompt_sha256"] == "ab" * 32


def test_from_json_refuses_what_is_not_a_benchmark(tmp_path) -> None:
    with pytest.raises(
        KVMagicError, match=r"^this is not a kvmagic benchmark: save one with result\.save\(PATH\) \(a \.json name\)$"
    ):
        BenchmarkResult.from_json('{"rows": []}')
    with pytest.raises(KVMagicError, match=r"^this is not a kvmagic benchmark \(not JSON: "):
        BenchmarkResult.from_json("prompt_tokens,new_tokens\n")
    with pytest.raises(KVMagicError, match=r"^cannot read '.*missing.json': "):
        BenchmarkResult.read_json(tmp_path / "missing.json")


def test_csv_round_trips_the_table(tmp_path) -> None:
    result = _result()
    frame = pd.read_csv(io.StringIO(result.to_csv()))
    pd.testing.assert_frame_equal(frame, result.to_dataframe())
    result.save(tmp_path / "sweep.csv")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "sweep.csv"), result.to_dataframe())


def test_markdown_is_a_pipe_table_with_the_notes(tmp_path) -> None:
    result = _result(partial=True)
    text = result.to_markdown()
    lines = text.splitlines()
    assert lines[0] == "| " + " | ".join(COLUMNS) + " |"
    assert lines[1].startswith("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")  # numbers right, identical left
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:5]]
    assert [row[1] for row in rows] == ["16", "64", "256"]
    assert [row[2] for row in rows] == ["1", "1", "1"]  # the batch
    assert [float(row[5]) for row in rows] == pytest.approx([m.speedup for m in result.measurements], rel=1e-3)
    assert [row[6] for row in rows] == ["True", "False", "True"]
    assert lines[5] == ""
    assert lines[6] == f"- {result.notes()[0]}"
    assert result.notes()[0].startswith("partial: interrupted after 3 of 4 configurations")
    result.save(tmp_path / "sweep.md")
    assert (tmp_path / "sweep.md").read_text() == text


@pytest.mark.parametrize(
    ("name", "kind"), [("a.csv", "csv"), ("a.JSON", "json"), ("a.md", "markdown"), ("a.markdown", "markdown")]
)
def test_export_format_follows_the_suffix(name: str, kind: str) -> None:
    assert export_format(name) == kind


def test_export_format_refuses_an_unknown_suffix() -> None:
    with pytest.raises(KVMagicError) as caught:
        export_format("sweep.txt")
    assert str(caught.value) == "cannot tell a format from the name 'sweep.txt': end it with .csv, .json or .md"


def test_repr_marks_a_partial_result() -> None:
    assert repr(_result(partial=True)).endswith("identical=False; partial>")
    assert "partial" not in repr(_result())


def _lines(axis) -> dict[str, tuple[list, list]]:
    return {
        line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
        for line in axis.get_lines()
        if not line.get_label().startswith("_")
    }


def test_plot_draws_time_and_speedup_against_generated_length() -> None:
    result = _result()
    figure = result.plot()
    assert len(figure.axes) == 2
    times, speedups = figure.axes
    assert times.get_xlabel() == speedups.get_xlabel() == "new tokens"
    assert times.get_ylabel() == "seconds"
    lines = _lines(times)
    assert lines["uncached"] == ([16, 64, 256], [m.uncached_s for m in result.measurements])
    assert lines["cached"] == ([16, 64, 256], [m.cached_s for m in result.measurements])
    assert _lines(speedups) == {"speed-up": ([16, 64, 256], [m.speedup for m in result.measurements])}
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    assert buffer.getvalue().startswith(b"\x89PNG")


def test_plot_groups_by_prompt_length_when_both_vary() -> None:
    measurements = [_measurement(n, n / 10, n / 40, prompt_tokens=p) for p in (8, 32) for n in (4, 16)]
    figure = BenchmarkResult(model="tiny", measurements=measurements).plot()
    assert set(_lines(figure.axes[0])) == {
        "uncached, prompt tokens 8", "cached, prompt tokens 8", "uncached, prompt tokens 32", "cached, prompt tokens 32",
    }  # fmt: skip
    assert _lines(figure.axes[1])["speed-up, prompt tokens 32"][0] == [4, 16]


def test_plot_uses_prompt_length_when_only_it_varies() -> None:
    measurements = [_measurement(8, p / 10, p / 40, prompt_tokens=p) for p in (64, 16)]
    figure = BenchmarkResult(model="tiny", measurements=measurements).plot()
    assert figure.axes[0].get_xlabel() == "prompt tokens"
    assert _lines(figure.axes[0])["uncached"][0] == [16, 64]  # sorted by length


@dataclass
class _Stepped(Measurement):
    uncached_step_s: tuple[float, ...] = ()
    cached_step_s: tuple[float, ...] = ()


def test_plot_adds_per_step_latency_when_measured() -> None:
    short = _Stepped(**vars(_measurement(4, 1.0, 0.5)), uncached_step_s=(0.1,) * 4, cached_step_s=(0.1,) * 4)
    long = _Stepped(
        **vars(_measurement(6, 2.0, 0.5)), uncached_step_s=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6), cached_step_s=(0.1,) * 6
    )
    figure = BenchmarkResult(model="tiny", measurements=[short, long], partial=True).plot()
    assert len(figure.axes) == 3
    steps = figure.axes[2]
    assert steps.get_xlabel() == "position (tokens in context)"
    assert steps.get_ylabel() == "ms per token"
    lines = _lines(steps)
    assert lines["uncached"][0] == list(range(16, 22))  # the longest configuration, from the prompt's end
    assert lines["uncached"][1] == pytest.approx([100, 200, 300, 400, 500, 600])
    assert lines["cached"][1] == pytest.approx([100] * 6)
    assert [text.get_text() for text in figure.texts][-1].endswith("(partial)")  # the suptitle (3.7 has no getter)


def test_plot_refuses_an_empty_result() -> None:
    with pytest.raises(KVMagicError, match=r"^nothing to plot: the benchmark finished no configuration$"):
        BenchmarkResult(model="tiny", measurements=[], partial=True).plot()
