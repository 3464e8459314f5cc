"""What ``--compare`` says, checked against its rows: the verdict line and the table's ``saved -> now`` cells.

The property draws random pairs of runs (one to three configurations on each side, some only on one, one to five
rounds a side, speed-ups that hold, move a little or move a lot), prints the comparison, parses its verdict and
checks every number and every word against the rows: a row is said to have risen or fallen only where its
``significant`` says so and in the direction its figures go, the figures are the table's, and every row within
noise or beyond telling is counted.
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvmagic.addons.baseline.compare import compare
from kvmagic.core.config import Config
from kvmagic.results.columns import cell
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.shown import COMPARED_HEADER, shown_table

from .records import rounds

_LENGTHS = (8, 16, 32)


@st.composite
def _run(draw: st.DrawFn) -> BenchmarkResult:
    """A plain run: a few configurations, each with its rounds of (uncached, cached) seconds."""
    count = draw(st.integers(min_value=1, max_value=5))
    found = []
    for new_tokens in draw(st.lists(st.sampled_from(_LENGTHS), min_size=1, max_size=3, unique=True)):
        speedup = draw(st.sampled_from([1.5, 2.0, 2.1, 4.0]))
        noise = draw(st.sampled_from([0.0, 0.02, 0.4]))
        times = [(speedup * (1 + noise * draw(st.floats(-1, 1))), 1.0) for _ in range(count)]
        found += rounds((8, new_tokens), times)
    return BenchmarkResult("tiny", found)


def _check(now: BenchmarkResult, was: BenchmarkResult) -> str:
    comparison = compare(now, was, "base.json")
    rows = comparison.rows()
    line = comparison.notes()[0]
    assert line == comparison.verdict()
    matched = [row for row in rows if not math.isnan(row["speedup_was"])]
    if not matched:
        assert line == "against base.json: no row matches a saved one, so nothing is compared"
        return line
    head = re.match(r"against base\.json \((\d+(?:-\d+)?) rounds? saved, (\d+(?:-\d+)?) now\): (.*)$", line)
    assert head is not None, line
    for side, said in ((was, head.group(1)), (now, head.group(2))):
        counts = sorted({len(side.pair(Config.of(row)).rounds) for row in matched})  # type: ignore[union-attr]
        assert said == (str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"), line
    parts = head.group(3).split("; ")
    by_config = {Config.of(row): row for row in matched}
    told = {"rose": 0, "fell": 0, "within": 0, "unknown": 0}
    for part in parts:
        moving = re.match(r"the speed-up (rose|fell) beyond noise at (.*?)(?:, and (\d+) more)?$", part)
        single = re.match(r"the speed-up moved (\S+) -> (\S+) \(([+-]\d+)%\), within noise$", part)
        if moving:
            items = re.findall(r"(\d+)\+(\d+) tokens (\S+) -> (\S+) \(([+-]\d+)%\)", moving.group(2))
            told[moving.group(1)] += len(items) + int(moving.group(3) or 0)
            for prompt, new, saved, measured, change in items:
                row = by_config[Config(int(prompt), int(new))]
                assert row["significant"] is True, line
                assert (row["speedup"] > row["speedup_was"]) == (moving.group(1) == "rose"), line
                assert (saved, measured) == (cell("speedup")(row["speedup_was"]), cell("speedup")(row["speedup"]))
                assert change == f"{row['speedup_change']:+.0%}"[:-1], line
        elif single:
            assert len(matched) == 1 and matched[0]["significant"] is False, line
            assert single.group(1) == cell("speedup")(matched[0]["speedup_was"])
            assert single.group(2) == cell("speedup")(matched[0]["speedup"])
            told["within"] += 1
        elif within := re.match(
            r"(?:(\d+) other rows? within noise|no speed-up changed beyond noise \((\d+) rows?\))$", part
        ):
            assert part.startswith("no") == (told["rose"] + told["fell"] == 0), line
            told["within"] += int(within.group(1) or within.group(2))
        else:
            unknown = re.match(r"(\d+) rows? timed in one round on a side, which cannot tell a change from noise: "
                               r"time both runs with -r 2 or more$", part)  # fmt: skip
            assert unknown is not None, f"{part!r} is no sentence the verdict may say: {line}"
            told["unknown"] += int(unknown.group(1))
    rose = [r for r in matched if r["significant"] is True and r["speedup"] > r["speedup_was"]]
    fell = [r for r in matched if r["significant"] is True and r["speedup"] <= r["speedup_was"]]
    within_rows = [r for r in matched if r["significant"] is False]
    unknown_rows = [r for r in matched if r["significant"] is None]
    assert told == {"rose": len(rose), "fell": len(fell), "within": len(within_rows), "unknown": len(unknown_rows)}
    return line


@settings(max_examples=300, derandomize=True, deadline=None)
@given(_run(), _run())
def test_every_word_and_figure_of_the_verdict_holds_against_the_rows(
    now: BenchmarkResult, was: BenchmarkResult
) -> None:
    _check(now, was)
    frame = compare(now, was).to_dataframe()
    cells = shown_table(frame)[0][COMPARED_HEADER].tolist()
    for text, (_, row) in zip(cells, frame.iterrows()):
        if math.isnan(row["speedup_was"]):
            assert text == f"none -> {cell('speedup')(row['speedup'])}"
        else:
            assert text.split()[:3] == [cell("speedup")(row["speedup_was"]), "->", cell("speedup")(row["speedup"])]


def test_the_verdict_reads_as_a_user_acts_on_it() -> None:
    """By hand: a fall beyond noise named with both figures, one row within noise counted, one beyond telling."""
    was = BenchmarkResult("tiny", [*rounds((8, 8), [(3.0, 1.0), (3.1, 1.0), (2.9, 1.0)]),
                                   *rounds((8, 16), [(2.0, 1.0), (2.2, 1.0), (2.1, 1.0)]),
                                   *rounds((8, 32), [(2.0, 1.0)])])  # fmt: skip
    now = BenchmarkResult("tiny", [*rounds((8, 8), [(2.0, 1.0), (2.1, 1.0), (1.9, 1.0)]),
                                   *rounds((8, 16), [(2.1, 1.0), (2.0, 1.0), (2.2, 1.0)]),
                                   *rounds((8, 32), [(2.0, 1.0), (2.1, 1.0), (2.0, 1.0)])])  # fmt: skip
    assert compare(now, was, "before.json").verdict() == (
        "against before.json (1-3 rounds saved, 3 now): the speed-up fell beyond noise at 8+8 tokens 3.00 -> 2.00 "
        "(-33%); 1 other row within noise; 1 row timed in one round on a side, which cannot tell a change from "
        "noise: time both runs with -r 2 or more"
    )
    assert compare(now, now).verdict() == (
        "against the saved run (3 rounds saved, 3 now): no speed-up changed beyond noise (3 rows)"
    )


@pytest.mark.parametrize("threshold", ["speedup:-100%", "speedup:-500%", "cached_s:-150%"])
def test_a_threshold_that_can_never_be_crossed_is_refused(threshold: str) -> None:
    from kvmagic.addons.baseline.gate import parse_fail_on
    from kvmagic.errors import KVMagicError

    with pytest.raises(KVMagicError) as caught:
        parse_fail_on(threshold)
    metric = threshold.split(":")[0]
    assert caught.value.spelled(lambda name: f"--{name.replace('_', '-')}") == (
        f"--fail-on {threshold!r} can never fail: {metric} cannot fall by 100% or more; write a fall under 100%, "
        f"e.g. {metric}:-5%"
    )
    assert parse_fail_on("speedup:-99%")[0].change == pytest.approx(-0.99)  # a fall short of all of it can happen
