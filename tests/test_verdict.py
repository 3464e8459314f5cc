"""The verdict under a comparison: at most two lines, each word and number checked against the rows it speaks of.

The property below draws random comparisons (three to five strategies, one to six rounds, times, KV bytes and
quality), prints what kvmagic says of them, parses every verdict line and checks each claim against an oracle
computed here from the rows: which rows the rounds tell apart (their per-round ratio's 95% interval, taken as
the table takes it, leaves out 1), which are slower, which hold the least KV at no loss.
"""

from __future__ import annotations

import math
import re
import statistics

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvmagic.core.intervals import rounds_to_tell, speedup_interval, too_wide
from kvmagic.core.quality import Quality
from kvmagic.core.spec import BenchSpec
from kvmagic.results.columns import cell
from kvmagic.results.display import to_html
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.shown import NOTE_LINES, brief, shown_table, shown_text
from kvmagic.results.verdict import verdict, verdict_lines

from .records import timed

CONFIG = (64, 8)
NAMES = ("off", "dynamic", "static", "quantized:quanto", "quantized:fp8")


def _result(rows: dict[str, tuple[list[float], int, float | None]]) -> BenchmarkResult:
    """One configuration's rows: each strategy's (seconds per round, KV bytes, KL or None where quality was not
    read)."""
    measurements = [
        timed(CONFIG, name, seconds, kv_bytes=kv, quality=None if kl is None else Quality(8, 1.0 - kl, kl, 1.0 + kl))
        for name, (seconds, kv, kl) in rows.items()
    ]
    return BenchmarkResult("tiny", measurements, spec=BenchSpec(cache=tuple(rows), repeat=3), strategies=list(rows))


# The oracle: what the rounds tell, from the rows alone.


def _apart(a: list[float], b: list[float]) -> bool | None:
    """The rounds tell a from b: their per-round ratio's 95% interval leaves out 1; None without an interval."""
    found = speedup_interval(a, b) if len(a) == len(b) else None
    return None if found is None else not found[0] <= 1 <= found[1]


def _names(text: str) -> list[str]:
    """Strategy names in a list as the verdict writes it: ``a``, ``a and b``, ``a, b and c``."""
    return [name.strip() for name in re.split(r",| and ", text) if name.strip()]


def _check(rows: dict[str, tuple[list[float], int, float | None]]) -> list[str]:
    """Every claim of the verdict about ``rows``, checked; returns the lines it printed."""
    result = _result(rows)
    lines = verdict_lines(result)
    assert 1 <= len(lines) <= 2
    median = {name: statistics.median(seconds) for name, (seconds, _, _) in rows.items()}
    first = min(rows, key=lambda name: median[name])
    rounds = len(rows[first][0])
    said = " ".join(lines)
    for word in re.findall(r"[a-z]+(?::[a-z0-9]+)+|\b(?:off|dynamic|static)\b", said):
        assert word in rows, f"{word} is named but has no row: {said}"
    assert "beaten" not in said and "fastest: off," not in said.replace("fastest: off;", "")
    time = lines[0]
    if rounds < 3:  # the table shows no interval below 3 rounds: neither do the words
        few = "one round" if rounds == 1 else "2 rounds"
        assert time == f"{few} cannot rank these strategies: -r 3 or more gives each an interval"
        return lines
    told = {name: _apart(rows[name][0], rows[first][0]) for name in rows if name != first}
    group = [first, *(name for name, apart in told.items() if not apart)]
    slower = [name for name, apart in told.items() if apart]
    found = re.search(r"; ([^;]+) slower than (\S+)$", time)
    chosen = re.match(r"choose (\S+): the fastest \((\S+)x off's speed", time)
    # Choosing one, or calling off the fastest, says every other row is slower.
    assert (found is not None) == bool(slower and not chosen and not time.startswith("fastest: off;")), time
    if found:
        assert sorted(_names(found.group(1))) == sorted(slower) and found.group(2) == first
        assert all(median[name] > median[first] for name in slower)
    fastest = re.match(r"fastest: (.+?)(?: \(|;|$)", time)
    untold = re.match(r"the rounds cannot tell (.+?) from off yet \((?:about -r (\d+) would|their times may)", time)
    if chosen:
        assert group == [chosen.group(1)] and chosen.group(1) != "off"
        assert chosen.group(2) == cell("speedup")(median["off"] / median[first])
        kv = {
            n: rows[n][1] for n in rows if n != "off" and (rows[n][2] == 0 or all(r[2] is None for r in rows.values()))
        }
        assert rows[first][1] <= min(kv.values()) * 1.01 + 0.01
    elif untold:
        assert "off" in group
        for name in _names(untold.group(1)):
            assert name in group and name != "off" and not _apart(rows[name][0], rows["off"][0])
        if untold.group(2):
            assert int(untold.group(2)) > rounds
    elif fastest and fastest.group(1) != "off":
        assert sorted(_names(fastest.group(1))) == sorted(group) and "off" not in group
        if len(group) == 1:
            ratio = re.search(r"\((\S+)x off's speed", time)
            assert ratio is not None and ratio.group(1) == cell("speedup")(median["off"] / median[first])
    else:
        assert time.startswith("fastest: off; every cache strategy") and group == ["off"]
    for line in [*lines[1:], lines[0]]:
        least = re.search(r"least KV at no quality loss: (.+?) \((\S+) MiB\)", line)
        if least:
            kept = {n: rows[n][1] for n in rows if n != "off" and rows[n][2] == 0}
            named = _names(least.group(1))
            assert all(rows[n][2] == 0 for n in named)
            assert min(kept.values()) in {rows[n][1] for n in named}
            assert least.group(2) == cell("kv_cache_mib")(min(kept.values()) / 2**20)
        lossy = re.search(r"less at a loss: (\S+), (\S+)x less KV at KL (\S+)", line)
        if lossy:
            name = lossy.group(1)
            assert rows[name][2] not in (None, 0)
            kept = min(rows[n][1] for n in rows if n != "off" and rows[n][2] == 0)
            assert rows[name][1] < kept and lossy.group(3) == cell("kl_nats")(rows[name][2])
            assert rows[name][1] == min(rows[n][1] for n in rows if rows[n][2] not in (None, 0))
    return lines


_times = st.floats(min_value=0.05, max_value=5.0, allow_nan=False)


@st.composite
def _rows(draw: st.DrawFn) -> dict[str, tuple[list[float], int, float | None]]:
    count = draw(st.integers(min_value=3, max_value=5))
    rounds = draw(st.integers(min_value=1, max_value=6))
    read = draw(st.booleans())
    rows = {}
    for name in NAMES[:count]:
        centre = draw(_times)
        noise = draw(st.sampled_from([0.0, 0.02, 0.3]))
        seconds = [centre * (1 + noise * draw(st.floats(min_value=-1, max_value=1))) for _ in range(rounds)]
        kv = 0 if name == "off" else draw(st.sampled_from([250, 1000, 1004, 4000]))
        kl = 0.0 if name in ("off", "dynamic", "static") else draw(st.sampled_from([0.0, 0.002, 0.05]))
        rows[name] = (seconds, kv, kl if read else None)
    return rows


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_rows())
def test_every_claim_of_the_verdict_holds_against_the_rows(rows) -> None:
    _check(rows)


@settings(max_examples=100, derandomize=True, deadline=None)
@given(_rows(), st.floats(min_value=0.01, max_value=100.0))
def test_scaling_every_time_or_reordering_the_rows_leaves_the_verdict_the_same(rows, factor) -> None:
    scaled = {name: ([s * factor for s in seconds], kv, kl) for name, (seconds, kv, kl) in rows.items()}
    before, after = verdict(_result(rows)), verdict(_result(scaled))
    assert before is not None and after is not None
    assert (before.fastest, before.slower, before.least_lossless, before.least_lossy) == (
        after.fastest, after.slower, after.least_lossless, after.least_lossy
    )  # fmt: skip
    flipped = verdict(_result(dict(reversed(list(rows.items())))))
    assert flipped is not None
    assert set(flipped.fastest) == set(before.fastest) and set(flipped.slower) == set(before.slower)
    assert set(flipped.least_lossless) == set(before.least_lossless) and flipped.least_lossy == before.least_lossy


def test_a_row_the_rounds_cannot_tell_from_off_is_never_said_beaten_by_it() -> None:
    """The issue's case: dynamic at 3.17 [0.572, 34.8], said to be 'beaten by off'. Rows within noise of off stay
    on the frontier, the verdict says the rounds cannot tell them from off yet, and how many rounds would."""
    rows = {"off": ([1.0, 0.3, 2.0], 0, 0.0), "dynamic": ([0.3, 0.5, 0.2], 1000, 0.0),
            "static": ([0.4, 0.45, 0.18], 1004, 0.0)}  # fmt: skip
    result = _result(rows)
    assert result.to_dataframe()["pareto"].tolist() == [True, True, True]
    assert "pareto" not in shown_table(result.to_dataframe())[0].columns  # it separates no rows here
    line = _check(rows)[0]
    needed = rounds_to_tell(rows["dynamic"][0], rows["off"][0])
    assert line == f"the rounds cannot tell dynamic and static from off yet (about -r {needed} would, from this spread)"
    assert "beaten by off" not in " ".join(str(result.choice()).split())


def test_the_rounds_said_to_be_needed_tell_every_pair_apart_not_only_the_easiest() -> None:
    """Two rows within noise of off, one needing more rounds to be told from it than the other: the count said is
    the larger, which tells both apart (the smaller would leave one of them untold)."""
    rows = {"off": ([1.0, 0.3, 2.0], 0, 0.0), "dynamic": ([0.3, 0.5, 0.2], 1000, 0.0),
            "static": ([0.5, 0.35, 1.2], 1004, 0.0)}  # fmt: skip
    each = [rounds_to_tell(rows[name][0], rows["off"][0]) for name in ("dynamic", "static")]
    assert None not in each and len(set(each)) == 2  # the two pairs need different counts
    line = _check(rows)[0]
    assert f"(about -r {max(n for n in each if n is not None)} would, from this spread)" in line


def test_the_fastest_alone_and_lossless_with_the_least_kv_is_the_one_to_choose() -> None:
    rows = {"off": ([2.0, 2.1, 1.9], 0, 0.0), "dynamic": ([0.5, 0.52, 0.48], 1000, 0.0),
            "static": ([0.8, 0.83, 0.79], 1000, 0.0), "quantized:quanto": ([0.9, 0.92, 0.91], 250, 0.01)}  # fmt: skip
    lines = _check(rows)
    assert lines == [
        "choose dynamic: the fastest (4.00x off's speed [3.90, 4.10]) and the least KV at no quality loss",
        (
            "least KV at no quality loss: dynamic and static (0.0009537 MiB); less at a loss: quantized:quanto, 4.00x "
            "less KV at KL 0.01 from dynamic"
        ),
    ]


def test_rows_the_rounds_cannot_tell_apart_are_named_together_and_never_ranked() -> None:
    rows = {"off": ([2.0, 2.1, 1.9, 2.0], 0, 0.0), "dynamic": ([0.5, 0.6, 0.45, 0.55], 1000, 0.0),
            "static": ([0.52, 0.5, 0.55, 0.5], 1000, 0.0)}  # fmt: skip
    (time, memory) = _check(rows)
    assert time.startswith("fastest: static and dynamic (")  # static's median first
    assert time.endswith("x off's speed); the rounds cannot tell them apart (their times may be the same: no -r up to "
                         "100 would tell, from this spread); off slower than static")  # fmt: skip
    assert "choose" not in time
    assert memory == "least KV at no quality loss: dynamic and static (0.0009537 MiB)"


def test_one_round_ranks_nothing_and_no_quality_says_so() -> None:
    rows = {"off": ([2.0], 0, None), "dynamic": ([0.5], 1000, None), "static": ([0.6], 1000, None)}
    assert _check(rows) == [
        "one round cannot rank these strategies: -r 3 or more gives each an interval",
        "least KV: dynamic and static (0.0009537 MiB); quality not read",
    ]
    assert _result(rows).choice().beaten_by == {}


def test_two_strategies_have_no_verdict_and_a_sweep_names_its_configuration() -> None:
    assert verdict_lines(_result({"off": ([1.0] * 3, 0, None), "dynamic": ([0.5] * 3, 1000, None)})) == []
    rows = [timed(config, name, [seconds * config[0] / 16] * 3, kv_bytes=kv)
            for config in ((16, 8), (64, 8)) for name, seconds, kv in (("off", 1.0, 0), ("dynamic", 0.5, 10),
                                                                        ("static", 0.7, 10))]  # fmt: skip
    sweep = BenchmarkResult("tiny", rows, spec=BenchSpec(cache=("off", "dynamic", "static")),
                            strategies=["off", "dynamic", "static"])  # fmt: skip
    assert verdict_lines(sweep) == [("at 64+8 tokens, choose dynamic: the fastest (2.00x off's speed [2.00, 2.00]) and "
                                    "the least KV")]  # fmt: skip


def test_quality_is_judged_against_the_full_cache_by_the_name_the_table_gives_it() -> None:
    """No dynamic row: the notes say 'the full cache', never a row that is not there."""
    rows = {"off": ([2.0] * 3, 0, 0.0), "quantized:quanto": ([0.9] * 3, 250, 0.01),
            "quantized:fp8": ([0.8] * 3, 500, 0.002)}  # fmt: skip
    notes = " ".join(_result(rows).notes())
    assert "dynamic" not in notes and "against the full cache" in notes
    assert "no cache kept the full cache's predictions" in notes
    rows["dynamic"] = ([0.7] * 3, 1000, 0.0)
    assert "quality: against dynamic," in " ".join(_result(rows).notes())


def test_the_shown_table_keeps_three_lines_of_notes_the_most_important_first() -> None:
    notes = ["first " * 30, "second " * 30, "third", "fourth", "fifth"]
    kept, left = brief(notes)
    assert kept == ["first " * 30, "third"] and left == ["second " * 30, "fourth", "fifth"]
    assert brief(notes[2:]) == (notes[2:], [])  # three that fit need no count of the rest
    assert brief(["long " * 80, "short"]) == (["long " * 80], ["short"])  # the first is kept, however long
    rows = {"off": ([1.0, 0.3, 2.0], 0, 0.0), "dynamic": ([0.3, 0.5, 0.2], 1000, 0.0),
            "static": ([0.4, 0.45, 0.18], 1004, 0.0)}  # fmt: skip
    result = _result(rows)
    text = shown_text(result.to_dataframe(), result.notes())
    under = text.splitlines()[1 + len(rows) :]
    assert len(under) <= NOTE_LINES and under[0].startswith("the rounds cannot tell dynamic and static from off")
    kept, left = brief(result.notes())
    assert kept[0] == verdict_lines(result)[0] and len(left) > 1
    assert under[-1].endswith(f" (+{len(left)} notes: --wide or .notes())")
    page = to_html(result.to_dataframe(), {}, result.notes())
    assert page.count("<p>") == len(result.notes()) and f"<summary>{len(left)} more notes</summary>" in page


def test_an_interval_too_wide_to_mean_anything_replaces_its_figure() -> None:
    rows = {"off": ([0.02, 1.0, 0.05], 0, 0.0), "dynamic": ([0.9, 0.01, 0.03], 1000, 0.0),
            "static": ([0.5, 0.5, 0.5], 1000, 0.0)}  # fmt: skip
    cells = shown_table(_result(rows).to_dataframe())[0]
    low, high = speedup_interval(rows["off"][0], rows["dynamic"][0]) or (math.nan, math.nan)
    assert too_wide(low, high) and not too_wide(1.0, 10.0) and too_wide(1.0, 10.01)
    assert cells["speedup [95% CI]"].tolist()[1].startswith("too few rounds [")


def test_the_choice_wraps_to_the_screen_and_shows_itself_in_a_notebook() -> None:
    rows = {"off": ([2.0] * 3, 0, 0.0), "dynamic": ([0.5] * 3, 1000, 0.0), "static": ([0.6] * 3, 1000, 0.0)}
    found = _result(rows).choice()
    assert all(len(line) <= 100 for line in str(found).splitlines()) and len(str(found).splitlines()) > 1
    assert found._repr_html_().startswith("<p>At 64+8 tokens: dynamic is fastest")


@pytest.mark.parametrize("rounds", [2, 3, 5])
def test_more_rounds_are_said_only_where_they_would_tell(rounds: int) -> None:
    same = [1.0] * rounds
    assert rounds_to_tell(same, same) is None  # equal times: no count of rounds tells them apart
    apart = [1.0 + 0.01 * (i % 2) for i in range(rounds)]
    needed = rounds_to_tell(apart, [0.5] * rounds)
    assert needed is None or needed > rounds


_CELLS = (
    "-n 16 -w 1 -r 3 --cache off,dynamic,static",
    "-n 8 -w 1 -r 3 --cache off,quantized:quanto,static",
    "-n 8 -w 1 -r 3 --cache off,quantized:fp8,dynamic",
    "-n 4 -w 1 -r 3",
)


@pytest.mark.parametrize("line", _CELLS)
def test_a_real_cell_prints_its_table_and_at_most_three_lines_that_agree_with_it(shell, line: str) -> None:
    """The issue's cells on tiny, through the magic: the table, then three lines at most, in text and in HTML; the
    verdict's claims hold against the rows measured (the oracle above)."""
    table = shell.run_cell_magic("kvbench", line + " -v found", "The KV cache stores each token's keys")
    result = shell.user_ns["found"]
    cells, footnotes = shown_table(result.to_dataframe())
    rows = len(cells)  # a strategy that could not run here keeps its row, with its footnote
    under = [line for line in repr(table).splitlines()[1 + rows :] if not line.startswith(("[", "    "))]
    assert len(under) <= NOTE_LINES, under  # the footnotes to the rows' marks are the table's
    kept, left = brief(result.notes())
    page = table._repr_html_()
    assert page.count("<p>") == len(result.notes()) + len(footnotes) and ("more note" in page) == bool(left)
    if len(result.strategies) > 2:
        measured = {str(m.strategy): m for m in result.measurements}
        found = {name: (list(m.seconds), m.kv_bytes or 0, m.quality.kl_nats if m.quality else None)
                 for name, m in measured.items()}  # fmt: skip
        if len(found) > 2 and all(found[name][1] or name == "off" for name in found):  # fp8 may not run here
            assert _check(found) == verdict_lines(result) and kept[0] == verdict_lines(result)[0]
