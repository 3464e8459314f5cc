"""The shown table: the columns a reader needs first, in 100 columns, numbers to a few digits, footnotes."""

from __future__ import annotations

import math

import pandas as pd

from kvmagic.addons.baseline.compare import compare
from kvmagic.addons.predict.predictions import Predicted, Prediction
from kvmagic.core.spec import BenchSpec
from kvmagic.core.strategy import PAIR
from kvmagic.results.records import Mismatch
from kvmagic.results.report import COLUMNS
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.shown import WIDTH, shown_table, shown_text, wide_text, wrapped_notes

from .records import pair, timed

# What the timed runs leave of each strategy: 1 GiB of cache, 3 GiB peak, 0.57 s to the first token.
LEFT = {"ttft_s": 0.57, "kv_bytes": 2**30, "peak_bytes": 3 * 2**30}


def _result(pairs: int = 1, *, uncached: float = 7.945844, cached: float = 5.175697) -> BenchmarkResult:
    rows = [
        m
        for config in ((16, 64), (16384, 4096))
        for m in pair(config, [uncached] * pairs, [cached] * pairs, off=LEFT, dynamic=LEFT)
    ]
    return BenchmarkResult("tiny", rows)


def _fits(text: str) -> bool:
    return max(len(line) for line in text.splitlines()) <= WIDTH


def test_the_default_columns_with_numbers_to_four_digits_and_the_ratio_to_three():
    cells, footnotes = shown_table(_result().to_dataframe())
    assert list(cells.columns) == [
        "prompt_tokens", "new_tokens", "uncached_s", "cached_s", "speedup", "identical", "kv_cache_mib",
    ]  # fmt: skip
    assert cells.iloc[0].tolist() == ["16", "64", "7.946", "5.176", "1.54", "True", "1024"]
    assert footnotes == []


def test_the_interval_shares_the_speedup_cell_and_a_missing_one_leaves_it_alone():
    frame = _result(pairs=5).to_dataframe()
    frame["speedup_ci_low"], frame["speedup_ci_high"] = [1.5, math.nan], [1.6, 1.7]
    cells, _ = shown_table(frame)
    assert cells["speedup [95% CI]"].tolist() == ["1.54 [1.50, 1.60]", "1.54"]
    frame["speedup"] = [15.3, 150.2]
    frame["speedup_ci_low"], frame["speedup_ci_high"] = [14.9, 149.0], [15.8, 151.0]
    assert shown_table(frame)[0]["speedup [95% CI]"].tolist() == ["15.3 [14.9, 15.8]", "150 [149, 151]"]


def test_the_header_says_what_the_brackets_are_only_where_there_are_some():
    frame = _result(pairs=5).to_dataframe()
    assert "speedup [95% CI]" in shown_text(frame).splitlines()[0]
    frame["speedup_ci_low"] = frame["speedup_ci_high"] = math.nan
    assert shown_text(frame).splitlines()[0].split()[4] == "speedup"


def test_large_and_missing_numbers_keep_their_cells_narrow():
    frame = _result(uncached=12345.678, cached=0.00123456).to_dataframe()
    frame.loc[1, "kv_cache_mib"] = math.nan
    cells, _ = shown_table(frame)
    assert cells.iloc[0][["uncached_s", "cached_s"]].tolist() == ["12346", "0.001235"]
    assert cells.iloc[1]["kv_cache_mib"] == ""


def test_every_layout_fits_in_100_columns_and_the_data_keeps_every_column():
    long = _result(pairs=5, uncached=1234.5678, cached=123.45678)
    frame = long.to_dataframe()
    assert list(frame.columns) == list(COLUMNS) and len(frame.to_string().splitlines()[0]) > 2 * WIDTH
    frame["speedup_ci_low"], frame["speedup_ci_high"] = 9.87654, 10.1234
    assert _fits(shown_text(frame)) and "speedup" in shown_text(frame) and "identical" in shown_text(frame)
    comparison = compare(long, _result(pairs=5)).to_dataframe()
    assert _fits(shown_text(comparison)) and "speedup saved -> now" in shown_text(comparison)
    assert "kv_cache_mib" in shown_text(comparison)  # the plain table's columns stay beside the comparison's
    long.addons["predict"] = Predicted(
        predictions=tuple(Prediction(p, n, 2000.0, 100.0) for p, n in ((16, 64), (16384, 4096), (32768, 8192)))
    )
    predicted = long.to_dataframe()
    assert _fits(shown_text(predicted)) and "predicted_speedup" in shown_text(predicted)
    assert _fits(str(long))


def test_columns_a_reader_can_spare_go_first_when_the_table_would_not_fit():
    frame = _result().to_dataframe()
    wide = shown_table(frame)[0]
    narrow = shown_table(frame, width=60)[0]
    assert "kv_cache_mib" in wide.columns and list(narrow.columns) == list(wide.columns)[:-1]


def _strategies() -> BenchmarkResult:
    flip = Mismatch(run=0, position=3, expected_id=97, actual_id=98, expected_token="a", actual_token="b")
    rows = [
        timed((82, n), name, [seconds] * 3, **LEFT, **({"mismatch": flip} if name == "quantized:quanto" else {}))
        for n in (64, 256)
        for name, seconds in (("off", 2.0), ("dynamic", 1.0), ("quantized:quanto", 1.2))
    ]
    names = ["off", "dynamic", "quantized:quanto", "offloaded_static"]
    return BenchmarkResult(
        "tiny", rows, spec=BenchSpec(cache=tuple(names)), strategies=names,
        skipped={"offloaded_static": "needs a GPU (CUDA or XPU): it offloads the cache from the accelerator to CPU "
                 "memory, and this note is long enough to wrap"},
    )  # fmt: skip


def test_a_cache_comparison_turns_its_long_texts_into_footnotes():
    text = shown_text(_strategies().to_dataframe())
    lines = text.splitlines()
    assert lines[0].split() == [
        "prompt_tokens", "new_tokens", "strategy", "seconds", "speedup", "[95%", "CI]", "identical", "kv_cache_mib",
        "note",
    ]  # fmt: skip
    # three strategies ran: dynamic is faster than off and quanto at the same bytes and quality (none read), so only
    # it is on the frontier; its marks give way to the speed-up's interval in 100 columns, and stay in the data
    assert _strategies().to_dataframe()["pareto"].tolist()[:3] == [False, True, False]
    assert lines[3].split() == [
        "82",
        "64",
        "quantized:quanto",
        "1.2",
        "1.67",
        "[1.67,",
        "1.67]",
        "False",
        "1024",
        "[1]",
    ]
    assert lines[4].split() == ["82", "64", "offloaded_static", "[2]"]
    assert lines[7].endswith(" [1]") and lines[8].endswith(" [2]")  # one footnote per distinct text
    assert lines[9:] == [
        "[1] differs from off at position 3: 'a' (id 97) vs 'b' (id 98)",
        "[2] needs a GPU (CUDA or XPU): it offloads the cache from the accelerator to CPU memory, and this",
        "    note is long enough to wrap",
    ]
    assert _fits(text)


def test_a_cache_comparison_against_a_baseline_shows_each_strategys_change():
    from kvmagic.addons.baseline.compare import compare

    text = str(compare(_strategies(), _strategies()))
    header = text.splitlines()[0].split()
    assert "speedup saved -> now significant" in text.splitlines()[0] and header[-1] == "note"
    rows = [line.split() for line in text.splitlines()[1:4]]
    assert rows[0] == ["82", "64", "off", "2", "True"]  # the reference's own speed-up is no change: blank
    assert rows[1][4:] == ["2.00", "->", "2.00", "(+0%)", "False", "True"]
    assert rows[2][4:] == ["1.67", "->", "1.67", "(+0%)", "False", "False", "[1]"] and _fits(text)


def test_a_comparison_without_footnotes_has_no_note_column():
    result = _strategies()
    result.strategies, result.skipped = list(PAIR), {}
    cells, footnotes = shown_table(result.to_dataframe())
    assert "note" not in cells.columns and footnotes == []


def test_an_empty_table_is_its_header():
    empty = BenchmarkResult("tiny", [])
    assert shown_text(empty.to_dataframe()).split() == list(shown_table(pd.DataFrame(columns=COLUMNS))[0].columns)


def test_notes_wrap_to_the_width_a_terminal_has() -> None:
    warning = "82+3 tokens: warning: cached times vary (IQR is 13% of the median, over 10%): close other work " * 2
    lines = "\n".join(wrapped_notes([warning.strip(), "short"])).splitlines()
    assert max(map(len, lines)) <= WIDTH and lines[-1] == "short" and lines[1].startswith("  ")


def test_notes_and_footnotes_break_at_spaces_never_inside_a_flag_or_a_word() -> None:
    for padding in range(70, 100):  # wherever the edge falls, "(--max-seconds)" and the path stay whole
        note = f"{'a ' * (padding // 2)}the budget (--max-seconds) or --auto-cap; see {'/long' * 30}.json"
        (wrapped,) = wrapped_notes([note])
        assert wrapped.split() == note.split(), wrapped
    result = _strategies()
    result.skipped["offloaded_static"] = f"{'b ' * 40}needs --max-new-tokens raised, or --device-map cpu"
    footnote = shown_text(result.to_dataframe()).split("[2] ", 1)[1]
    assert footnote.split() == result.skipped["offloaded_static"].split(), footnote


def _blocks(text: str) -> list[list[str]]:
    """The wide table's blocks of lines, up to its first footnote or note."""
    table = text.split("\n[")[0].split("\na note")[0]
    return [block.splitlines() for block in table.split("\n\n")]


def test_wide_writes_every_column_as_the_short_table_does_in_blocks_that_fit() -> None:
    result = _result(pairs=5, uncached=12345.678, cached=0.00123456)
    text = wide_text(result.to_dataframe(), ["a note naming --max-seconds " * 5])
    assert _fits(text) and "NaN" not in text and "nan" not in text
    blocks = _blocks(text)
    assert len(blocks) > 1 and all(block[0].split()[:2] == ["prompt_tokens", "new_tokens"] for block in blocks)
    headers = [name for block in blocks for name in block[0].split()[2:]]
    assert ["prompt_tokens", "new_tokens", *headers] == list(COLUMNS)
    first = dict(zip(blocks[0][0].split(), blocks[0][1].split()))  # no index column: the row starts at its lengths
    assert first == {"prompt_tokens": "16", "new_tokens": "64", "batch": "1", "uncached_s": "12346",
                     "cached_s": "0.001235", "speedup": "10000063", "identical": "True", "uncached_ttft_s": "0.57",
                     "cached_ttft_s": "0.57"}  # fmt: skip
    assert text.endswith("\n".join(wrapped_notes(["a note naming --max-seconds " * 5])))


def test_wide_repeats_the_strategy_in_each_block_and_footnotes_long_notes() -> None:
    text = wide_text(_strategies().to_dataframe())
    assert _fits(text)
    blocks = _blocks(text)
    assert all(block[0].split()[:3] == ["prompt_tokens", "new_tokens", "strategy"] for block in blocks)
    assert [line.split()[2] for line in blocks[-1][1:3]] == ["off", "dynamic"]
    assert blocks[-1][4].endswith(" [1]") and "\n[1] needs a GPU (CUDA or XPU)" in text
    assert text.splitlines()[-1] == "    note is long enough to wrap"  # a footnote's next lines indented under it
