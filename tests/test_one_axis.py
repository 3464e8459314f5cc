"""One axis: the plain run's table is a view of the rows of the comparison ``off,dynamic``, drawn from one registry."""

from __future__ import annotations

import math

import pytest

from kvmagic.core.spec import BenchSpec
from kvmagic.results.columns import column, names
from kvmagic.results.report import additions
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.rows import PAIR, ROWS
from kvmagic.results.shown import cell

from .records import pair

CONFIGS = [(16, 8, 1), (16, 32, 1)]
MEASURED = [
    m
    for config, (uncached, cached) in zip(CONFIGS, [([0.9, 1.1, 1.0], [0.4, 0.5, 0.45]), ([3.0, 3.3, 2.9], [1.0, 1.2])])
    for m in pair(
        config, uncached, cached, off={"ttft_s": 0.05, "kv_bytes": 0}, dynamic={"ttft_s": 0.04, "kv_bytes": 4096}
    )
]


def _same(a: object, b: object) -> bool:
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or a == b


def test_the_plain_table_shows_the_comparisons_rows_side_by_side() -> None:
    plain = BenchmarkResult("tiny", MEASURED).to_dataframe()
    rows = BenchmarkResult("tiny", MEASURED, BenchSpec(cache="off,dynamic")).to_dataframe()
    assert list(plain.columns) == list(names(PAIR)) and list(rows.columns) == list(names(ROWS))
    sides = [name for name in names(PAIR) if column(name).side is not None]
    assert len(sides) == 16  # every uncached_*/cached_* column, the speed-up, its interval and the cache's bytes
    for config, shown in zip(CONFIGS, plain.to_dict("records")):
        mine = rows[(rows["prompt_tokens"] == config[0]) & (rows["new_tokens"] == config[1])].set_index("strategy")
        for name in sides:
            strategy, source = column(name).side  # type: ignore[misc]
            assert _same(shown[name], mine.loc[str(strategy), source]), name
        assert shown["identical"] == bool(mine["identical"].all())


def test_a_pair_of_two_rounds_has_no_interval_in_either_view() -> None:
    rows = BenchmarkResult("tiny", MEASURED, BenchSpec(cache="off,dynamic")).to_dataframe().set_index("strategy")
    assert math.isnan(rows.loc["dynamic", "speedup_ci_low"].iloc[1]) and math.isfinite(
        rows.loc["dynamic", "speedup_ci_low"].iloc[0]
    )


@pytest.mark.parametrize(
    ("name", "unit", "written"),
    [
        ("uncached_s", "s", "1.234"),
        ("speedup_ci_high", "times faster", "1.23"),
        ("speedup_change", "change", "+123.4%"),
        ("kv_cache_mib", "MiB", "1.234"),
        ("cached_tok_s", "tokens/s", "1.234"),
        ("kl_nats", "nats", "1.234"),
    ],
)
def test_each_column_is_written_as_its_registered_form(name: str, unit: str, written: str) -> None:
    assert column(name).unit == unit and cell(name)(1.2345) == written


def test_every_column_a_table_shows_is_declared_with_a_meaning() -> None:
    tables = [PAIR, ROWS, *(a.pair_columns for a in additions()), *(a.row_columns for a in additions())]
    assert sorted(c.name for table in tables for c in table if not c.meaning or column(c.name) is not c) == []


def test_a_column_is_written_as_declared_whatever_was_imported_before() -> None:
    """A fresh process that formats a speed-up before any table was made (a verdict's words come first on a report)
    writes it as the table does: 3 digits, not 4."""
    import subprocess
    import sys

    code = "from kvmagic.results.columns import cell; print(cell('speedup')(7.2789), cell('speedup_change')(0.1))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["7.28", "+10.0%"]
