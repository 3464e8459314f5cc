"""Every JSON kvmagic writes is strict: a missing number is null, never a bare NaN, and reads back as NaN."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from kvmagic.addons.baseline.compare import compare
from kvmagic.core.spec import BenchSpec
from kvmagic.errors import KVMagicError
from kvmagic.frontends.cli import render
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


def test_a_markdown_table_aligns_numbers_right_and_leaves_missing_ones_blank():
    import pandas as pd

    from kvmagic.results.serialize import markdown_table

    frame = pd.DataFrame({"n": [16, 2048], "s": [0.123456, math.nan], "ok": [True, False], "name": ["a", "b"]})
    assert markdown_table(frame) == (
        "| n | s | ok | name |\n| ---: | ---: | --- | --- |\n| 16 | 0.1235 | True | a |\n| 2048 |  | False | b |\n"
    )
    assert markdown_table(frame.head(1), ["one", "two"]).endswith("| 16 | 0.1235 | True | a |\n\n- one\n- two\n")
    long = "uncached took 0.05951 s at 82+4 tokens, less than 0.08233 s at 82+2 tokens with less work: " * 2
    items = markdown_table(frame.head(1), [long.strip(), "two"]).split("\n\n")[1].splitlines()
    assert max(map(len, items)) <= 100 and items[0].startswith("- uncached") and items[-1] == "- two"
    assert (
        all(line.startswith("  ") for line in items[1:-1])
        and " ".join(map(str.strip, items[:-1])) == f"- {long}".strip()
    )
    path, quoted = "/models/" + "x" * 100, "a" * 97 + " > the same token, 12. or - here"
    path_item, quoted_item = markdown_table(frame.head(1), [f"{path} ran", quoted]).split("\n\n")[1].split("\n- ")
    assert path_item.splitlines()[0] == f"- {path}"  # a word longer than a line stays on its bullet's line
    assert quoted_item.splitlines()[1] == "  \\> the same token, 12. or - here"  # not a quote: escaped, as written


def test_a_short_markdown_table_is_the_shown_one_and_save_writes_what_the_suffix_names(tmp_path):
    result = _result()
    short = result.to_markdown(short=True)
    assert short.splitlines()[0] != result.to_markdown().splitlines()[0]  # the shown columns, not every one
    assert short.splitlines()[0].startswith("| prompt_tokens | new_tokens |")
    result.save(tmp_path / "run.JSON")
    assert BenchmarkResult.read_json(tmp_path / "run.JSON").spec == result.spec
    assert result.to_json(tmp_path / "again.json") is None and (tmp_path / "again.json").read_text() == result.to_json()


def test_files_that_cannot_be_written_or_read_are_named_before_and_after_a_run(tmp_path):
    from kvmagic.results.serialize import read_text, writable, write_text

    folder = tmp_path / "runs"
    folder.mkdir()
    with pytest.raises(KVMagicError) as raised:
        writable(folder)
    assert str(raised.value) == (
        f"cannot write {str(folder)!r}: it is a folder; name a file in it, e.g. {str(folder / 'run.json')!r}"
    )
    with pytest.raises(KVMagicError) as raised:
        writable(tmp_path / "none" / "run.json")
    assert str(raised.value) == (
        f"cannot write {str(tmp_path / 'none' / 'run.json')!r}: there is no folder {str(tmp_path / 'none')!r}; "
        "create it or name another"
    )
    writable(folder / "run.json")  # a new file in a folder that is there
    with pytest.raises(KVMagicError) as raised:
        write_text("x", folder)
    assert str(raised.value) == f"cannot write {str(folder)!r}: Is a directory"  # the reason, not the whole error
    with pytest.raises(KVMagicError) as raised:
        read_text(folder / "missing.json")
    assert str(raised.value) == f"cannot read {str(folder / 'missing.json')!r}: No such file or directory"
    assert write_text("é ✓", folder / "t.txt") is None and (folder / "t.txt").read_bytes() == "é ✓".encode()
    assert read_text(folder / "t.txt") == "é ✓"


def test_json_keeps_text_as_written_and_numbers_missing_only_where_they_were():
    from pathlib import Path

    from kvmagic.results.serialize import floats_back, parse_json, seconds_back

    assert json_text({"text": "é", "path": Path("a/b"), "t": (1, math.inf), "flag": True}) == (
        '{\n "text": "é",\n "path": "a/b",\n "t": [\n  1,\n  null\n ],\n "flag": true\n}'
    )
    assert seconds_back({"ttft_s": None, "kv_bytes": None, "cached_s": 1.5}) == pytest.approx(
        {"ttft_s": math.nan, "kv_bytes": None, "cached_s": 1.5}, nan_ok=True
    )
    back = floats_back([None, 2.0])
    assert isinstance(back, tuple) and math.isnan(back[0]) and back[1] == 2.0
    assert floats_back("text") == "text" and floats_back(None) is None
    with pytest.raises(KVMagicError) as raised:
        parse_json("{")
    assert str(raised.value) == (
        "this is not a kvmagic benchmark (not JSON: Expecting property name enclosed in double quotes: line 1 column 2 "
        "(char 1))"
    )


def test_a_file_is_utf_8_whatever_the_locale_says(tmp_path):
    """A machine whose locale is not UTF-8 (Windows, a bare C locale) still writes and reads back generated text."""
    import locale

    result = _result()
    result.measurements[0] = dataclasses.replace(result.measurements[0], generated_text="café ✓")
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # the default encoding is ASCII there, unless Python runs in UTF-8 mode
    try:
        result.save(tmp_path / "run.json")
        again = BenchmarkResult.read_json(tmp_path / "run.json")
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
    assert again.measurements[0].generated_text == "café ✓"
    assert "café ✓".encode() in (tmp_path / "run.json").read_bytes()
