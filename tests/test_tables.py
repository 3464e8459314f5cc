"""The columns and notes that --tp, a reused prefix, --frontier and --limits add, on injected measurements whose
figures are worked out here by hand: a wrong key, a wrong side, a wrong unit or a wrong word would show in them."""

from __future__ import annotations

import dataclasses
import math

import pytest

from kvmagic.addons.frontier.frontier_table import FRONTIER_COLUMNS, frontier_notes, frontier_table
from kvmagic.addons.frontier.reach import FitCheck, Frontier, FrontierRow
from kvmagic.addons.limits.bounds import Hardware, Limits, StrategyLimit
from kvmagic.addons.limits.limits_table import Bounds, limits_notes
from kvmagic.addons.prefix.prefix_table import prefix_notes, prefix_values
from kvmagic.addons.split.split_records import Ranks, Split
from kvmagic.addons.split.split_table import split_notes
from kvmagic.core.config import Config
from kvmagic.core.spec import BenchSpec
from kvmagic.results.report import STRATEGY_COLUMNS, added
from kvmagic.results.result import BenchmarkResult

from .records import pair, timed

MIB = 2**20


def _ranks(kv: tuple[int, ...], comm: tuple[float, ...], tokens: tuple[str, ...] = ("a", "a")) -> Ranks:
    return Ranks(kv, comm, 0.5, 24, tokens)


def _split(*rows: tuple[tuple[int, int], Ranks, Ranks]) -> BenchmarkResult:
    measurements = []
    for config, off, dynamic in rows:
        measurements += pair(config, [0.4], [0.2], off={"addons": {"split": off}, "kv_bytes": 0},
                             dynamic={"addons": {"split": dynamic}, "kv_bytes": sum(dynamic.kv_bytes)})  # fmt: skip
    return BenchmarkResult("tiny", measurements, addons={"split": Split("gloo", ("cpu (x)", "cpu (x)"))})


def _values(result: BenchmarkResult, option: str, row: int = 0, strategy: str = "") -> dict[str, object]:
    """What ``option`` added to a row of the result's table: the plain run's ``row``, or ``strategy``'s row."""
    frame = result.to_dataframe()
    if strategy:
        return frame.set_index("strategy").loc[strategy, list(added(option).rows)].to_dict()
    return frame.iloc[row][list(added(option).pair)].to_dict()


def test_a_split_row_takes_the_slowest_rank_s_collectives_and_the_fullest_rank_s_cache() -> None:
    result = _split(((10, 4), _ranks((0, 0), (0.2, 0.3)), _ranks((2 * MIB, 3 * MIB), (0.1, 0.05))))
    values = _values(result, "--tp")
    assert values == {
        "ranks": 2,
        "kv_rank_mib": 3.0,  # the fuller rank's, in MiB
        "uncached_comm_ms": pytest.approx(1e3 * 0.3 / 4),  # per generated token
        "cached_comm_ms": pytest.approx(1e3 * 0.1 / 4),
        "uncached_comm_share": pytest.approx(0.3 / 0.5),
        "cached_comm_share": pytest.approx(0.1 / 0.5),
        "ranks_identical": True,
    }
    names = ["off", "dynamic", "static"]  # static did not run; off ran unsplit
    rows = [timed((10, 4), "off", [0.4]), *result.measurements[1:]]
    compared = BenchmarkResult("tiny", rows, spec=BenchSpec(cache=tuple(names)), strategies=names,
                               skipped={"static": "x"}, addons=result.addons)  # fmt: skip
    unsplit = _values(compared, "--tp", strategy="static")
    assert unsplit.pop("ranks_identical") is None and set(unsplit) == {"ranks", "kv_rank_mib", "comm_ms", "comm_share"}
    assert all(math.isnan(value) for value in unsplit.values())  # type: ignore[arg-type]
    assert _values(compared, "--tp", strategy="off")["ranks_identical"] is None  # a row run unsplit
    assert split_notes(BenchmarkResult("tiny", pair((10, 4), [0.4], [0.2]))) == []
    assert split_notes(result)[0] == (
        "split over 2 ranks by tensor parallelism (gloo, cpu); times are the slowest rank's; every rank generated the "
        "same tokens"
    )


def test_the_split_note_reads_the_longest_context_and_names_each_rank_that_differed() -> None:
    short_prompt_long_run = _ranks((MIB, 2 * MIB), (0.08, 0.04))  # 4+16: 20 tokens, the longest context
    result = _split(
        ((10, 4), _ranks((0, 0), (0.2, 0.3)), _ranks((2 * MIB, 3 * MIB), (0.1, 0.05))),
        ((4, 16), _ranks((0, 0), (0.4, 0.1), ("a", "b", "b")), short_prompt_long_run),
    )
    assert _values(result, "--tp", 0)["ranks_identical"] and not _values(result, "--tp", 1)["ranks_identical"]
    notes = split_notes(result)
    assert notes[0] == "split over 2 ranks by tensor parallelism (gloo, cpu); times are the slowest rank's"
    assert notes[1] == (
        "4+16 tokens: collectives took 80% of an uncached run (25 ms per step) and 16% of a cached one (5 ms per "
        "step); the KV cache is 2 MiB per rank, 3 MiB in all"
    )
    assert notes[2:] == ["4+16 tokens: rank 1, 2 generated other tokens than rank 0 (off)"]


def _warm(warm_s: float, ttft_s: float, ids: tuple[int, ...] = (1, 2), configs=((64, 8),)) -> BenchmarkResult:
    names = ["off", "dynamic", "dynamic+prefix"]
    rows = []
    for config in configs:
        rows += [timed(config, "off", [2.0], ttft_s=0.5, generated_ids=(1, 2)),
                 timed(config, "dynamic", [1.0], ttft_s=0.2, generated_ids=(1, 2)),
                 timed(config, "dynamic+prefix", [warm_s], ttft_s=ttft_s, generated_ids=ids)]  # fmt: skip
    return BenchmarkResult("tiny", rows, spec=BenchSpec(cache=tuple(names)), strategies=names,
                           addons={"prefix": 48})  # fmt: skip


def test_a_warm_twin_is_set_against_its_cold_self_and_a_cold_row_reused_nothing() -> None:
    result = _warm(0.8, 0.05)
    warm, cold = result.measurement("dynamic+prefix"), result.measurement("dynamic")
    assert prefix_values(result, warm) == {"reused_tokens": 48, "warm_speedup": pytest.approx(1.25),
                                           "warm_ttft_speedup": pytest.approx(4.0), "same_as_cold": True}  # fmt: skip
    empty = prefix_values(result, cold)
    assert (empty["reused_tokens"], empty["same_as_cold"]) == (0, None)
    assert math.isnan(empty["warm_speedup"]) and math.isnan(empty["warm_ttft_speedup"])
    missing = prefix_values(result, None)
    assert math.isnan(missing["reused_tokens"]) and missing["same_as_cold"] is None
    assert prefix_notes(result) == [
        (
            "prefix: the prompt's first 48 tokens reused: each warm run starts from a copy of their cache, built once, "
            "untimed; dynamic+prefix reached its first token in 0.05 s against 0.2 s cold (4.00x faster), the whole run "
            "1.25x faster, with the same tokens"
        )
    ]
    assert prefix_notes(BenchmarkResult("tiny", pair((64, 8), [2.0], [1.0]))) == []


def test_a_warm_twin_slower_untimed_or_with_other_tokens_says_so_per_configuration() -> None:
    result = _warm(1.0, 0.0, ids=(1, 3), configs=((64, 8), (32, 8)))
    warm = result.measurement("dynamic+prefix", Config(64, 8))
    assert (
        math.isnan(prefix_values(result, warm)["warm_ttft_speedup"]) and not prefix_values(result, warm)["same_as_cold"]
    )
    notes = prefix_notes(result)
    assert len(notes) == 2 and notes[1].startswith("32+8 tokens: the prompt's first 48 tokens reused")
    assert notes[1].endswith(
        "0 s against 0.2 s cold (not timed), the whole run 1.00x: about as fast, with other tokens than cold"
    )
    slower = prefix_notes(_warm(1.6, 0.1))[0]
    assert "(2.00x faster), the whole run 1.60x slower, with the same tokens" in slower


def test_two_warm_twins_at_one_configuration_are_said_one_after_the_other() -> None:
    names = ["off", "dynamic", "dynamic+prefix", "offloaded", "offloaded+prefix"]
    rows = [timed((64, 8), name, [seconds], ttft_s=0.2, generated_ids=(1, 2))
            for name, seconds in zip(names, (2.0, 1.0, 0.5, 1.2, 0.4))]  # fmt: skip
    result = BenchmarkResult("tiny", rows, spec=BenchSpec(cache=tuple(names)), strategies=names,
                             addons={"prefix": 48})  # fmt: skip
    assert prefix_notes(result)[0].endswith(
        "the whole run 2.00x faster, with the same tokens; offloaded+prefix reached its first token in 0.2 s against "
        "0.2 s cold (1.00x: about as fast), the whole run 3.00x faster, with the same tokens"
    )


def test_a_warm_twins_columns_follow_those_of_a_split_model_and_of_the_limits() -> None:
    """A comparison measured split, or with its limits, shows those columns first and the warm twins' last, as it
    did before ``--prefix`` was an add-on: its place in the registry keeps them there."""
    result = _warm(0.8, 0.05)
    warm = list(added("--prefix").rows)
    split = dataclasses.replace(result, addons={**result.addons, "split": Split("gloo", ("cpu (x)", "cpu (y)"))})
    assert list(split.to_dataframe().columns) == [*STRATEGY_COLUMNS, *added("--tp").rows, *warm]
    limited = dataclasses.replace(result, addons={**result.addons, "limits": Bounds(None, ())})
    assert list(limited.to_dataframe().columns) == [*STRATEGY_COLUMNS, *added("--limits").rows, *warm]


def _row(strategy: str, max_new: int, limited_by: str = "memory") -> FrontierRow:
    return FrontierRow(strategy, 128, 8, 1, 4096.0, 3 * MIB, max_new, 100, 7, limited_by)


def test_the_frontier_table_has_a_row_per_strategy_with_its_check_beside_it() -> None:
    check = FitCheck("dynamic", 128, 200, 1, 2**30, predicted_bytes=MIB, measured_bytes=2 * MIB, tensor_bytes=MIB / 2)
    result = BenchmarkResult("tiny", pair((128, 8), [2.0], [1.0]))
    assert frontier_table(result).columns.tolist() == list(FRONTIER_COLUMNS) and frontier_table(result).empty
    result.addons["frontier"] = Frontier([_row("off", 72), _row("dynamic", 200, "positions")], [check], 2**30, {})
    table = frontier_table(result)
    assert table.columns.tolist() == list(FRONTIER_COLUMNS) and table["strategy"].tolist() == ["uncached", "cached"]
    assert table["peak_mib"].tolist() == [3.0, 3.0] and table["max_context"].tolist() == [200, 328]
    assert table["max_batch"].tolist() == [7, 7] and table["limited_by"].tolist() == ["memory", "positions"]
    assert math.isnan(table["checked_peak_mib"][0]) and table["checked_peak_mib"][1] == 0.5
    assert math.isnan(table["check_error"][0]) and table["check_error"][1] == pytest.approx(-0.5)
    assert table["fitted"].tolist() == [None, True]


def test_the_frontier_notes_say_each_reach_each_check_and_each_check_left_out() -> None:
    fits = FitCheck("dynamic", 128, 200, 1, 2**30, predicted_bytes=MIB, measured_bytes=2 * MIB, tensor_bytes=MIB / 2)
    over = FitCheck("off", 128, 72, 1, MIB, predicted_bytes=MIB, measured_bytes=1.5 * MIB, tensor_bytes=1.25 * MIB)
    result = BenchmarkResult("tiny", pair((128, 8), [2.0], [1.0]))
    assert frontier_notes(result) == []
    result.addons["frontier"] = Frontier([_row("off", 72), _row("dynamic", 200, "positions")], [fits, over], 3 * 2**29,
                               {"off": 12.5})  # fmt: skip
    assert frontier_notes(result) == [
        (
            "frontier (1.5 GiB free, around 128+8 tokens): uncached holds up to 200 tokens of context and a batch of 7; "
            "cached holds up to 328 tokens of context and a batch of 7 (the model's positions come first)"
        ),
        "frontier check, uncached: not run, it would take about 12.5 s, past max_seconds",
        (
            "frontier check, cached at 128+200 tokens: fitted in 1 GiB; its tensors took -50.0% against the prediction, "
            "and the device's peak was 2 MiB (on a CPU, the whole process's growth)"
        ),
        (
            "frontier check, uncached at 128+72 tokens: did not fit in 0.000977 GiB; its tensors took +25.0% against the "
            "prediction, and the device's peak was 1.5 MiB (on a CPU, the whole process's growth)"
        ),
    ]
    result.addons["frontier"] = Frontier([_row("off", 72, "positions")], [], 2**30, {})  # one strategy's frontier
    assert frontier_notes(result) == [
        (
            "frontier (1 GiB free, around 128+8 tokens): uncached holds up to 200 tokens of context and a batch of 7 (the "
            "model's positions come first)"
        )
    ]


def _bound(seconds: float, governs: str = "memory") -> StrategyLimit:
    return StrategyLimit(seconds, seconds / 8, seconds, seconds / 4, governs, 8)  # 7 tokens in 7/8 of the time


def _limits(config: tuple[int, int, int], weights_share: float = 0.75) -> Limits:
    return Limits(*config, _bound(0.8), _bound(0.2), None, weights_share)


def _bounds(hardware: Hardware | None, config: tuple[int, int, int]) -> dict[str, Bounds]:
    """What ``--limits`` kept of a run: the hardware probed and one configuration's bound."""
    return {"limits": Bounds(hardware, (_limits(config),))}


def test_the_limit_columns_count_every_sequence_and_take_each_side_s_bound() -> None:
    result = BenchmarkResult("tiny", pair((64, 8, 2), [1.6], [0.25]), addons=_bounds(None, (64, 8, 2)))
    values = _values(result, "--limits")
    assert values == {
        "uncached_limit_tok_s": pytest.approx(2 * 7 / 0.7),
        "cached_limit_tok_s": pytest.approx(2 * 7 / 0.175),
        "uncached_of_limit": pytest.approx(0.5),
        "cached_of_limit": pytest.approx(0.8),
        "limit_speedup": pytest.approx(4.0),
    }
    unbounded = BenchmarkResult("tiny", result.measurements, addons=_bounds(None, (16, 8, 2)))  # not this configuration
    assert all(math.isnan(value) for value in _values(unbounded, "--limits").values())  # type: ignore[arg-type]
    names = ["off", "dynamic", "quantized:fp8", "dynamic+prefix", "static"]
    rows = [*result.measurements, *(timed((64, 8, 2), name, [0.25]) for name in names[2:4])]
    compared = BenchmarkResult("tiny", rows, spec=BenchSpec(cache=tuple(names)), strategies=names,
                               skipped={"static": "x"}, addons=result.addons)  # fmt: skip
    assert _values(compared, "--limits", strategy="off") == {"limit_tok_s": pytest.approx(20.0),
                                                            "of_limit": pytest.approx(0.5)}  # fmt: skip
    assert _values(compared, "--limits", strategy="dynamic")["limit_tok_s"] == pytest.approx(80.0)
    assert all(math.isnan(v) for v in _values(compared, "--limits", strategy="static").values())  # type: ignore[arg-type]
    # a quantized cache moves fewer bytes than the bound counts, a warm twin computes less: neither has a bound
    for name in ("quantized:fp8", "dynamic+prefix"):
        unbound = _values(compared, "--limits", strategy=name)
        assert all(math.isnan(value) for value in unbound.values()), name  # type: ignore[arg-type]


def test_the_limits_note_reads_the_longest_context_against_the_hardware() -> None:
    rows = pair((64, 8), [1.6], [0.4]) + pair((16, 64), [3.2], [0.4])
    hardware = Hardware(1e11, 1e13, "cpu (x)")
    result = BenchmarkResult(
        "tiny", rows, addons={"limits": Bounds(hardware, (_limits((64, 8, 1), 0.25), _limits((16, 64, 1))))}
    )
    assert (
        limits_notes(BenchmarkResult("tiny", rows, addons={"limits": Bounds(None, result.addons["limits"].limits)}))
        == []
    )  # no hardware probed: no note
    (note,) = limits_notes(result)
    assert note.startswith(f"limits ({hardware.describe()}), at 16+64 tokens: cached decode is memory-bound")
    assert "cached runs at 50% of what memory bandwidth allows and uncached runs at 25%" in note
    assert "a smaller dtype would help most" in note  # 16+64's own bound (weights 75% of the bytes), not 64+8's
    result.addons["limits"] = Bounds(
        hardware, (_limits((64, 8, 1), 0.25),)
    )  # the longest configuration has no bound: the longest that has
    (note,) = limits_notes(result)
    assert note.startswith(f"limits ({hardware.describe()}), at 64+8 tokens:") and "a quantized cache would" in note


def test_the_prefix_note_spells_its_seconds_and_ratios_as_the_table_does() -> None:
    """The table writes seconds to 4 significant digits and ratios to 3: 0.005103 s, not 0.0051 s; 0.2 / 0.005103
    = 39.19 as 39.2x."""
    note = prefix_notes(_warm(0.8, 0.005103))[0]
    assert "reached its first token in 0.005103 s against 0.2 s cold (39.2x faster), the whole run 1.25x faster" in note


def test_a_warm_twin_within_rounding_or_noise_of_its_cold_self_is_about_as_fast() -> None:
    """0.998x reads 1.00x either way up, so neither faster nor slower; nor is 1.05x whose pairs' 95% interval
    holds 1 (their warm-over-cold ratios 1.25, 1.05, 0.833)."""
    rounded = prefix_notes(_warm(1.002, 0.2))[0]
    assert rounded.endswith("(1.00x: about as fast), the whole run 0.998x: about as fast, with the same tokens")
    names = ["off", "dynamic", "dynamic+prefix"]
    rows = [timed((64, 8), "off", [2.0] * 3, ttft_s=0.5), timed((64, 8), "dynamic", [1.0] * 3, ttft_s=0.2),
            timed((64, 8), "dynamic+prefix", [0.8, 0.95, 1.2], ttft_s=0.1)]  # fmt: skip
    noisy = BenchmarkResult("tiny", rows, spec=BenchSpec(cache=tuple(names)), strategies=names,
                            addons={"prefix": 48})  # fmt: skip
    assert (
        "(2.00x faster), the whole run 1.05x: about as fast (its 95% interval [0.622, 1.71] holds 1), with"
        in (prefix_notes(noisy)[0])
    )
    noisy.measurements[-1] = timed((64, 8), "dynamic+prefix", [0.5, 0.55, 0.6], ttft_s=0.1)  # [1.45, 2.29]
    assert "(2.00x faster), the whole run 1.82x faster, with" in prefix_notes(noisy)[0]


def test_the_limits_speed_up_is_not_a_ceiling_on_the_measured_one() -> None:
    """At 16+64 both limits hold 0.8 s uncached and 0.2 s cached: 4.00x; measured 3.2 / 0.4 = 8.00x, above it,
    since the cached run reaches 0.2 / 0.4 = 50% of its limit and the uncached 0.8 / 3.2 = 25%: 4 x 50 / 25 = 8."""
    rows = pair((64, 8), [1.6], [0.4]) + pair((16, 64), [3.2], [0.4])
    result = BenchmarkResult("tiny", rows, addons=_bounds(Hardware(1e11, 1e13, "cpu (x)"), (16, 64, 1)))
    (note,) = limits_notes(result)
    assert note.endswith(
        "; with each at its limit, the speed-up would be 4.00x (limit_speedup), a ratio of two least times, not a "
        "ceiling: the measured 8.00x is that times cached's share of its limit over uncached's (50% / 25%)"
    )
    assert "allow" not in note.split("; ")[-1]
    names = ["off", "dynamic", "static"]
    compared = BenchmarkResult("tiny", [*rows[2:], timed((16, 64), "static", [0.5])], addons=result.addons,
                               spec=BenchSpec(cache=tuple(names)), strategies=names)  # fmt: skip
    (note,) = limits_notes(compared)  # each row's of_limit says its share: no measured speed-up to set beside it
    assert note.endswith(
        "; with each at its limit, the speed-up would be 4.00x, a ratio of two least times, not a ceiling on the "
        "measured one"
    )
