"""A speed-up with no interval says why in one line, and a sweep whose times break the order of its work, or a
run several times its siblings, says the machine's load likely changed: measured times injected by hand."""

from __future__ import annotations

from kvmagic.core.spec import BenchSpec
from kvmagic.results.caution import LOAD, caution_notes
from kvmagic.results.result import BenchmarkResult

from .records import pair, timed


def _notes(measurements, **spec) -> list[str]:
    return caution_notes(BenchmarkResult("m", measurements, spec=BenchSpec(**spec)))


def test_one_pair_says_it_has_no_interval_and_how_to_get_one() -> None:
    assert _notes(pair((16, 64), [2.0], [1.0])) == [
        "one pair: no interval (on a busy machine, a rerun may differ widely); -r 3 gives one"
    ]
    assert _notes(pair((16, 64), [2.0, 2.1], [1.0, 1.1]), repeat=2)[0].startswith("2 pairs: no interval")


def test_three_pairs_and_auto_need_no_such_note() -> None:
    assert _notes(pair((16, 64), [2.0, 2.1, 2.2], [1.0, 1.1, 1.0]), repeat=3) == []
    assert _notes(pair((16, 64), [2.0, 2.1, 2.2, 2.0, 2.1], [1.0] * 5), repeat="auto") == []


def test_a_sweep_whose_time_falls_as_its_work_grows_is_named() -> None:
    """The report's sweep: uncached 8.93, 9.04, 5.91 s at -n 16, 32, 64; cached in order."""
    measured = [*pair((82, 16), [8.93], [1.0]), *pair((82, 32), [9.04], [1.5]), *pair((82, 64), [5.91], [2.0])]
    (note,) = _notes(measured)[1:]
    assert note == (
        f"uncached took 5.91 s at 82+64 tokens, less than 8.93 s at 82+16 tokens with less work: {LOAD}; "
        "close other work and rerun, or use --threads 1"
    )


def test_a_small_dip_or_a_shorter_prompt_with_more_tokens_is_no_sign() -> None:
    dip = [*pair((82, 16), [1.0], [0.5]), *pair((82, 32), [0.85], [0.45])]  # within noise: 15% less
    crossed = [*pair((256, 16), [4.0], [0.5]), *pair((16, 64), [1.0], [0.6])]  # neither has all the work of the other
    batches = [*pair((16, 16, 4), [4.0], [1.0]), *pair((16, 64), [1.0], [0.4])]  # a batch is other work
    jitter = [*pair((82, 2), [0.04], [0.01]), *pair((82, 3), [0.02], [0.01])]  # milliseconds: the scheduler's
    assert [_notes(m)[1:] for m in (dip, crossed, batches, jitter)] == [[], [], [], []]


def test_a_run_several_times_its_siblings_is_named_once_for_all() -> None:
    measured = [timed((16, 64), "off", [1.0, 1.1, 3.5]), timed((16, 64), "dynamic", [0.2, 0.7, 0.2])]
    assert _notes(measured, repeat=3) == [
        f"a run took several times its siblings' median: uncached (3.3x), cached (3.5x): {LOAD}; the medians keep it out"
    ]
    assert _notes([timed((16, 64), "off", [1.0, 2.9, 1.1]), timed((16, 64), "dynamic", [0.01, 0.04, 0.01])]) == []
    exactly = [timed((16, 64), "off", [1.0, 3.0, 1.0]), timed((16, 64), "dynamic", [0.5] * 3)]
    assert _notes(exactly) == []  # 3x its siblings is not past 3x
    swept = [timed((16, 64), "off", [1.0, 1.0, 4.0]), timed((16, 128), "off", [2.0, 2.0, 2.0])]
    assert _notes(swept, repeat=3) == [
        f"a run took several times its siblings' median: uncached at 16+64 tokens (4.0x): {LOAD}; the medians keep it out"
    ]  # several configurations: the one it was at


def test_the_notes_reach_the_table() -> None:
    result = BenchmarkResult("m", pair((16, 64), [2.0], [1.0]))
    assert "one pair: no interval" in str(result)


def test_auto_with_two_pairs_and_an_empty_result_say_nothing_of_an_interval() -> None:
    """-r auto sets its own number of pairs; a result with no runs has no pair to speak of (and must not fail)."""
    assert _notes(pair((16, 64), [2.0, 2.1], [1.0, 1.1]), repeat="auto") == []
    assert _notes([]) == []


def test_the_out_of_order_note_at_its_two_boundaries() -> None:
    """50 ms of less work is long enough to read; exactly 80% of its time for more work is not yet a sign."""
    at_jitter = [*pair((82, 16), [0.05], [0.01]), *pair((82, 32), [0.03], [0.01])]
    (note,) = _notes(at_jitter)[1:]
    assert note == (
        f"uncached took 0.03 s at 82+32 tokens, less than 0.05 s at 82+16 tokens with less work: {LOAD}; "
        "close other work and rerun, or use --threads 1"
    )
    at_share = [*pair((82, 16), [1.0], [0.5]), *pair((82, 32), [0.8], [0.5])]
    assert _notes(at_share)[1:] == []


def test_a_slow_runs_siblings_are_every_other_run() -> None:
    """3.5 s against siblings 1.0, 1.2, 1.1 (median 1.1): 3.2x, not 3.0x as it would read without its neighbour."""
    measured = [timed((16, 64), "off", [3.5, 1.0, 1.2, 1.1]), timed((16, 64), "dynamic", [0.5] * 4)]
    assert _notes(measured, repeat=4) == [
        f"a run took several times its siblings' median: uncached (3.2x): {LOAD}; the medians keep it out"
    ]


def test_a_slow_run_of_exactly_50_ms_is_long_enough_to_name() -> None:
    measured = [timed((16, 64), "off", [0.01, 0.05, 0.01]), timed((16, 64), "dynamic", [0.01] * 3)]
    assert _notes(measured, repeat=3) == [
        f"a run took several times its siblings' median: uncached (5.0x): {LOAD}; the medians keep it out"
    ]


def test_a_longer_prompt_with_as_many_new_tokens_is_more_work() -> None:
    measured = [*pair((82, 16), [2.0], [0.5]), *pair((164, 16), [1.0], [0.5])]
    (note,) = _notes(measured)[1:]
    assert note == (
        f"uncached took 1 s at 164+16 tokens, less than 2 s at 82+16 tokens with less work: {LOAD}; "
        "close other work and rerun, or use --threads 1"
    )


def test_the_out_of_order_note_spells_its_seconds_as_the_table_does() -> None:
    """The table writes seconds to 4 significant digits: 5.912 s there is 5.912 s in the note, not 5.91."""
    from kvmagic.results.shown import shown_table

    measured = [*pair((82, 16), [8.934], [1.0]), *pair((82, 64), [5.912], [2.0])]
    assert shown_table(BenchmarkResult("m", measured).to_dataframe())[0]["uncached_s"].tolist() == ["8.934", "5.912"]
    (note,) = _notes(measured)[1:]
    assert note.startswith("uncached took 5.912 s at 82+64 tokens, less than 8.934 s at 82+16 tokens with less work")
