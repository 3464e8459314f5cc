"""What a reader reads off a result: each column's unit (as docs/columns.md prints it), how its cells are written,
which columns the short table keeps, and the words of the notes at and just past their boundaries."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from kvmagic.addons.baseline.compare import COMPARED
from kvmagic.addons.frontier.frontier_table import FRONTIER
from kvmagic.addons.models.models_columns import MODEL, SHAPES
from kvmagic.results import columns
from kvmagic.results.columns import column
from kvmagic.results.report import additions
from kvmagic.results.rows import PAIR, ROWS

# Every column of every table, as declared (a name two tables share, each declaration of it).
DECLARED = [*PAIR, *ROWS, *(c for a in additions() for c in (*a.row_columns, *a.pair_columns)), *COMPARED, MODEL,
            *SHAPES, *FRONTIER]  # fmt: skip
# Each declared column's unit, as docs/columns.md shows it (checked against the committed page).
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
    """Each declaration of a name gives it the same unit, the one written here by hand."""
    assert sorted(name for names in UNITS.values() for name in names) == sorted({c.name for c in DECLARED})
    found = {name: unit for unit, names in UNITS.items() for name in names}
    assert [(c.name, c.unit) for c in DECLARED if c.unit != found[c.name]] == []


def test_each_unit_writes_its_cells_in_its_own_form() -> None:
    forms = {c.name: column(c.name).form for c in DECLARED}
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
    assert [cell("speedup_ci_low")(v) for v in (math.nan, None)] == ["", ""]  # --wide: a strategy that did not run


@pytest.mark.parametrize(
    ("models", "shown"),
    [
        (["google/gemma-3-270m", "Qwen/Qwen3-0.6B"], ["gemma-3-270m", "Qwen3-0.6B"]),
        (["/models/hub/org/tiny/", "local"], ["tiny", "local"]),  # folders and a trailing slash go
        (["org/x", "other/x"], ["org/x", "other/x"]),  # the same short name: each keeps its whole one
        (["/", "a b/c d"], ["/", "c d"]),  # nothing after the slash: the name as given; a space is no slash
        (["org/Model-X", "org/Model-XX"], ["Model-X", "Model-XX"]),  # only slashes are cut off the end
    ],
)
def test_the_short_table_names_each_model_by_its_last_part_where_that_tells_them_apart(models, shown) -> None:
    frame = _plain(2)
    frame.insert(0, "model", models)
    assert _shown(frame)["model"].tolist() == shown


def test_the_batch_shows_only_where_some_row_has_more_than_one_sequence() -> None:
    assert "batch" not in _shown(_plain(2)).columns
    assert _shown(_plain(2, batch=[1, 2]))["batch"].tolist() == ["1", "2"]


def _mismatch(margin: float | None, sequence: int = 0):
    from kvmagic.results.records import Mismatch

    return Mismatch(0, 3, 97, 98, "a", "b", margin=margin, sequence=sequence)


def test_a_mismatch_reads_its_sequence_from_one_and_a_near_tie_only_below_its_edge() -> None:
    from kvmagic.results.notes import NEAR_TIE, describe_mismatch

    said = "generated tokens differ from position 3: 'a' (id 97) in the first off run vs 'b' (id 98) in the dynamic run"
    assert describe_mismatch(_mismatch(None), "off", "dynamic") == said
    assert describe_mismatch(_mismatch(NEAR_TIE, sequence=1), "off", "dynamic") == (
        f"{said}, sequence 2 of its batch; there the dynamic run's top two logits were 0.05 apart"
    )
    assert describe_mismatch(_mismatch(0.0125), "off", "dynamic") == (
        f"{said}; there the dynamic run's top two logits were 0.0125 apart (a near tie: rounding in float16/bfloat16 "
        "can flip it)"
    )


def _with_quality(*qualities, configs=((16, 64),), random_weights: bool = False):
    """off, dynamic and one more strategy per quality given (None: not read), at each configuration."""
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.result import BenchmarkResult

    from .records import timed

    names = ["off", "dynamic", *("quantized:hqq", "quantized:quanto")[: len(qualities)]]
    rows = [
        timed(config, name, [seconds] * 3, **({"quality": q} if q is not None else {}))
        for config in configs
        for name, seconds, q in zip(names, (2.0, 1.0, 1.1, 1.2), (None, None, *qualities))
    ]
    metadata = {"random_weights": True} if random_weights else {}
    return BenchmarkResult("m", rows, spec=BenchSpec(cache=tuple(names), repeat=3), strategies=names, metadata=metadata)


def _said(result, start: str) -> list[str]:
    return [note for note in result.notes() if note.startswith(start)]


def test_quality_is_called_rough_below_16_steps_and_the_text_it_was_read_along_is_named() -> None:
    from kvmagic.core.quality import Quality

    said = "quality: against dynamic, teacher-forced along"
    kept = "every strategy kept the full cache's predictions (kl_nats 0, top1_agreement 1), so the figure draws no trade-off"
    assert _said(_with_quality(Quality(16, 0.9375, 0.01, 1.0)), "quality") == [f"{said} its greedy tokens, 16 steps"]
    assert _said(_with_quality(Quality(16, 1.0, 0.0, 1.0)), "quality") == [
        f"{said} its greedy tokens, 16 steps; {kept}"
    ]
    assert _said(_with_quality(Quality(15, 1.0, 0.01, 1.0, along="text")), "quality") == [
        "quality read over only 15 steps: rough figures; a longer -n, or --quality-text, reads more",
        f"{said} the given text, 15 steps",
    ]
    random = _with_quality(Quality(40, 1.0, 0.0, 1.0), Quality(20, 1.0, 0.0, 1.0), random_weights=True)
    assert _said(random, "quality") == [
        (
            f"{said} its greedy tokens, 20 steps; {kept}; with random weights, how far a cache "
            "moves the logits, not what a trained model loses"
        )
    ]


def test_a_perplexity_ratio_is_within_noise_where_its_interval_reaches_1_at_either_end() -> None:
    from kvmagic.core.quality import Quality

    def ppl(ratio, interval, **kwargs) -> list[str]:
        result = _with_quality(None, Quality(20, 0.9, 0.1, ratio, ppl_interval=interval), **kwargs)
        return [note for note in result.notes() if "ppl_ratio" in note]

    within = "is within noise (rough 95% interval [{}, {}] over its 20 steps holds 1): neither better nor worse than"
    assert ppl(1.1, (1.0, 1.2)) == [f"quantized:quanto: ppl_ratio 1.1 {within.format(1, 1.2)} dynamic's"]
    assert ppl(0.9, (0.8, 1.0)) == [f"quantized:quanto: ppl_ratio 0.9 {within.format(0.8, 1)} dynamic's"]
    assert ppl(1.5, (1.2, 1.8)) == []  # worse beyond noise: the figure says so itself
    assert ppl(1, (0.9, 1.1)) == []  # exactly the full cache's: nothing to say
    assert ppl(0.9, (0.85, 0.95), configs=((16, 64), (16, 128))) == [
        f"quantized:quanto at 16+{n} tokens: ppl_ratio 0.9 (rough 95% interval [0.85, 0.95] over its 20 steps): "
        "surer of these tokens than dynamic, not closer to its predictions (kl_nats says how far they moved)"
        for n in (64, 128)
    ]


def _spread(times, configs=((16, 64),), strategies=("off", "dynamic")) -> list[str]:
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.result import BenchmarkResult

    from .records import timed

    rows = [timed(c, s, [t * (i + 1) for t in times]) for c in configs for i, s in enumerate(strategies)]
    plain = strategies == ("off", "dynamic")  # the plain run names its two uncached and cached
    spec = BenchSpec(repeat=3) if plain else BenchSpec(cache=strategies, repeat=3)
    result = BenchmarkResult("m", rows, spec=spec, strategies=list(strategies))
    return _said(result, "warning: times vary")


def test_times_vary_past_a_tenth_of_the_median_not_at_it() -> None:
    """2.25, 2.5, 2.75 s: an IQR of 0.25 s, exactly 10% of the median."""
    assert _spread([2.25, 2.5, 2.75]) == []
    advice = "close other work or raise -r for more pairs before trusting the"
    assert _spread([2.0, 2.5, 3.0]) == [
        f"warning: times vary (IQR over 10% of the median) for uncached 20%, cached 20%: {advice} speed-up"
    ]
    just_past = "uncached 10.4%, cached 10.4%"  # not "10%", which would read as at the bound, not past it
    assert _spread([2.24, 2.5, 2.76]) == [
        f"warning: times vary (IQR over 10% of the median) for {just_past}: {advice} speed-up"
    ]
    assert _spread([2.0, 2.5, 3.0], strategies=("off", "dynamic", "static")) == [
        (f"warning: times vary (IQR over 10% of the median) for off 20%, dynamic 20%, static 20%: {advice} speed-ups")
    ]
    assert _spread([2.0, 2.5, 3.0], configs=((16, 64), (16, 128))) == [
        (
            "warning: times vary (IQR over 10% of the median) for uncached 20%, cached 20% at 16+64 tokens; uncached 20%, "
            f"cached 20% at 16+128 tokens: {advice} speed-ups"
        )
    ]


@pytest.mark.parametrize(
    ("metadata", "steadier"),
    [({"device": "cpu", "threads": 2}, True), ({"device": "cpu", "threads": 1}, False),
     ({"device": "cuda:0 (NVIDIA H200)", "threads": 16}, False), ({}, False)],
)  # fmt: skip
def test_times_that_vary_on_a_cpu_with_threads_suggest_one_thread(metadata: dict, steadier: bool) -> None:
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.result import BenchmarkResult

    from .records import timed

    rows = [timed((16, 64), s, [t * (i + 1) for t in (2.0, 2.5, 3.0)]) for i, s in enumerate(("off", "dynamic"))]
    result = BenchmarkResult("m", rows, spec=BenchSpec(repeat=3), strategies=["off", "dynamic"], metadata=metadata)
    advice = "close other work, use --threads 1, or raise -r" if steadier else "close other work or raise -r"
    said = f"warning: times vary (IQR over 10% of the median) for uncached 20%, cached 20%: {advice} for more pairs"
    assert _said(result, "warning: times vary") == [f"{said} before trusting the speed-up"]


def test_a_cell_says_which_sequence_of_a_batch_differed_counting_from_one() -> None:
    from kvmagic.results.rows import short_mismatch

    assert short_mismatch(_mismatch(None)) == "3: 'a' (id 97) vs 'b' (id 98)"
    assert short_mismatch(_mismatch(None, sequence=1)) == "3: 'a' (id 97) vs 'b' (id 98) in sequence 2"


def test_an_older_file_s_bytes_and_first_token_come_from_its_hooked_run_only_where_the_row_has_none() -> None:
    from kvmagic.results.records import StepProfile
    from kvmagic.results.rows import MIB, figures

    from .records import timed

    hooked = StepProfile((0.25, 0.5), (1.0, 1.0), (1, 2), peak_bytes=4 * MIB, kv_bytes=2 * MIB)
    old = figures(timed((16, 64), "dynamic", [1.0, 2.0, 1.5], profile=hooked))
    assert (old["kv_cache_mib"], old["peak_mib"], old["ttft_s"]) == (2, 4, 0.25)
    assert (old["seconds"], old["min_s"]) == (1.5, 1.0)
    new = figures(timed((16, 64), "dynamic", [1.0], profile=hooked, kv_bytes=MIB, peak_bytes=3 * MIB, ttft_s=0.125))
    assert (new["kv_cache_mib"], new["peak_mib"], new["ttft_s"]) == (1, 3, 0.125)
    bare = figures(timed((16, 64), "dynamic", [1.0]))
    assert all(math.isnan(bare[name]) for name in ("kv_cache_mib", "peak_mib", "ttft_s"))


def test_a_wide_block_holds_every_column_that_fits_its_width_exactly_and_no_more() -> None:
    from kvmagic.results.shown import wide_text

    frame = _plain(2)[["prompt_tokens", "new_tokens", "uncached_s", "cached_s", "speedup", "identical"]]
    one = wide_text(frame, width=1000).splitlines()
    assert one[0].split() == list(frame.columns) and len(one) == 3
    width = max(map(len, one))
    assert wide_text(frame, width=width).splitlines() == one
    two = wide_text(frame, width=width - 1).splitlines()
    assert [line.split() for line in two[::4]] == [
        ["prompt_tokens", "new_tokens", "uncached_s", "cached_s", "speedup"], ["prompt_tokens", "new_tokens", "identical"],
    ]  # fmt: skip
    assert two[3] == "" and max(map(len, two)) < width


def test_the_short_table_keeps_a_column_that_fits_the_width_exactly() -> None:
    from kvmagic.results.shown import shown_text

    frame = _plain(2, kv_cache_mib=1024.0)
    full = shown_text(frame, width=1000).splitlines()
    width = max(map(len, full))
    assert shown_text(frame, width=width).splitlines() == full and full[0].split()[-1] == "kv_cache_mib"
    assert [line.split() for line in shown_text(frame, width=width - 1).splitlines()] == [
        line.split()[:-1] for line in full
    ]


def _first_to_go(frame: pd.DataFrame, count: int) -> list[str]:
    """The columns the short table gives up, one at a time, each where it is one character too wide to keep all."""
    from kvmagic.results.shown import shown_table

    gone = []
    for _ in range(count):
        everything = list(shown_table(frame, 1000)[0].columns)
        width = max(map(len, shown_table(frame, 1000)[0].to_string(index=False).splitlines()))
        (name,) = [n for n in everything if n not in shown_table(frame, width - 1)[0].columns]
        gone.append(name)
        frame = frame.drop(columns=[name])
    return gone


def test_the_columns_a_reader_can_spare_go_in_the_documented_order() -> None:
    """docs/columns.md: `peak_mib`, then `tok_s`, `top1_agreement`, `kl_nats`, `pareto` and `kv_cache_mib`; where some
    strategy lost quality, `identical` and the seconds go before it, and where the frontier is marked the marks and
    `kl_nats` stay to the last."""
    from kvmagic.core.quality import Quality

    lossless = _with_quality(Quality(20, 1.0, 0.0, 1.0), Quality(20, 1.0, 0.0, 1.0)).to_dataframe()
    lossless["kv_cache_mib"] = 1024.0
    assert _first_to_go(lossless, 6) == ["peak_mib", "tok_s", "top1_agreement", "kl_nats", "pareto", "kv_cache_mib"]
    lossy = _with_quality(Quality(20, 0.9, 0.1, 1.1), Quality(20, 0.8, 0.2, 1.2)).to_dataframe()
    lossy["kv_cache_mib"] = 1024.0
    assert _first_to_go(lossy, 7) == [
        "peak_mib", "tok_s", "identical", "seconds", "top1_agreement", "kv_cache_mib", "pareto",
    ]  # fmt: skip
    unmarked = lossy.drop(columns=["pareto"])
    assert _first_to_go(unmarked, 7) == [
        "peak_mib", "tok_s", "identical", "seconds", "kv_cache_mib", "top1_agreement", "kl_nats",
    ]  # fmt: skip
    only_kl = lossy.assign(top1_agreement=1.0).drop(columns=["pareto"])  # a KL past 0 alone is a loss
    assert _first_to_go(only_kl, 3) == ["peak_mib", "tok_s", "identical"]
    only_top1 = lossy.assign(kl_nats=0.0).drop(columns=["pareto"])  # and so is a top-1 agreement below 1
    assert _first_to_go(only_top1, 3) == ["peak_mib", "tok_s", "identical"]


def test_a_spared_column_comes_back_where_the_table_fits_without_a_wider_one() -> None:
    """Wide decode speeds: at the width of the table without `tok_s`, giving up `peak_mib` first is not enough, so
    `tok_s` goes too, and `peak_mib`, the narrower, comes back."""
    from kvmagic.core.quality import Quality
    from kvmagic.results.shown import shown_table, shown_text

    frame = _with_quality(Quality(20, 1.0, 0.0, 1.0), Quality(20, 1.0, 0.0, 1.0)).to_dataframe()
    frame["tok_s"], frame["peak_mib"] = 123456789.0, 1.0
    everything = list(shown_table(frame, 1000)[0].columns)

    def width(without: str) -> int:
        return max(map(len, shown_text(frame.drop(columns=[without]), width=1000).splitlines()))

    assert width("tok_s") < width("peak_mib")
    assert list(shown_table(frame, width("tok_s"))[0].columns) == [n for n in everything if n != "tok_s"]


def _notes_of(*configs: tuple[tuple[int, int], list[float], list[float]], repeat: int | str = 3) -> list[str]:
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.result import BenchmarkResult

    from .records import pair

    rows = [m for config, uncached, cached in configs for m in pair(config, uncached, cached)]
    return BenchmarkResult("m", rows, spec=BenchSpec(repeat=repeat)).notes()


def test_an_interval_that_is_exactly_1_holds_1_and_one_exactly_at_the_speedup_leaves_it_inside() -> None:
    """Runs that agree pair by pair give an interval of one point: [1.00, 1.00] holds 1; [2.00, 2.00] holds the
    speed-up 2."""
    holds = (
        "cached: the 95% interval [1.00, 1.00] holds 1, so these runs cannot tell whether it is faster than uncached"
    )
    assert _notes_of(((16, 64), [1.0] * 3, [1.0] * 3)) == [f"{holds}: raise -r for more pairs"]
    assert _notes_of(((16, 64), [2.0] * 3, [1.0] * 3)) == _notes_of(((16, 64), [1.5] * 3, [1.0] * 3)) == []
    assert _notes_of(((16, 64), [1.0] * 3, [2.0] * 3)) == [
        "cached: slower than uncached: its 95% interval [0.500, 0.500] lies below 1"
    ]
    assert _notes_of(((16, 64), [1.0] * 3, [1.0] * 3), ((16, 128), [2.0] * 3, [1.0] * 3)) == [
        f"16+64 tokens {holds}: raise -r for more pairs"
    ]


def test_auto_says_which_stop_came_first_and_advises_each_way_found() -> None:
    """One configuration whose pairs agree (its interval has no width: the target reached), one whose pairs
    disagree widely (the cap came first): more pairs come from a higher cap or a lower target, in that order."""
    notes = _notes_of(((16, 64), [1.0] * 3, [1.0] * 3), ((16, 128), [1.0, 2.0, 1.0, 2.0], [1.5] * 4), repeat="auto")
    auto = [note for note in notes if note.startswith("-r auto: ")]
    assert auto[0] == (
        "-r auto: 16+64 tokens took 3 pairs; 95% interval [1.00, 1.00] spans ±0.0% around the median pair's 1.00x: "
        "within the ±5% target"
    )
    assert auto[1].startswith("-r auto: 16+128 tokens took 4 pairs; 95% interval ")
    assert auto[1].endswith(": the 60 s cap (--auto-cap) came first")
    # Runs that cannot tell the cache from off come first, ahead of how -r auto stopped.
    assert notes[0].endswith("holds 1, so these runs cannot tell whether it is faster than uncached: raise --auto-cap or "
                             "lower --ci-target for more pairs")  # fmt: skip
    reached = _notes_of(((16, 64), [1.0] * 3, [1.0] * 3), repeat="auto")
    assert reached[0].endswith(": lower --ci-target for more pairs")
    capped = _notes_of(((16, 128), [1.0, 2.0, 1.0, 2.0], [1.5] * 4), repeat="auto")
    assert capped[0].endswith(": raise --auto-cap for more pairs")


def test_a_partial_sweep_and_a_stretched_prompt_say_so_in_words() -> None:
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.records import RunFacts
    from kvmagic.results.result import BenchmarkResult

    from .records import pair

    rows = [*pair((40, 64), [2.0] * 3, [1.0] * 3), *pair((40, 128), [4.0] * 3, [1.0] * 3)]
    rows += pair((80, 64), [4.0] * 3, [1.0] * 3)

    def notes(**facts: object) -> list[str]:
        return BenchmarkResult("m", rows, spec=BenchSpec(repeat=3), facts=RunFacts(**facts)).notes()  # type: ignore[arg-type]

    rest = "the rows shown are complete, the rest were not measured"
    assert notes(stopped="out of accelerator memory at 80+128 tokens", configurations=4, natural_prompt_tokens=12,
                 prompt_stretched=True) == [
        f"partial: out of accelerator memory at 80+128 tokens after 3 of 4 configurations; {rest}",
        "to measure the rest: lower -n or -p, or load the model with a smaller --dtype",
        "prompt stretched: the prompt's 12 tokens repeated (or cut) to 40, 80 tokens",
    ]  # fmt: skip
    assert notes(stopped="interrupted") == [f"partial: interrupted after 3 of ? configurations; {rest}"]
    assert notes(natural_prompt_tokens=12) == notes(prompt_stretched=True) == []
    assert notes(model_generation_settings={"temperature": 0.6, "top_p": 0.9}) == [
        "the model ships temperature=0.6, top_p=0.9: turned off here, so its own defaults generate differently"
    ]


def test_a_table_read_back_without_intervals_or_with_empty_notes_shows_as_it_was_written() -> None:
    """A file from before the interval columns has no `speedup_ci_*`; a CSV gives an empty note back as NaN: the
    speed-up stands alone and no footnote is made of nothing, in the short table and in --wide."""
    from kvmagic.results.shown import shown_table, wide_text

    old = _plain(2).drop(columns=["speedup_ci_low", "speedup_ci_high"])
    assert shown_table(old)[0]["speedup"].tolist() == ["2.10", "2.10"]
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.result import BenchmarkResult

    from .records import pair

    rows = [*pair((16, 64), [2.0] * 3, [1.0] * 3), *pair((16, 128), [2.0] * 3, [1.0] * 3)]
    frame = BenchmarkResult("m", rows, spec=BenchSpec(cache=("off", "dynamic"), repeat=3)).to_dataframe()
    frame["note"] = math.nan
    cells, footnotes = shown_table(frame)
    assert "note" not in cells.columns and footnotes == []
    assert "[1]" not in wide_text(frame)


@pytest.mark.parametrize(
    "configs", [((16, 64, 1), (16, 128, 1)), ((16, 64, 1), (32, 64, 1)), ((16, 64, 1), (16, 64, 2))]
)
def test_the_frontier_is_marked_only_where_one_configuration_has_three_strategies_that_ran(configs) -> None:
    """Two strategies at each of two configurations (differing in one size alone) are four rows, but no
    configuration has the three a trade-off needs; a third strategy at one of them has."""
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.result import BenchmarkResult

    from .records import timed

    def table(names: tuple[str, ...]) -> pd.DataFrame:
        rows = [timed(c, name, [s] * 3) for c in configs for name, s in zip(names, (2.0, 1.0, 1.5))]
        result = BenchmarkResult("m", rows, spec=BenchSpec(cache=names, repeat=3), strategies=list(names))
        return _shown(result.to_dataframe())

    assert "pareto" not in table(("off", "dynamic")).columns
    assert "pareto" in table(("off", "dynamic", "static")).columns


def test_the_short_table_right_aligns_each_number_under_its_header_and_wraps_notes_to_its_width() -> None:
    from kvmagic.results.shown import shown_text, wide_text

    lines = shown_text(_plain(2, speedup_ci_low=math.nan)).splitlines()
    assert lines[:2] == [
        "prompt_tokens new_tokens uncached_s cached_s speedup identical kv_cache_mib",
        "           16         64        2.1        1    2.10      True",  # no bytes here: blank
    ]
    note = "a note long enough to wrap at sixty columns but not at a hundred, which is where it would go"
    for text in (shown_text(_plain(1), [note], width=60), wide_text(_plain(1), [note], width=60)):
        assert text.splitlines()[-2:] == [
            "a note long enough to wrap at sixty columns but not at a", "  hundred, which is where it would go",
        ]  # fmt: skip


def test_auto_with_no_pair_yet_advises_a_higher_cap() -> None:
    """Stopped after `off`'s runs alone: its times vary (2, 2, 2.5, 3 s: an IQR of 0.625 s, 28% of the median 2.25 s),
    and there is no pair whose stop to read."""
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.result import BenchmarkResult

    from .records import timed

    result = BenchmarkResult("m", [timed((16, 64), "off", [2.0, 2.5, 3.0, 2.0])], spec=BenchSpec(repeat="auto"))
    assert result.notes() == [
        (
            "warning: times vary (IQR over 10% of the median) for uncached 28%: close other work or raise --auto-cap for "
            "more pairs before trusting the speed-up"
        )
    ]


def test_predicted_rows_left_unmeasured_are_named_unless_the_run_stopped_early() -> None:
    """Predicted at 16+64 (measured), 8+128 and 64+64 (not): the budget left those two out, unless the run was
    cut short anyway (then the partial note says so); the cost model explains the one of most tokens, with its
    bytes and the weights'."""
    from kvmagic.addons.predict.costmodel import CostModel
    from kvmagic.addons.predict.predictions import Predicted, Prediction
    from kvmagic.core.curves import Polynomial
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.records import RunFacts
    from kvmagic.results.result import BenchmarkResult

    from .records import pair

    spec = BenchSpec(repeat=3, max_seconds=30)
    result = BenchmarkResult("m", pair((16, 64), [2.0] * 3, [1.0] * 3), spec=spec)
    longest = Prediction(8, 128, 8.0, 2.0, kv_bytes=2**20)  # the most tokens, though not the longest prompt
    predictions = (Prediction(16, 64, 2.0, 1.0), longest, Prediction(64, 64, 4.0, 1.5))
    cost = CostModel(prefill=Polynomial((1.0, 2.0)), decode=Polynomial((3.0, 0.5)), step_overhead_s=0.25)
    result.addons["predict"] = Predicted(cost, predictions, weight_bytes=2**30)
    notes = result.notes()
    assert notes[0] == (
        "predicted only (measured=False): 8+128 tokens, 64+64 tokens; measuring them would pass the 30 s budget "
        "(--max-seconds)"
    )
    explained = result.cost_model.explain(8, 128, kv_bytes=2**20, weight_bytes=2**30)
    assert notes[1:] == explained != result.cost_model.explain(8, 128, kv_bytes=None, weight_bytes=None)
    assert explained != result.cost_model.explain(8, 128, kv_bytes=2**20, weight_bytes=None)
    result.facts = RunFacts(stopped="interrupted")
    assert not any(note.startswith("predicted only") for note in result.notes())


def test_the_plain_tables_interval_after_auto_is_the_anytime_one_its_pair_gives() -> None:
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.result import BenchmarkResult

    from .records import pair

    rows = pair((16, 64), [2.0, 2.2, 2.1, 2.4, 2.0], [1.0, 1.2, 1.0, 1.1, 1.3])
    result = BenchmarkResult("m", rows, spec=BenchSpec(repeat="auto"))
    (measured,) = result.pairs()
    frame = result.to_dataframe()
    assert (
        measured.sequential and (frame.loc[0, "speedup_ci_low"], frame.loc[0, "speedup_ci_high"]) == measured.interval
    )


def test_a_batchs_cache_tokens_are_each_sequences_positions() -> None:
    """16 bytes a position: 2 x 78 x 16 bytes held for a batch of 2 is room for 78 positions, not 156."""
    from kvmagic.core.kvbytes import KVSizes

    from .records import table_row, timed

    held = timed((100, 4, 2), "dynamic", [0.1], kv_bytes=2 * 78 * 16)
    assert table_row(held, sizes=KVSizes(16, (None,)))["cache_tokens"] == 78


def test_a_note_spells_a_speedup_and_its_interval_as_the_table_does() -> None:
    """The table writes ratios to 3 digits with their trailing zeros: [0.509, 2.00] in its cell is [0.509, 2.00]
    in the note under it, not [0.509, 2]; -r auto's and a slower strategy's notes say theirs the same way."""
    from kvmagic.results.result import BenchmarkResult
    from kvmagic.results.shown import INTERVAL_HEADER, shown_table

    from .records import rounds

    result = BenchmarkResult("m", rounds((8, 4), [(1.0, 0.75), (1.0, 1.0), (1.0, 1.3)]))
    assert shown_table(result.to_dataframe())[0][INTERVAL_HEADER].tolist() == ["1.00 [0.509, 2.00]"]
    assert result.notes()[0].startswith("cached: the 95% interval [0.509, 2.00] holds 1, so these runs cannot tell")
    assert _notes_of(((16, 64), [1.0] * 3, [2.0] * 3)) == [
        "cached: slower than uncached: its 95% interval [0.500, 0.500] lies below 1"
    ]
    assert _notes_of(((16, 64), [1.0] * 3, [1.0] * 3), repeat="auto")[1] == (
        "-r auto: 16+64 tokens took 3 pairs; 95% interval [1.00, 1.00] spans ±0.0% around the median pair's 1.00x: "
        "within the ±5% target"
    )
