"""Rich display: styled HTML with the metadata folded away in Jupyter, plain text elsewhere."""

from __future__ import annotations

import re

import pandas as pd

from kvmagic.addons.baseline.compare import compare
from kvmagic.results.display import StyledTable, styled_table, to_html
from kvmagic.results.records import Mismatch, RunFacts
from kvmagic.results.report import COLUMNS
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.shown import shown_table, shown_text, wide_text

from .records import rounds


def _styles(page: str) -> dict[str, str]:
    """Each cell's CSS, from the <style> block the Styler writes (it groups cells sharing a style)."""
    found: dict[str, str] = {}
    for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", page.split("</style>")[0].split(">", 1)[1]):
        for selector in selectors.split(","):
            found[selector.strip().rsplit("_", 2)[-2] + "_" + selector.strip().rsplit("_", 1)[-1]] = " ".join(
                body.split()
            )
    return found


def _result() -> BenchmarkResult:
    flipped = {"mismatch": Mismatch(run=0, position=2, expected_id=1, actual_id=2)}
    rows = [*rounds((8, 4), [(2.0, 1.0), (2.2, 1.1)]), *rounds((8, 8), [(2.0, 1.0), (2.2, 1.1)], dynamic=flipped)]
    return BenchmarkResult("tiny", rows, metadata={"dtype": "float32"}, facts=RunFacts(prompt_sha256="f" * 64))


def test_html_emphasises_speedup_flags_differing_tokens_and_folds_metadata():
    result = _result()
    page = to_html(result.to_dataframe(), {"model": "tiny", **result.metadata}, ["a <note>"])
    assert "<caption><details><summary>how this was measured</summary>" in page
    assert "<th style='text-align:left'>dtype</th><td style='text-align:left'>float32</td>" in page
    styles = _styles(page)
    assert styles["row0_col4"] == styles["row1_col4"] == "font-weight: bold;"  # speedup
    assert styles["row1_col5"].startswith("background-color: #f8d7da;") and "row0_col5" not in styles  # identical
    assert "<p>a &lt;note&gt;</p>" in page


def test_significant_change_is_marked():
    result = _result()
    faster = BenchmarkResult("tiny", rounds((8, 4), [(4.0, 1.0), (4.4, 1.1)]))
    comparison = compare(faster, result)
    page = comparison._repr_html_()
    column = list(shown_table(comparison.to_dataframe())[0].columns).index("speedup saved -> now")
    assert "2.00 -&gt; 4.00 (+100%)" in page and _styles(page)[f"row0_col{column}"].startswith(
        "background-color: #fff3cd;"
    )
    wide = to_html(comparison.to_dataframe(), {}, wide=True)
    column = list(comparison.to_dataframe().columns).index("speedup_change")
    assert "+100.0%" in wide and _styles(wide)[f"row0_col{column}"].startswith("background-color: #fff3cd;")


def test_styled_table_is_a_dataframe_with_plain_text_and_plain_derivatives():
    result = _result()
    table = styled_table(result.to_dataframe(), result.metadata, result=result)
    assert isinstance(table, StyledTable) and isinstance(table, pd.DataFrame)
    assert list(table.columns) == list(COLUMNS)  # the data keeps every column; only the view is short
    assert repr(table) == shown_text(result.to_dataframe())
    assert "speedup_ci_high" not in table._repr_html_()
    wide = styled_table(result.to_dataframe(), result.metadata, wide=True, result=result)
    assert all(column in repr(wide) and column in wide._repr_html_() for column in COLUMNS)
    assert "<details>" in table._repr_html_()
    assert type(table[["speedup"]]) is pd.DataFrame and type(table.head(1)) is pd.DataFrame
    assert "<details>" in result._repr_html_() and "generated tokens differ from position 2" in result._repr_html_()


def test_how_it_was_measured_reads_rounded_and_leaves_out_what_is_empty():
    metadata = {"estimated_s": 26.18174831901318, "frontier_free_bytes": 20015820800.0, "frontier_unchecked": {},
                "cuda": None, "prompt_sha256": "ab" * 32, "model_generation_settings": {"temperature": 0.6}}  # fmt: skip
    page = to_html(_result().to_dataframe(), metadata)
    cells = dict(re.findall(r"<th style='text-align:left'>([^<]*)</th><td style='text-align:left'>([^<]*)</td>", page))
    assert cells == {
        "estimated_s": "26.18", "frontier_free_bytes": "18.64 GiB", "prompt_sha256": "abababababab...",
        "model_generation_settings": "temperature=0.6",
    }  # fmt: skip


def test_notes_sit_under_the_table_whether_it_is_the_table_or_the_result():
    """The magic's table and -o's result show the same notes in the same place: beneath the table."""
    result = _result()
    table = styled_table(result.to_dataframe(), result.metadata, result.notes(), result=result)
    for text in (repr(table), str(result)):
        assert text.startswith("prompt_tokens") and "\n8+8 tokens: generated tokens differ" in text
        assert text.index("\n8+8 tokens") > text.index("False")  # after the last row
    for page in (table._repr_html_(), result._repr_html_()):
        assert page.index("</table>") < page.index("<p>8+8 tokens: generated tokens differ")


def test_wide_reads_as_the_short_table_does_in_html_and_in_text():
    rows = rounds((16384, 4096), [(12345.678, 0.00123456), (12345.678, 0.00123456)])
    result = BenchmarkResult("tiny", rows, metadata={"dtype": "float32"})
    wide = styled_table(result.to_dataframe(), result.metadata, ["a note"], wide=True, result=result)
    page = wide._repr_html_()
    cells = re.findall(r"<td id=\"T_\w+_row0_col\d+\" class=\"[^\"]*\" >([^<]*)</td>", page)
    assert cells[:7] == ["16384", "4096", "1", "12346", "0.001235", "10000063", "True"], cells
    assert "nan" not in page.lower() and "e+04" not in page
    assert repr(wide) == wide_text(result.to_dataframe(), ["a note"])


def test_the_table_carries_its_result_its_figure_and_its_plain_frame():
    """What a user grabs after a cell (``r = _``) answers ``.result``, ``.plot()`` and ``.to_dataframe()``."""
    from matplotlib.axes import Axes

    from kvmagic.addons.plot.sweep_plot import SweepFigure

    result = _result()
    table = styled_table(result.to_dataframe(), result.metadata, result=result)
    assert table.result is result
    frame = table.to_dataframe()
    assert type(frame) is pd.DataFrame and frame.equals(result.to_dataframe())
    frame.loc[0, "speedup"] = 0.0
    assert table.loc[0, "speedup"] == result.to_dataframe().loc[0, "speedup"] > 0  # a copy: the table is as it was
    assert isinstance(table.plot(), SweepFigure)  # the result's figure, not pandas' every column
    assert isinstance(table.plot(x="new_tokens", y="speedup"), Axes)  # given arguments, pandas' own
    assert isinstance(table.plot.bar(x="new_tokens", y="speedup"), Axes)
    import matplotlib.pyplot as plt

    plt.close("all")


def test_bytes_read_in_mib_below_a_gib_and_in_gib_from_one() -> None:
    metadata = {"free_bytes": float(2**30), "cache_bytes": float(2**30 - 2**20), "weight_bytes": 1536,
                "kv_budget": {"held_bytes": 3.0 * 2**29, "steps": 2.0}, "devices": [], "notes": "",
                "quant_sha256": "0123456789abcdef"}  # fmt: skip
    page = to_html(_result().to_dataframe(), metadata)
    cells = dict(re.findall(r"<th style='text-align:left'>([^<]*)</th><td style='text-align:left'>([^<]*)</td>", page))
    assert cells == {
        "free_bytes": "1 GiB", "cache_bytes": "1023 MiB", "weight_bytes": "1536", "kv_budget":
        "held_bytes=1.5 GiB, steps=2", "notes": "", "quant_sha256": "0123456789ab...",
    }  # fmt: skip
    caption = page.split("<summary>how this was measured</summary><table>", 1)[1].split("</table>", 1)[0]
    assert caption.startswith("<tr><th") and caption.count("</td></tr><tr><th") == len(cells) - 1  # row after row


def test_only_a_row_whose_tokens_differed_is_flagged_not_one_with_no_verdict() -> None:
    """A strategy that could not run has no verdict (None, or NaN once in a frame): its cell stays plain."""
    frame = _result().to_dataframe()
    frame["identical"] = pd.Series([float("nan"), False], dtype=object)
    styles = _styles(to_html(frame, {}))
    assert "row0_col5" not in styles and styles["row1_col5"].startswith("background-color: #f8d7da;")
    frame["identical"] = pd.Series([None, True], dtype=object)
    styles = _styles(to_html(frame, {}))
    assert "row0_col5" not in styles and "row1_col5" not in styles


def test_only_a_significant_change_is_marked_and_only_in_its_own_cell() -> None:
    """Against the baseline: 8+4 twice as fast (significant), 8+8 as it was (not): one cell marked, in its column."""
    baseline = _result()
    rows = [*rounds((8, 4), [(4.0, 1.0), (4.4, 1.1)]), *rounds((8, 8), [(2.0, 1.0), (2.2, 1.1)])]
    comparison = compare(BenchmarkResult("tiny", rows), baseline)
    frame = comparison.to_dataframe()
    assert frame["significant"].tolist() == [True, False]
    page = to_html(frame, {}, ["one note", "another"])
    columns = list(shown_table(frame)[0].columns)
    change = columns.index("speedup saved -> now")
    styles = _styles(page)
    assert styles[f"row0_col{change}"] == "background-color: #fff3cd; font-weight: bold;"
    assert f"row1_col{change}" not in styles
    assert "<p>one note</p><p>another</p>" in page


def test_a_table_made_directly_shows_short_with_no_notes_and_no_caption() -> None:
    """A StyledTable built from a frame alone (not by styled_table, e.g. read back) has none of kvmagic's
    attributes: it shows as the short table, without notes, its caption empty."""
    frame = _result().to_dataframe()
    bare = StyledTable(frame)
    assert repr(bare) == shown_text(frame)
    assert "<table></table></details>" in bare._repr_html_()
    made = styled_table(frame, {"dtype": "float32"}, result=None)
    assert "<th style='text-align:left'>dtype</th><td style='text-align:left'>float32</td>" in made._repr_html_()


def test_the_tables_plot_passes_its_columns_on_to_pandas_by_position_or_by_name() -> None:
    import matplotlib.pyplot as plt

    result = _result()
    table = styled_table(result.to_dataframe(), result.metadata, result=result)
    for axes in (table.plot("new_tokens", "speedup"), table.plot(x="new_tokens", y="speedup")):
        assert axes.get_xlabel() == "new_tokens" and [line.get_label() for line in axes.get_lines()] == ["speedup"]
        plt.close("all")


def test_wide_html_gives_a_strategy_that_could_not_run_a_footnote_as_the_text_does():
    """A reason in the `note` column would stretch the wide HTML table's last column: a mark points to it below."""
    from kvmagic.core.spec import BenchSpec

    from .records import timed

    names = ["off", "dynamic", "offloaded"]
    rows = [timed((8, 4), name, [0.2 if name == "off" else 0.1] * 3) for name in names[:2]]
    reason = "needs a GPU (CUDA or XPU): it offloads the cache from the accelerator to CPU memory"
    result = BenchmarkResult("tiny", rows, spec=BenchSpec(cache=tuple(names), repeat=3), strategies=names,
                             skipped={"offloaded": reason})  # fmt: skip
    frame = result.to_dataframe()
    page = to_html(frame, {}, ["a note"], wide=True)
    cells = re.findall(r"<td id=\"T_\w+_row2_col\d+\" class=\"[^\"]*\" >([^<]*)</td>", page)
    assert cells[-1] == "[1]" and reason not in "".join(cells)
    assert page.index("</table>") < page.index(f"<p>[1] {reason}</p>") < page.index("<p>a note</p>")
    assert f"[1] {reason}" in " ".join(wide_text(frame, ["a note"]).split())


def test_the_caption_reads_left_and_names_the_cpu_once_and_tf32_only_with_cuda() -> None:
    """Left-aligned, so a --wide table does not carry it off-screen; on a CPU the device already names the CPU and
    the TF32 flags act on nothing, while with CUDA both stay (the CPU beside a GPU is news)."""
    flags = {"allow_tf32_matmul": False, "allow_tf32_cudnn": True, "float32_matmul_precision": "highest"}
    on_cpu = to_html(_result().to_dataframe(), {"device": "cpu (AMD EPYC)", "cpu": "AMD EPYC", "cuda": None, **flags})
    keys = re.findall(r"<th style='text-align:left'>([^<]*)</th>", on_cpu)
    assert keys == ["device", "float32_matmul_precision"]
    assert re.search(r"caption \{\s*text-align: left;?\s*\}", on_cpu)
    gpu = {"device": "cuda:0 (NVIDIA H200)", "cpu": "AMD EPYC", "cuda": "12.8", **flags}
    on_gpu = re.findall(r"<th style='text-align:left'>([^<]*)</th>", to_html(_result().to_dataframe(), gpu))
    assert on_gpu == ["device", "cpu", "cuda", *flags]
