"""Which strategy to choose: the trade-off frontier, crossovers checked at a held-out length, the reach in memory,
and the paragraph that says them, on injected timings whose arithmetic is worked out here by hand."""

from __future__ import annotations

import pytest

from kvmagic.addons.choice.reasoning import Choice, choice
from kvmagic.addons.frontier.reach import FitCheck, Frontier, FrontierRow
from kvmagic.core.curves import Polynomial, crossing
from kvmagic.core.pareto import Point, beats, better, on_frontier
from kvmagic.core.quality import Quality
from kvmagic.core.spec import BenchSpec
from kvmagic.core.strategy import DYNAMIC, OFF, REFERENCE, parse, parse_list
from kvmagic.errors import KVMagicError
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.shown import shown_table
from kvmagic.results.verdict import verdict_lines

from .records import pair, timed

# Seconds at a context L (prompt + 8 new tokens) = a + b * L on the three shorter prompts, exactly a line, so each
# fit is that line; at the longest (128 + 8 = 136, held out) the row measured is the third figure instead.
LINES = {
    "off": (0.001, 0.01, 1.5),  # predicts 1.361 at 136
    "dynamic": (0.2, 0.002, 0.45),  # predicts 0.472
    "static": (0.1, 0.0043, 0.44),  # predicts 0.6848
    "quantized:fp8": (0.3, 0.0014, 0.5),  # predicts 0.4904
}
KV = {"off": 0, "dynamic": 1000, "static": 1000, "quantized:fp8": 250}
KL = {"off": 0.0, "dynamic": 0.0, "static": 0.0, "quantized:fp8": 0.002}
PROMPTS = (16, 32, 64, 128)


def _said(found: Choice) -> str:
    """The choice's paragraph as printed (wrapped to the screen), its lines joined again."""
    return " ".join(str(found).split())


def _sweep(prompts=PROMPTS, strategies=tuple(LINES), quality: bool = True, **result) -> BenchmarkResult:
    measurements = []
    for prompt in prompts:
        for name in strategies:
            a, b, held_out = LINES[name]
            seconds = held_out if prompt == 128 else a + b * (prompt + 8)
            judged = Quality(8, 1.0, KL[name], 1.0) if quality else None
            measurements.append(timed((prompt, 8), name, [seconds] * 3, kv_bytes=KV[name], quality=judged))
    return BenchmarkResult(model="tiny", measurements=measurements, spec=BenchSpec(cache=tuple(strategies)),
                           strategies=list(strategies), **result)  # fmt: skip


def test_a_row_is_beaten_only_by_one_no_worse_on_every_figure_and_better_on_one() -> None:
    fast, small, exact = Point(1.0, 100, 0.01), Point(2.0, 50, 0.01), Point(2.0, 100, 0.0)
    assert on_frontier([fast, small, exact]) == [True, True, True]  # each best at one figure
    assert beats(fast, Point(1.5, 100, 0.01)) and not beats(fast, Point(1.0, 100, 0.01))  # a tie beats nothing
    assert on_frontier([fast, Point(1.0, 100, 0.01)]) == [True, True]
    assert beats(Point(1.0, 50, 0.0), fast) and not beats(Point(0.5, 50, 0.02), fast)  # faster, smaller, but lossier
    # bytes within 1% of the larger tie: 8 bytes of bookkeeping a layer is no trade for 3.57x the time
    assert beats(Point(1.0, 1008, 0.0), Point(3.57, 1000, 0.0)) and not beats(
        Point(1.0, 1011, 0.0), Point(3.57, 1000, 0.0)
    )
    assert not beats(Point(1.0, 1000, 0.0), Point(1.0, 1009, 0.0))  # a tie on every figure beats nothing
    # what a beaten row lost, figure by figure: time alone; 8 bytes of 1008 are a tie; an unknown figure is None
    assert better(Point(1.0, 1008, 0.0), Point(3.57, 1000, 0.0)) == (True, False, False)
    assert better(Point(1.0, 0, 0.0), Point(2.0, None, 0.01)) == (True, None, True)


def test_an_unknown_figure_is_not_guessed() -> None:
    unread = Point(2.0, 100, None)
    assert not beats(Point(1.0, 100, 0.001), unread)  # it might have lost nothing: only KL 0 is surely no worse
    assert beats(Point(1.0, 100, 0.0), unread)
    assert not beats(unread, Point(3.0, 100, 0.5))  # it might have lost more: it beats no row whose quality was read
    assert beats(Point(1.0, 100, None), unread)  # two unread tie on quality: speed decides
    assert on_frontier([Point(1.0, 10, None), Point(2.0, 5, None), Point(3.0, 10, None)]) == [True, True, False]


def test_two_curves_cross_at_the_first_whole_length_past_their_root() -> None:
    rising, flat = Polynomial((0.1, 0.01)), Polynomial((0.5,))  # equal at L = 40
    assert crossing(flat, rising, 10, 100) == 41 and crossing(rising, flat, 10, 100) == 41
    assert crossing(flat, rising, 10, 40) is None  # the flip is past the range
    assert crossing(flat, rising, 45, 100) is None  # past the root already: they keep their order
    assert crossing(Polynomial((0.5, 0.0, 0.001)), Polynomial((0.5, 0.02)), 5, 100) == 21  # roots 0 and 20
    assert crossing(Polynomial((1.0, 0.0, 1.0)), Polynomial((0.0, 2.0)), -5, 5) is None  # touch at 1, no flip
    assert crossing(Polynomial((0.3, 0.0014)), Polynomial((0.2, 0.002)), 24, 300) == 167  # root 166.67


def test_the_table_marks_each_configuration_s_trade_off_frontier() -> None:
    table = _sweep().to_dataframe()
    marks = {(p, s): m for p, s, m in zip(table["prompt_tokens"], table["strategy"], table["pareto"])}
    # off holds nothing, so it is on every frontier; the fastest of dynamic and static beats the other (same bytes,
    # KL 0); fp8 holds the fewest bytes among the caches, but off beats it where off is faster (0.241 < 0.3336)
    assert [marks[16, s] for s in LINES] == [True, False, True, False]
    assert [marks[32, s] for s in LINES] == [True, False, True, True]  # static 0.272 < dynamic 0.28
    assert [marks[64, s] for s in LINES] == [True, True, False, True]  # dynamic 0.344 < static 0.4096
    assert [marks[128, s] for s in LINES] == [True, False, True, True]
    shown, _ = shown_table(table)
    assert shown["pareto"].tolist()[:4] == ["True", "False", "True", "False"]


def test_crossovers_are_checked_at_the_held_out_length() -> None:
    found = choice(_sweep())
    assert [(f.fitted, f.checked_at) for f in found.fits] == [((24, 40, 72), 136)] * 4
    errors = [f.error for f in found.fits]
    assert errors == pytest.approx([1.361 / 1.5 - 1, 0.472 / 0.45 - 1, 0.6848 / 0.44 - 1, 0.4904 / 0.5 - 1])
    # off - dynamic = -0.199 + 0.008 L: root 24.875; off - fp8: 0.299 / 0.0086 = 34.77; dynamic - static:
    # 0.1 / 0.0023 = 43.48; fp8 - static: 0.2 / 0.0029 = 68.97; fp8 and dynamic meet at 166.7, past 136
    found_at = [(str(c.overtaker), str(c.overtaken), c.context) for c in found.crossovers]
    assert found_at == [("dynamic", "off", 25), ("quantized:fp8", "off", 35), ("dynamic", "static", 44),
                        ("quantized:fp8", "static", 69)]  # fmt: skip
    ratios = [ratio for c in found.crossovers for ratio in (c.predicted_ratio, c.measured_ratio)]
    assert ratios == pytest.approx([0.472 / 1.361, 0.45 / 1.5, 0.4904 / 1.361, 0.5 / 1.5,
                                    0.472 / 0.6848, 0.45 / 0.44, 0.4904 / 0.6848, 0.5 / 0.44])  # fmt: skip
    assert [c.agrees for c in found.crossovers] == [True, True, False, False]  # static measured faster at 136
    assert found.crossovers[2].error == pytest.approx((0.472 / 0.6848) / (0.45 / 0.44) - 1)  # -32.6%
    assert found.searched == (24, 136)


def test_the_paragraph_says_it_for_the_largest_configuration() -> None:
    result = _sweep()
    text = _said(result.choice())
    # The paragraph is one call away; the notes say the verdict it comes to in a line.
    assert text not in result.notes() and "at 128+8 tokens, choose static: the fastest (3.41x off's speed" in str(
        result
    )
    assert text.startswith("At 128+8 tokens: static is fastest (3.41x off's speed, KL 0); on the trade-off frontier")
    assert (
        "off takes 3.41x as long and holds no cache, KL 0; quantized:fp8 takes 1.14x as long and holds 4.00x less KV, KL 0.002"
        in text
    )
    assert "Off the frontier: dynamic (beaten by static: slower, as good on KV bytes and quality)." in text
    assert "fitted at 24, 40, 72 tokens, checked at 136 (the fits were -9.3% to +55.6% off its rows)" in text
    assert "dynamic overtakes off from 25 tokens (time ratio at 136: predicted 0.347, measured 0.300, +15.6%)" in text
    wrong_way = "dynamic overtakes static from 44 tokens (time ratio at 136: predicted 0.689, measured 1.02, -32.6%"
    assert wrong_way + ", so static was the faster there)" in text
    assert "no other crossover up to 136 tokens. --frontier adds how long a context each holds" in text


def test_the_notes_say_the_crossovers_in_one_line_that_points_to_the_paragraph() -> None:
    assert (
        "crossovers, from fits checked at 136 tokens: dynamic overtakes off from 25 tokens; quantized:fp8 overtakes "
        "off from 35 tokens; dynamic overtakes static from 44 tokens; quantized:fp8 overtakes static from 69 tokens "
        "(result.choice())"
    ) in _sweep().notes()
    assert not [note for note in _sweep(prompts=PROMPTS[1:]).notes() if note.startswith("crossovers")]  # 3 lengths


def _row(strategy: str, max_context: int, limited_by: str = "memory") -> FrontierRow:
    return FrontierRow(strategy, 128, 8, 1, 0.0, 0.0, max(max_context - 128, 0), 0, 1, limited_by)


def test_the_memory_frontier_extends_the_search_and_gives_each_strategy_s_reach() -> None:
    rows = [_row("off", 2048, "positions"), _row("dynamic", 300), _row("static", 500), _row("quantized:fp8", 1200)]
    none = choice(_sweep(addons={"frontier": Frontier([_row(name, 0) for name in LINES], [], 2**20, {})}))
    assert (
        "In the 1 MiB free, the longest context each holds, in tokens: off none, dynamic none, static none, "
        "quantized:fp8 none (predicted, not run: --frontier check runs each there)" in _said(none)
    )
    assert none.searched == (24, 136)  # nothing fits: the crossovers are sought up to the length checked
    check = FitCheck("dynamic", 128, 172, 1, 2**30, predicted_bytes=1000, measured_bytes=1100, tensor_bytes=1020)
    found = choice(_sweep(addons={"frontier": Frontier(rows, [check], 3 * 2**20, {})}))
    assert len(found.crossovers) == 5  # the four within 136, and one more
    late = found.crossovers[-2]  # dynamic and fp8 may cross up to the shorter of their reaches, 300
    assert (str(late.overtaker), str(late.overtaken), late.context) == ("quantized:fp8", "dynamic", 167)
    assert late.agrees and late.error == pytest.approx((0.4904 / 0.472) / (0.5 / 0.45) - 1)
    assert found.searched == (24, 1200)  # the longest pair's range: off's 2048 against fp8's 1200
    text = _said(found)
    assert "no other crossover within each pair's shorter reach (up to 1200 tokens)." in text
    assert (
        "quantized:fp8 takes 1.14x as long and holds 2.40x more context (1200 tokens), KL 0.002" in text
    )  # 1200 / 500
    assert "off takes 3.41x as long and holds no cache, KL 0" in text  # it holds no cache: its reach is not a trade
    assert text.endswith(
        "In the 3 MiB free, the longest context each holds, in tokens: dynamic 300, static 500, quantized:fp8 1200; off "
        "reaches the model's 2048 positions before memory; a run there took tensors of dynamic +2.0% against the "
        "prediction."
    )
    capped = Frontier([_row(name, 2048, "positions") for name in LINES], [check], 2 * 2**30, {})
    assert _said(choice(_sweep(addons={"frontier": capped}))).endswith(
        "In the 2 GiB free, every strategy reaches the model's 2048 positions before memory; a run there took "
        "tensors of dynamic +2.0% against the prediction."  # 1020 / 1000 - 1
    )


def test_without_quality_a_row_leaves_the_frontier_only_on_speed_and_bytes() -> None:
    found = choice(_sweep(quality=False))
    assert found.frontier == list(parse_list("off,static,quantized:fp8"))
    assert found.beaten_by == {DYNAMIC: parse("static")} and found.beaten_by["dynamic"] == parse("static")
    said = _said(found)  # quality read for no row: said once, up front, not after every row
    assert said.startswith("At 128+8 tokens: static is fastest (3.41x off's speed, no row's quality read); ")
    assert "quantized:fp8 takes 1.14x as long and holds 4.00x less KV. " in said and "KL" not in said
    assert "Off the frontier: dynamic (beaten by static: slower, as good on KV bytes)" in said
    assert "Off the frontier: dynamic (beaten by static: slower, as good on KV bytes and quality)" in _said(
        choice(_sweep())
    )


def test_too_few_lengths_or_no_held_out_row_say_so_instead_of_a_crossover() -> None:
    short = _said(choice(_sweep(prompts=(16, 32, 128))))
    assert "Crossovers need a sweep of 4 lengths or more (-p or -n)" in short and "overtakes" not in short
    result = _sweep()
    result.measurements = [m for m in result.measurements if not (str(m.strategy) == "static" and
                                                                  m.config.prompt_tokens == 128)]  # fmt: skip
    found = choice(result)
    assert [str(f.strategy) for f in found.fits] == ["off", "dynamic", "quantized:fp8"]
    assert "no row at 128+8 tokens to check the fit of static: its crossovers not shown" in _said(found)
    assert all("static" not in (str(c.overtaker), str(c.overtaken)) for c in found.crossovers)


def test_two_strategies_or_the_plain_run_have_no_choice_to_make() -> None:
    two = _sweep(strategies=("off", "dynamic"))
    assert verdict_lines(two) == [] and "pareto" not in shown_table(two.to_dataframe())[0].columns
    with pytest.raises(
        KVMagicError,
        match=r"needs 3 strategies measured at 128\+8 tokens, off included; 2 ran there: name more in cache$",
    ):
        two.choice()
    plain = BenchmarkResult(model="tiny", measurements=pair((16, 8), [1.0], [0.5]))
    with pytest.raises(KVMagicError, match=r"needs 3 strategies measured at 16\+8 tokens, off included; 2 ran there"):
        plain.choice()  # the plain run is the comparison off,dynamic: two strategies


def test_bytes_a_hair_apart_tie_and_beside_a_cacheless_fastest_are_said_in_mib() -> None:
    names = ["off", "dynamic", "static"]
    rows = [timed((64, 8), "off", [1.0] * 3, kv_bytes=0), timed((64, 8), "dynamic", [0.5] * 3, kv_bytes=2**20),
            timed((64, 8), "static", [0.4] * 3, kv_bytes=2**20 + 16)]  # fmt: skip
    result = BenchmarkResult("tiny", rows, spec=BenchSpec(cache=tuple(names)), strategies=names)
    # static's 16 bytes more tie with dynamic's; quality unread
    assert "Off the frontier: dynamic (beaten by static: slower, as good on KV bytes)." in _said(result.choice())
    exact = Quality(8, 1.0, 0.0, 1.0)
    result.measurements = [timed((64, 8), "off", [0.3] * 3, kv_bytes=0)] + [
        timed(m.config, m.strategy, m.seconds, kv_bytes=m.kv_bytes, quality=exact) for m in rows[1:]
    ]  # off fastest, its quality unread: it beats neither, whose KL 0 it cannot be said to match
    text = _said(result.choice())
    assert text.startswith(
        "At 64+8 tokens: off is fastest; on the trade-off frontier beside it (pareto in the table), "
    )
    assert "static takes 1.33x as long and holds 1 MiB of KV, KL 0" in text


def test_rows_of_several_models_are_counted_per_model() -> None:
    """Two models' tables side by side, two strategies each at every configuration: no frontier worth marking."""
    import pandas as pd

    two = _sweep(strategies=("off", "dynamic")).to_dataframe()
    both = pd.concat([two.assign(model="a"), two.assign(model="b")], ignore_index=True)
    assert "pareto" not in shown_table(both)[0].columns
    three = _sweep(strategies=("off", "dynamic", "static")).to_dataframe().assign(model="a")
    assert "pareto" in shown_table(pd.concat([three, two.assign(model="b")], ignore_index=True))[0].columns


def test_a_fit_that_falls_to_no_time_predicts_no_crossover() -> None:
    """A noisy sweep's line can slope down: 0.859 - 0.00719 L is 0 at L = 119.5, inside a search up to 136."""
    from kvmagic.core.curves import lowest

    falling, rising = Polynomial((0.859, -0.00719)), Polynomial((0.01, 0.001))
    assert lowest(falling, 24, 136) == pytest.approx(0.859 - 0.00719 * 136)  # -0.1188: at the far end
    assert lowest(Polynomial((1.0, -0.02, 0.0001)), 24, 136) == pytest.approx(0.0)  # its vertex, at L = 100
    assert lowest(rising, 24, 136) == pytest.approx(0.034)
    names = ["off", "dynamic", "static"]
    seconds = {"off": lambda n: 0.859 - 0.00719 * n, "dynamic": lambda n: 0.01 + 0.001 * n,
               "static": lambda n: 0.02 + 0.0009 * n}  # fmt: skip
    # off's times fall (0.686, 0.571, 0.341 s at 24, 40, 72) and would be negative at 136: measured 0.05 there
    rows = [timed((n - 8, 8), s, [seconds[s](n) if n < 136 else 0.05] * 3) for n in (24, 40, 72, 136) for s in names]
    result = BenchmarkResult("tiny", rows, spec=BenchSpec(cache=tuple(names)), strategies=names)
    found = result.choice()
    assert found.falling == (REFERENCE,)
    assert all(REFERENCE not in (c.overtaker, c.overtaken) for c in found.crossovers)
    # the pair of the other two is still searched: static, slower at 24, overtakes dynamic past 0.01 / 0.0001 = 100
    assert [(str(c.overtaker), str(c.overtaken), c.context) for c in found.crossovers] == [("static", "dynamic", 101)]
    assert (
        "; no other crossover up to 136 tokens; the fit of off falls to no time or less within that range, so it "
        "predicts no crossover." in _said(found)
    )


def _at(config: tuple[int, int], figures: dict[str, tuple[float, int | None, float | None]]) -> BenchmarkResult:
    """One configuration's rows: each strategy's (seconds, KV bytes, KL), quality unread where KL is None."""
    rows = [timed(config, name, [seconds] * 3, kv_bytes=kv, quality=None if kl is None else Quality(8, 1.0, kl, 1.0))
            for name, (seconds, kv, kl) in figures.items()]  # fmt: skip
    return BenchmarkResult("tiny", rows, spec=BenchSpec(cache=tuple(figures)), strategies=list(figures))


def _lines(configs, strategies=tuple(LINES), skip=(), lines=LINES) -> BenchmarkResult:
    """Each strategy's LINES time at every configuration (its own line at every length, none held out), less the
    (strategy, prompt) rows in ``skip``."""
    rows = [timed((p, n), name, [lines[name][0] + lines[name][1] * (p + n)] * 3, kv_bytes=KV.get(name, 1000))
            for p, n in configs for name in strategies if (name, p) not in skip]  # fmt: skip
    return BenchmarkResult("tiny", rows, spec=BenchSpec(cache=tuple(strategies)), strategies=list(strategies))


def test_with_no_rows_there_is_no_choice_and_no_note() -> None:
    empty = BenchmarkResult("tiny", [])
    assert verdict_lines(empty) == []
    with pytest.raises(KVMagicError, match=r"^which strategy to choose needs a comparison: cache with two strategies "
                                           r"or more beside off$"):  # fmt: skip
        choice(empty)


def test_the_choice_is_made_at_the_longest_context_not_the_longest_prompt() -> None:
    found = choice(_lines([(64, 8), (32, 64)]))
    assert (found.config.prompt_tokens, found.config.new_tokens) == (32, 64)


def test_a_sweep_of_new_tokens_is_fitted_and_a_tie_goes_to_the_prompt_lengths() -> None:
    by_new = choice(_lines([(16, 8), (16, 16), (16, 32), (16, 64)]))
    assert [(f.fitted, f.checked_at) for f in by_new.fits] == [((24, 32, 48), 80)] * 4
    grid = [(p, 64) for p in (16, 32, 64)] + [(128, n) for n in (8, 16, 32, 64)]  # four lengths each way
    assert choice(_lines(grid)).fits[0].fitted == (80, 96, 128)  # the prompts at 64 new tokens, not 136, 144, 160


def test_a_strategy_missing_a_length_is_not_fitted_and_the_others_still_are() -> None:
    found = choice(_lines([(p, 8) for p in PROMPTS], skip={("dynamic", 64)}))
    assert [str(f.strategy) for f in found.fits] == ["off", "static", "quantized:fp8"]
    five = {**LINES, "offloaded": (0.5, 0.003, 0.0)}
    gone = {("static", 128), ("quantized:fp8", 128)}
    unchecked = choice(_lines([(p, 8) for p in PROMPTS], tuple(five), gone, five))
    assert "no row at 128+8 tokens to check the fit of static, quantized:fp8: its crossovers not shown" in _said(
        unchecked
    )
    alone = choice(_lines([(p, 8) for p in PROMPTS], skip={("off", 16), ("dynamic", 16), ("quantized:fp8", 16)}))
    assert [str(f.strategy) for f in alone.fits] == ["static"] and alone.crossovers == []
    assert (
        "Each strategy's time against the context fitted at 24, 40, 72 tokens, checked at 136 (the fits were +0.0% to "
        "+0.0% off its rows): no strategy overtakes another up to 136 tokens." in _said(alone)
    )


def test_a_sweep_too_short_says_how_many_lengths_a_crossover_needs() -> None:
    assert (
        "Crossovers need a sweep of 4 lengths or more (-p or -n): each strategy's time is fitted on all but the "
        "longest and checked there." in _said(choice(_sweep(prompts=(16, 32, 128))))
    )


def test_the_crossovers_are_said_one_after_another() -> None:
    text = _said(choice(_sweep()))
    assert "+15.6%); quantized:fp8 overtakes off from 35 tokens (time ratio at 136" in text


def test_each_row_beaten_is_named_with_what_beat_it() -> None:
    found = _at((64, 8), {"off": (1.0, 0, None), "dynamic": (0.5, 1000, None), "static": (0.4, 1000, None),
                          "offloaded": (0.6, 1000, None)}).choice()  # fmt: skip
    assert (
        "Off the frontier: dynamic (beaten by static: slower, as good on KV bytes), offloaded (beaten by dynamic: "
        "slower, as good on KV bytes)."
    ) in _said(found)


def test_what_each_row_on_the_frontier_holds_against_the_fastest() -> None:
    found = _at((64, 8), {"off": (2.0, 0, 0.0), "quantized:fp8": (0.4, 1000, 0.002), "dynamic": (0.5, 4000, 0.0),
                          "static": (0.6, 1004, 0.0)}).choice()  # fmt: skip
    assert _said(found).startswith(
        "At 64+8 tokens: quantized:fp8 is fastest (5.00x off's speed, KL 0.002); on the trade-off frontier beside it "
        "(pareto in the table), off takes 5.00x as long and holds no cache, KL 0; dynamic takes 1.25x as long and holds 4.00x "
        "more KV, KL 0; static takes 1.50x as long and holds 4 bytes more KV, KL 0. "  # 1004 / 1000 would read 1.00x
    )
    same = _at((64, 8), {"off": (60.0, 0, 0.0), "quantized:fp8": (0.4, 1000, 0.002), "offloaded": (0.8, 1000, 0.0),
                         "dynamic": (0.5, None, 0.0)}).choice()  # fmt: skip
    assert _said(same).startswith(
        "At 64+8 tokens: quantized:fp8 is fastest (150x off's speed, KL 0.002); on the trade-off frontier beside it "
        "(pareto in the table), off takes 150x as long and holds no cache, KL 0; offloaded takes 2.00x as long and holds as much "
        "KV, KL 0; dynamic takes 1.25x as long, its KV not counted, KL 0. "
    )


def test_a_reach_is_compared_only_where_both_strategies_have_one() -> None:
    figures = {"off": (1.0, 0, 0.0), "dynamic": (0.5, 1000, 0.0), "quantized:fp8": (0.6, 250, 0.002),
               "static": (0.55, 500, 0.001)}  # fmt: skip
    result = _at((64, 8), figures)
    result.addons["frontier"] = Frontier([_row("dynamic", 1000), _row("quantized:fp8", 500)], [], 2**30, {})
    text = _said(result.choice())
    assert "quantized:fp8 takes 1.20x as long and holds 2.00x less context (500 tokens), KL 0.002" in text
    assert "static takes 1.10x as long and holds 2.00x less KV, KL 0.001" in text  # no reach of its own: its bytes
    assert "off takes 2.00x as long and holds no cache, KL 0" in text
    result.addons["frontier"] = Frontier([_row("quantized:fp8", 500)], [], 2**30, {})  # the fastest's own reach unknown
    assert "quantized:fp8 takes 1.20x as long and holds 4.00x less KV, KL 0.002" in _said(result.choice())


def test_the_reach_in_a_gib_names_every_strategy_the_positions_cap_and_every_check() -> None:
    rows = [_row("off", 2048, "positions"), _row("dynamic", 2048, "positions"), _row("static", 500),
            _row("quantized:fp8", 1200)]  # fmt: skip
    checks = [FitCheck("dynamic", 128, 172, 1, 2**30, predicted_bytes=1000, measured_bytes=1100, tensor_bytes=1020),
              FitCheck("static", 128, 372, 1, 2**30, predicted_bytes=1000, measured_bytes=900, tensor_bytes=950)]  # fmt: skip
    text = _said(choice(_sweep(addons={"frontier": Frontier(rows, checks, 2**30, {})})))
    assert text.endswith(
        "In the 1 GiB free, the longest context each holds, in tokens: static 500, quantized:fp8 1200; off, dynamic "
        "reach the model's 2048 positions before memory; a run there took tensors of dynamic +2.0%, static -5.0% "
        "against the prediction."
    )
    assert "In the 1.5 GiB free" in _said(choice(_sweep(addons={"frontier": Frontier(rows, checks, 3 * 2**29, {})})))


def test_two_fits_that_fall_are_both_named() -> None:
    names = ["off", "dynamic", "static"]
    seconds = {"off": lambda n: 0.859 - 0.00719 * n, "dynamic": lambda n: 0.9 - 0.007 * n,
               "static": lambda n: 0.02 + 0.0009 * n}  # fmt: skip
    rows = [timed((n - 8, 8), s, [seconds[s](n) if n < 136 else 0.05] * 3) for n in (24, 40, 72, 136) for s in names]
    found = BenchmarkResult("tiny", rows, spec=BenchSpec(cache=tuple(names)), strategies=names).choice()
    assert found.falling == (OFF, DYNAMIC) and found.crossovers == []
    assert (
        "off its rows): no strategy overtakes another up to 136 tokens; the fit of off, dynamic falls to no time or "
        "less within that range, so it predicts no crossover." in _said(found)
    )


def test_a_beaten_row_is_said_to_lose_only_on_what_it_loses() -> None:
    """dynamic beats each: static only on speed (1004 bytes tie with 1000), offloaded only on bytes, quanto only on
    KL, fp8 on all three; the words name the figures lost and call the rest a tie."""
    found = _at((64, 8), {"off": (2.0, 0, 0.0), "dynamic": (0.5, 1000, 0.0), "static": (0.6, 1004, 0.0),
                          "offloaded": (0.5, 2000, 0.0), "quantized:quanto": (0.5, 1000, 0.01),
                          "quantized:fp8": (0.7, 2000, 0.02)}).choice()  # fmt: skip
    assert found.beaten_by == dict.fromkeys(parse_list("static,offloaded,quantized:quanto,quantized:fp8"), DYNAMIC)
    assert (
        "Off the frontier: static (beaten by dynamic: slower, as good on KV bytes and quality), offloaded (beaten by "
        "dynamic: more KV bytes, speed within noise, as good on quality), quantized:quanto (beaten by dynamic: lower "
        "quality, speed within noise, as good on KV bytes), quantized:fp8 (beaten by dynamic: slower, more KV bytes, "
        "lower quality)."
    ) in _said(found)
    assert "at once" not in _said(found)


def test_a_figure_not_read_is_said_so_beside_what_the_row_lost() -> None:
    """off holds no cache and lost nothing: it beats a slower row whose bytes were not counted, on speed alone."""
    found = _at((64, 8), {"off": (0.4, 0, 0.0), "dynamic": (0.5, None, 0.0), "static": (0.6, 1000, 0.0)}).choice()
    assert found.beaten_by == {DYNAMIC: OFF, parse("static"): OFF}
    assert (
        "Off the frontier: dynamic (beaten by off: slower, as good on quality, KV bytes not counted), static (beaten "
        "by off: slower, more KV bytes, as good on quality)."
    ) in _said(found)


def _rounds(times: dict[str, list[float]]) -> BenchmarkResult:
    """Rows at 64+8 tokens from their rounds (round i of each ran side by side), bytes and KL alike but off's."""
    rows = [timed((64, 8), name, seconds, kv_bytes=0 if name == "off" else 1000, quality=Quality(8, 1.0, 0.0, 1.0))
            for name, seconds in times.items()]  # fmt: skip
    return BenchmarkResult(model="tiny", measurements=rows, spec=BenchSpec(cache=tuple(times), repeat=5),
                           strategies=list(times))  # fmt: skip


def test_a_row_whose_time_the_rounds_cannot_tell_from_the_fastest_is_said_to_be_within_noise() -> None:
    """static's per-round ratios to dynamic (1.2, 0.9, 1.1, 0.95, 1.05) straddle 1, so their 95% interval (here
    the lowest and highest of 5 pairs) holds it: the rounds cannot say which is faster. off is 4x slower every
    round: apart."""
    dynamic = [0.50, 0.50, 0.50, 0.50, 0.50]
    found = _rounds({"off": [2.0] * 5, "dynamic": dynamic, "static": [0.60, 0.45, 0.55, 0.475, 0.525]}).choice()
    assert found.close == {frozenset((DYNAMIC, parse("static")))}
    said = _said(found)
    assert said.startswith("At 64+8 tokens: dynamic has the fastest median (4.00x off's speed, KL 0), but the rounds "
                           "cannot tell static from it; ")  # fmt: skip
    # Times within noise tie: static, as good on KV bytes and quality, is not beaten, and stays on the frontier.
    assert "static takes 1.05x as long (within noise) and holds as much KV, KL 0." in said and "beaten" not in said
    assert found.frontier == list(parse_list("off,dynamic,static"))
    assert _rounds({"off": [2.0] * 5, "dynamic": dynamic, "static": [0.60, 0.45, 0.55, 0.475, 0.525]}).to_dataframe()[
        "pareto"
    ].tolist() == [True, True, True]
    apart = _rounds({"off": [2.0] * 5, "dynamic": dynamic, "static": [0.60, 0.55, 0.65, 0.575, 0.625]}).choice()
    assert apart.close == frozenset() and "noise" not in _said(apart)
    # Rows within noise of off are not beaten by it, nor it by them: whether those caches pay is open.
    three = _rounds({"off": [0.5, 0.5, 0.5], "dynamic": [0.5] * 3, "static": [0.45, 0.55, 0.5]}).choice()
    assert three.beaten_by == {} and three.frontier == list(parse_list("off,dynamic,static"))
    assert _said(three).startswith("At 64+8 tokens: off has the fastest median, but the rounds cannot tell dynamic and "
                                   "static from it; on the trade-off frontier beside it")  # fmt: skip
    assert "beaten" not in _said(three)
    # The fastest median within noise of off stays on the frontier; a row told apart from off as slower is beaten.
    noisy = _rounds({"off": [0.6, 0.4, 0.55, 0.45, 0.5], "dynamic": [0.45] * 5, "static": [0.9] * 5}).choice()
    assert noisy.fastest == DYNAMIC and noisy.beaten_by == {parse("static"): OFF}
    assert _said(noisy).startswith("At 64+8 tokens: dynamic has the fastest median (1.11x off's speed, KL 0), but the "
                                   "rounds cannot tell off from it; on the trade-off frontier beside it (pareto in the "
                                   "table), off takes 1.11x as long (within noise) and holds no cache, KL 0. Off the "
                                   "frontier: static (beaten by off: slower, more KV bytes, as good on quality)")  # fmt: skip
    # One round has no interval: it cannot tell any two rows apart, so none leaves the frontier on speed.
    one = _rounds({"off": [2.0], "dynamic": [0.5], "static": [0.6]}).choice()
    assert one.close == {frozenset(parse_list(pair)) for pair in ("off,dynamic", "off,static", "dynamic,static")}
    assert one.beaten_by == {} and "cannot tell off and static from it" in _said(one)
