"""The sweep's pure parts: the length grammar, prompt stretching of ids, and --predict's budget."""

from __future__ import annotations

import pytest

from kvmagic import KVMagicError
from kvmagic.addons.predict.budget import plan_within_budget, round_seconds
from kvmagic.addons.predict.costmodel import CostModel
from kvmagic.core.config import Config
from kvmagic.core.curves import Polynomial
from kvmagic.core.deadline import format_seconds
from kvmagic.core.lengths import LENGTH_FORMS, MAX_LENGTHS, configurations, parse_lengths, stretch_ids


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("64", [64]),
        ("16,64,256", [16, 64, 256]),
        (" 16, 64 ", [16, 64]),
        ("16-256*4", [16, 64, 256]),
        ("16-200*4", [16, 64]),  # the end appears only when a step lands on it, as in llama-bench
        ("32-128+32", [32, 64, 96, 128]),
        ("8-8+1", [8]),
        ("1-4+1,2,16-32*2", [1, 2, 3, 4, 16, 32]),  # lists of ranges; duplicates dropped, order kept
        ("256,16", [256, 16]),
    ],
)
def test_parse_lengths_accepts_lists_and_ranges(text: str, expected: list[int]) -> None:
    assert parse_lengths(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", f"cannot read '' as lengths: write {LENGTH_FORMS}"),
        ("16,", f"cannot read '' in '16,' as lengths: write {LENGTH_FORMS}"),
        ("16-", f"cannot read '16-' as lengths: write {LENGTH_FORMS}"),
        ("16-64", "the range '16-64' needs a step: e.g. 16-64*2 (doubling) or 16-64+16 (adding)"),
        ("16-8", "the range '16-8' ends below its start and needs a step: e.g. 8-16*2 (doubling) or 8-16+8 (adding)"),
        ("8-8", "the range '8-8' needs a step: e.g. 8-8*2 (doubling) or 8-8+8 (adding)"),  # an end equal to its start
        ("4,0-8", "the range '0-8' needs a step: e.g. 0-8*2 (doubling) or 0-8+1 (adding)"),
        ("16-64/2", f"cannot read '16-64/2' as lengths: write {LENGTH_FORMS}"),
        ("-4", f"cannot read '-4' as lengths: write {LENGTH_FORMS}"),
        ("1.5", f"cannot read '1.5' as lengths: write {LENGTH_FORMS}"),
        ("abc", f"cannot read 'abc' as lengths: write {LENGTH_FORMS}"),
        ("64-16*2", "the range '64-16*2' ends below its start: write the smaller length first"),
        ("16-64*1", "the range '16-64*1' never grows: multiply a start >= 1 by a factor >= 2"),
        ("0-64*2", "the range '0-64*2' never grows: multiply a start >= 1 by a factor >= 2"),
        ("16-64+0", "the range '16-64+0' never grows: add a step >= 1"),
        ("0,16", "lengths must be >= 1, got 0 in '0,16'"),
        ("1-100000+1", f"'1-100000+1' gives more than {MAX_LENGTHS} lengths: use a coarser range"),
    ],
)
def test_parse_lengths_refuses_with_the_accepted_forms(text: str, message: str) -> None:
    with pytest.raises(KVMagicError) as caught:
        parse_lengths(text)
    assert str(caught.value) == message


def test_configurations_are_the_cross_product_prompt_outermost() -> None:
    assert configurations([8, 32], [4, 16]) == [(8, 4, 1), (8, 16, 1), (32, 4, 1), (32, 16, 1)]


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (7, [1, 10, 11, 12, 10, 11, 2]),  # repeated, cut mid-copy, specials kept at the ends
        (5, [1, 10, 11, 12, 2]),  # the text's own length: unchanged
        (3, [1, 10, 2]),  # cut
    ],
)
def test_stretch_ids_gives_exact_counts(tokens: int, expected: list[int]) -> None:
    assert stretch_ids([1], [10, 11, 12], [2], tokens) == expected


def test_stretch_ids_refuses_a_length_with_no_room_for_text() -> None:
    with pytest.raises(KVMagicError) as caught:
        stretch_ids([1], [10], [2], 2)
    assert str(caught.value) == (
        "a prompt of 2 tokens leaves no room for text next to the tokenizer's 2 special tokens: raise prompt_tokens to 3 or more"
    )


def test_stretch_ids_refuses_a_prompt_of_special_tokens_only() -> None:
    with pytest.raises(KVMagicError) as caught:
        stretch_ids([1], [], [2], 5)
    assert str(caught.value) == "the prompt has no text tokens to repeat: write some text in it"


# F(L) = 0.5 + 0.01 L, D = 0.51: at 10 + 4 tokens, uncached 0.6 + 0.61 + 0.62 + 0.63 = 2.46 s and cached
# 0.6 + 3 * 0.51 = 2.13 s, a pair 4.59 s; a 2-token warm-up pair (1.21 + 1.11) 2.32 s.
COST = CostModel(prefill=Polynomial((0.5, 0.01)), decode=Polynomial((0.51,)))


def test_a_round_counts_one_generate_per_strategy() -> None:
    # --cache off,dynamic,static: one uncached (2.46 s) and two cached (2.13 s each) generates per round
    three = (False, True, True)
    assert round_seconds(COST, 10, 4, caches=three) == pytest.approx(6.72)
    assert plan_within_budget(COST, [Config(10, 4)], repeat=1, warmup_tokens=0, max_seconds=5, caches=three) == [False]
    assert plan_within_budget(COST, [Config(10, 4)], repeat=1, warmup_tokens=0, max_seconds=5) == [True]


def test_plan_skips_what_passes_the_budget_and_keeps_later_cheaper_rows() -> None:
    configs = [
        Config(10, 4),
        Config(10, 1),
        Config(20, 1),
    ]  # pairs: 4.59 s, 1.2 s, 1.4 s; warm-ups at 10 and 20: 2.32 s, 2.62 s
    assert plan_within_budget(COST, configs, repeat=1, warmup_tokens=0, max_seconds=3) == [False, True, True]
    assert plan_within_budget(COST, configs, repeat=1, warmup_tokens=2, max_seconds=4.1) == [False, True, False]
    assert plan_within_budget(COST, configs, repeat=2, warmup_tokens=0, max_seconds=2) == [False, False, False]
    assert plan_within_budget(COST, configs, repeat=9, warmup_tokens=2, max_seconds=0) == [True, True, True]


# Every step 1 s, a cached decode step 0.5 s, and 0.25 s per call: one token is 1.25 s either way, a pair 2.5 s;
# two tokens uncached 2.25 s, cached 1.75 s. Sums of these are exact in binary, so a budget can be met exactly.
STEPS = CostModel(prefill=Polynomial((1.0,)), decode=Polynomial((0.5,)), call_overhead_s=0.25)


def test_plan_adds_up_what_it_keeps_and_a_budget_met_exactly_fits() -> None:
    three = [Config(8, 1)] * 3
    assert plan_within_budget(STEPS, three, repeat=1, warmup_tokens=0, max_seconds=5.0) == [True, True, False]
    assert plan_within_budget(STEPS, three, repeat=1, warmup_tokens=0, max_seconds=4.99) == [True, False, False]


def test_plan_charges_a_batch_per_sequence_and_a_warm_up_per_strategy() -> None:
    assert plan_within_budget(STEPS, [Config(8, 1, 2)], repeat=1, warmup_tokens=0, max_seconds=4.99) == [False]  # 5 s
    # --cache off,dynamic,static with a 2-token warm-up: a round 3 x 1.25 s, the warm-up 2.25 + 2 x 1.75 s: 9.5 s
    three = (False, True, True)
    assert round_seconds(STEPS, 8, 1, caches=three) + round_seconds(STEPS, 8, 2, caches=three) == 9.5
    for budget, fits in ((9.5, True), (9.25, False)):
        assert plan_within_budget(
            STEPS, [Config(8, 1)], repeat=1, warmup_tokens=2, max_seconds=budget, caches=three
        ) == [fits]


def test_format_seconds() -> None:
    assert [format_seconds(s) for s in (0.5, 42.0, 150.0, 7200.0)] == ["0.5 s", "42 s", "2 min", "2.0 h"]
