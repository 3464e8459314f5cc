"""Exports and the plot of a sweep's result, on hand-made measurements (no model needed)."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from kvmagic import KVMagicError
from kvmagic.results.measurement import Measurement
from kvmagic.results.records import Mismatch, RunFacts, StepProfile
from kvmagic.results.report import COLUMNS
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.serialize import export_format

from .records import pair


def _measurement(
    new_tokens: int, uncached: float, cached: float, prompt_tokens: int = 16, **dynamic: object
) -> list[Measurement]:
    return pair((prompt_tokens, new_tokens), [uncached, uncached * 1.1], [cached, cached * 0.9], dynamic=dynamic)


def _result(partial: bool = False) -> BenchmarkResult:
    flip = Mismatch(run=0, position=3, expected_id=5, actual_id=7, expected_token="a", actual_token="b")
    measurements = [*_measurement(16, 1.0, 0.5), *_measurement(64, 8.0, 2.0, mismatch=flip),
                    *_measurement(256, 100.0, 8.0)]  # fmt: skip
    facts = RunFacts(prompt_sha256="ab" * 32, configurations=4, stopped="interrupted" if partial else "")
    return BenchmarkResult(model="tiny", measurements=measurements, metadata={"dtype": "float32"}, facts=facts)


def test_json_round_trips_everything_including_metadata(tmp_path) -> None:
    result = _result(partial=True)
    loaded = BenchmarkResult.from_json(result.to_json())
    assert loaded == result
    assert loaded.measurements[3].mismatch == result.measurements[3].mismatch
    assert loaded.partial and loaded.metadata == result.metadata and loaded.facts == result.facts
    path = tmp_path / "sweep.json"
    assert result.to_json(path) is None
    assert BenchmarkResult.read_json(path) == result
    assert json.loads(path.read_text())["facts"]["prompt_sha256"] == "ab" * 32


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
    assert [float(row[5]) for row in rows] == pytest.approx([p.speedup for p in result.pairs()], rel=1e-3)
    assert [row[6] for row in rows] == ["True", "False", "True"]
    assert lines[5] == ""
    items = [" ".join(item.split()) for item in "\n".join(lines[6:]).split("\n- ")]  # an item goes on indented
    assert items[0] == f"- {' '.join(result.notes()[0].split())}" and len(items) == len(result.notes())
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
    assert str(caught.value) == "cannot tell a format from the name 'sweep.txt': end it with .csv, .json, .md or .html"


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
    lines, pairs = _lines(times), result.pairs()
    assert lines["uncached"] == ([16, 64, 256], [p.reference.median_s for p in pairs])
    assert lines["cached"] == ([16, 64, 256], [p.other.median_s for p in pairs])
    assert _lines(speedups) == {"cached speed-up": ([16, 64, 256], [p.speedup for p in pairs])}
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    assert buffer.getvalue().startswith(b"\x89PNG")


def test_plot_groups_by_prompt_length_when_both_vary() -> None:
    measurements = [m for p in (8, 32) for n in (4, 16) for m in _measurement(n, n / 10, n / 40, prompt_tokens=p)]
    figure = BenchmarkResult(model="tiny", measurements=measurements).plot()
    assert set(_lines(figure.axes[0])) == {
        "uncached, prompt tokens 8", "cached, prompt tokens 8", "uncached, prompt tokens 32", "cached, prompt tokens 32",
    }  # fmt: skip
    assert _lines(figure.axes[1])["cached speed-up, prompt tokens 32"][0] == [4, 16]


def test_plot_uses_prompt_length_when_only_it_varies() -> None:
    measurements = [m for p in (64, 16) for m in _measurement(8, p / 10, p / 40, prompt_tokens=p)]
    figure = BenchmarkResult(model="tiny", measurements=measurements).plot()
    assert figure.axes[0].get_xlabel() == "prompt tokens"
    assert _lines(figure.axes[0])["uncached"][0] == [16, 64]  # sorted by length


def _stepped(new_tokens: int, uncached: float, uncached_steps: tuple, cached_steps: tuple) -> list[Measurement]:
    off, dynamic = ({"profile": StepProfile(steps, (), (), 0, 0)} for steps in (uncached_steps, cached_steps))
    return pair((16, new_tokens), [uncached], [0.5], off=off, dynamic=dynamic)


def test_plot_adds_per_step_latency_when_measured() -> None:
    short = _stepped(4, 1.0, (0.1,) * 4, (0.1,) * 4)
    long = _stepped(6, 2.0, (0.1, 0.2, 0.3, 0.4, 0.5, 0.6), (0.1,) * 6)
    stopped = RunFacts(stopped="interrupted")
    figure = BenchmarkResult(model="tiny", measurements=[*short, *long], facts=stopped).plot()
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
        BenchmarkResult(model="tiny", measurements=[], facts=RunFacts(stopped="interrupted")).plot()


def test_one_configuration_is_a_bar_per_strategy_each_labelled() -> None:
    result = BenchmarkResult(model="tiny", measurements=_measurement(16, 1.0, 0.25))
    times, speedups = result.plot().axes
    assert [t.get_text() for t in times.get_xticklabels()] == ["uncached", "cached"]
    assert [bar.get_height() for bar in times.patches] == [p for m in result.measurements for p in [m.median_s]]
    assert [t.get_text() for t in speedups.get_xticklabels()] == ["cached"]
    assert [bar.get_height() for bar in speedups.patches] == [result.speedup]
    assert [t.get_text() for t in speedups.texts] == [f"{result.speedup:.3g}x"]


def test_the_figure_shows_itself_in_a_notebook_with_no_matplotlib_line(shell) -> None:
    """A bare Figure has no inline formatter until pyplot is imported: `result.plot()` would print as text."""
    formats, _ = shell.display_formatter.format(_result().plot())
    assert formats["image/png"].startswith(b"\x89PNG")
