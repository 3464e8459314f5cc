"""Every JSON kvmagic writes is strict: a missing number is null, never a bare NaN, and reads back as NaN."""

from __future__ import annotations

import json
import math

import pytest

from kvmagic.core.spec import BenchSpec
from kvmagic.errors import KVMagicError
from kvmagic.frontends.cli import render
from kvmagic.results.compare import compare
from kvmagic.results.records import StepProfile
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.serialize import json_text

from .records import pair


def _strict(text: str) -> object:
    def refuse(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def _result(margin: float = math.nan) -> BenchmarkResult:
    profile = StepProfile(step_s=(0.5, 0.1), margins=(margin, 1.0), generated_ids=(1, 2), peak_bytes=10, kv_bytes=4)
    measurements = pair((8, 2), [2.0], [1.0], off={"profile": profile}, dynamic={"compile_s": math.inf})
    return BenchmarkResult(model="tiny", measurements=measurements, spec=BenchSpec(new_tokens=2, repeat=1))


def test_missing_numbers_are_null_and_come_back_as_nan() -> None:
    result = _result()
    assert math.isnan(result.to_dataframe()["speedup_ci_low"].iloc[0])  # one pair: no interval, a NaN cell
    text = result.to_json()
    data = _strict(text)
    assert data["measurements"][0]["profile"]["margins"] == [None, 1.0]
    assert data["measurements"][1]["compile_s"] is None
    again = BenchmarkResult.from_json(text)
    assert math.isnan(again.measurements[0].profile.margins[0])
    assert math.isnan(again.measurements[1].compile_s)
    assert again.spec == result.spec and again.to_dataframe().equals(result.to_dataframe())


def test_the_command_json_with_a_comparison_is_strict() -> None:
    shown = compare(_result(), _result(margin=0.5))
    data = _strict(render(shown, "json"))
    assert data["comparison"]["rows"][0]["speedup_ci_low"] is None  # NaN in the table, null in the file


def test_nothing_can_write_a_bare_nan() -> None:
    assert json_text({"x": [math.nan, -math.inf, 1.5]}) == '{\n "x": [\n  null,\n  null,\n  1.5\n ]\n}'
    with pytest.raises(KVMagicError, match="not JSON"):
        BenchmarkResult.from_json("{")
