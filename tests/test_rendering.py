"""What a reader reads off a result: each column's unit (as docs/columns.md prints it), how its cells are written,
which columns the short table keeps, and the words of the notes at and just past their boundaries."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from kvmagic.results import columns
from kvmagic.results.columns import REGISTRY, column

# Each registered column's unit, as docs/columns.md shows it (checked against the committed page).
UNITS = {
    "tokens": ("prompt_tokens", "new_tokens", "cache_tokens", "reused_tokens", "sliding_window", "max_new_tokens",
               "max_context", "max_prompt"),
    "": ("batch", "identical", "measured", "ranks", "ranks_identical", "strategy", "first_mismatch", "ppl_ratio",
         "pareto", "note", "same_as_cold", "significant", "model", "layers", "sliding_layers", "heads", "kv_heads",
         "group_size", "head_dim", "dtype", "max_batch", "limited_by", "fitted"),
    "s": ("uncached_s", "cached_s", "uncached_ttft_s", "cached_ttft_s", "uncached_min_s", "cached_min_s",
          "uncached_iqr_s", "cached_iqr_s", "predicted_uncached_s", "predicted_cached_s", "seconds", "ttft_s", "min_s",
          "iqr_s", "compile_s"),
    "times faster": ("speedup", "speedup_ci_low", "speedup_ci_high", "predicted_speedup", "limit_speedup",
                     "warm_speedup", "warm_ttft_speedup", "speedup_was"),
    "tokens/s": ("uncached_tok_s", "cached_tok_s", "uncached_limit_tok_s", "cached_limit_tok_s", "tok_s",
                 "limit_tok_s"),
    "MiB": ("kv_cache_mib", "kv_predicted_mib", "uncached_peak_mib", "cached_peak_mib", "kv_rank_mib",
            "kv_promised_mib", "peak_mib", "checked_peak_mib"),
    "share": ("uncached_of_limit", "cached_of_limit", "uncached_comm_share", "cached_comm_share", "top1_agreement",
              "of_limit", "comm_share", "check_error"),
    "ms": ("uncached_comm_ms", "cached_comm_ms", "comm_ms"),
    "nats": ("kl_nats",),
    "change": ("speedup_change",),
    "bytes": ("token_kv_bytes", "windowed_token_kv_bytes", "kv_bytes_per_token"),
}  # fmt: skip


def test_every_column_has_the_unit_the_columns_page_prints() -> None:
    """The registry is built once, at import: the rule that reads a unit off a name is checked as it is applied and
    as it would be to each name again (a slip in the rule shows in either)."""
    assert sorted(name for names in UNITS.values() for name in names) == sorted(REGISTRY)
    found = {name: unit for unit, names in UNITS.items() for name in names}
    assert {name: column(name).unit for name in REGISTRY} == found
    assert {name: columns._unit(name) for name in REGISTRY} == found


def test_each_unit_writes_its_cells_in_its_own_form() -> None:
    forms = {name: column(name).form for name in REGISTRY}
    assert {name for name, form in forms.items() if form == "change"} == {"speedup_change"}
    assert {name for name, form in forms.items() if form == "speedup"} == set(UNITS["times faster"])
    assert column("no_such_column") == columns.Column("no_such_column", "")
    assert column("no_such_column").form == "figure"


def _plain(rows: int = 1, **values: object) -> pd.DataFrame:
    """The plain run's table, ``rows`` configurations, any column set by hand (a value, or one per row)."""
    from kvmagic.results.result import BenchmarkResult

    from .records import pair

    configs = [(16, 64), (16, 128), (32, 64), (32, 128)][:rows]
    result = BenchmarkResult("m", [m for config in configs for m in pair(config, [2.0, 2.1, 2.2], [1.0, 1.1, 1.0])])
    frame = result.to_dataframe()
    for name, value in values.items():
        frame[name] = value
    return frame


def _shown(frame: pd.DataFrame, width: int = 100) -> pd.DataFrame:
    from kvmagic.results.shown import shown_table

    return shown_table(frame, width)[0]


@pytest.mark.parametrize(
    ("value", "figure", "ratio"),
    [
        (10000.0, "10000", "10000"),  # from 10^4 a figure has no exponent: every digit
        (9999.4, "9999", "9999"),
        (1000.0, "1000", "1000"),  # from 1000 a ratio is its whole number, not 1.00e+03
        (999.4, "999.4", "999"),
        (100.0, "100", "100"),  # no trailing point, where 3 digits end at it
        (1.5, "1.5", "1.50"),
        (-0.25, "-0.25", "-0.250"),
    ],
)
def test_a_figure_has_4_significant_digits_a_ratio_3_at_and_past_their_edges(value, figure, ratio) -> None:
    cells = _shown(_plain(uncached_s=value, speedup=value, speedup_ci_low=math.nan))
    assert (cells.loc[0, "uncached_s"], cells.loc[0, "speedup"]) == (figure, ratio)


def test_a_change_is_a_signed_percentage_and_a_missing_one_is_blank() -> None:
    from kvmagic.results.shown import cell

    assert [cell("speedup_change")(v) for v in (0.25, -0.031, 0.0, math.nan, None)] == [
        "+25.0%", "-3.1%", "+0.0%", "", "",
    ]  # fmt: skip
    assert [cell("kl_nats")(v) for v in (math.nan, None, 3)] == ["", "", "3"]


@pytest.mark.parametrize(
    ("models", "shown"),
    [
        (["google/gemma-3-270m", "Qwen/Qwen3-0.6B"], ["gemma-3-270m", "Qwen3-0.6B"]),
        (["/models/hub/org/tiny/", "local"], ["tiny", "local"]),  # folders and a trailing slash go
        (["org/x", "other/x"], ["org/x", "other/x"]),  # the same short name: each keeps its whole one
        (["/", "a b/c d"], ["/", "c d"]),  # nothing after the slash: the name as given; a space is no slash
    ],
)
def test_the_short_table_names_each_model_by_its_last_part_where_that_tells_them_apart(models, shown) -> None:
    frame = _plain(2)
    frame.insert(0, "model", models)
    assert _shown(frame)["model"].tolist() == shown


def test_the_batch_shows_only_where_some_row_has_more_than_one_sequence() -> None:
    assert "batch" not in _shown(_plain(2)).columns
    assert _shown(_plain(2, batch=[1, 2]))["batch"].tolist() == ["1", "2"]
