"""The length grammar (``-n 16-256*4``), a sweep's configurations and a stretched prompt, read directly: each
refusal's words (what was written, and how to write it), each range's ends and steps, and the exact ids."""

from __future__ import annotations

import pytest

from kvmagic.core.config import Config
from kvmagic.core.lengths import LENGTH_FORMS, MAX_LENGTHS, configurations, parse_lengths, stretch_ids
from kvmagic.errors import KVMagicError


def refused(text: str, **options: int) -> str:
    with pytest.raises(KVMagicError) as caught:
        parse_lengths(text, **options)
    return str(caught.value)


def test_lists_and_ranges_are_read_in_the_order_written() -> None:
    assert parse_lengths("16") == [16]
    assert parse_lengths(" 64, 16 ,256") == [64, 16, 256]
    assert parse_lengths("16-256*4") == [16, 64, 256]
    assert parse_lengths("16-255*4") == [16, 64]  # the end only where a step lands on it
    assert parse_lengths("32-128+32") == [32, 64, 96, 128]
    assert parse_lengths("5-5+1") == [5] and parse_lengths("5-5*2") == [5]
    assert parse_lengths("1-8*2,3") == [1, 2, 4, 8, 3]
    assert parse_lengths("2-4+1,4-8*2") == [2, 3, 4, 8]  # a length two ranges hold is kept once
    assert parse_lengths(8) == [8]  # type: ignore[arg-type]


def test_a_length_below_the_minimum_is_named_and_where_it_was_written() -> None:
    assert refused("0") == "lengths must be >= 1, got 0"
    assert refused(" 0 ") == "lengths must be >= 1, got 0"
    assert refused("4,0") == "lengths must be >= 1, got 0 in '4,0'"
    assert refused("0-4+2") == "lengths must be >= 1, got 0 in '0-4+2'"
    assert refused("3", minimum=4) == "lengths must be >= 4, got 3"
    assert parse_lengths("0", minimum=0) == [0] and parse_lengths("4", minimum=4) == [4]


def test_an_item_written_twice_is_refused() -> None:
    assert refused("16,32,16") == "'16,32,16' lists 16 twice: give each length once"
    assert refused("8, 8") == "'8, 8' lists 8 twice: give each length once"
    # two empty items are not a length written twice, but nothing that can be read
    assert refused("16,,,32") == f"cannot read '' in '16,,,32' as lengths: write {LENGTH_FORMS}"


def test_what_cannot_be_read_says_how_to_write_lengths() -> None:
    assert refused("lots") == f"cannot read 'lots' as lengths: write {LENGTH_FORMS}"
    assert refused("16,lots") == f"cannot read 'lots' in '16,lots' as lengths: write {LENGTH_FORMS}"
    assert refused("16-64/2") == f"cannot read '16-64/2' as lengths: write {LENGTH_FORMS}"


def test_a_range_without_a_step_gets_one_suggested() -> None:
    assert refused("16-64") == "the range '16-64' needs a step: e.g. 16-64*2 (doubling) or 16-64+16 (adding)"
    assert refused("64-16") == (
        "the range '64-16' ends below its start and needs a step: e.g. 16-64*2 (doubling) or 16-64+16 (adding)"
    )
    assert refused("16-16") == "the range '16-16' needs a step: e.g. 16-16*2 (doubling) or 16-16+16 (adding)"
    assert refused("0-8") == "the range '0-8' needs a step: e.g. 0-8*2 (doubling) or 0-8+1 (adding)"
    assert refused("4,16-64") == "the range '16-64' needs a step: e.g. 16-64*2 (doubling) or 16-64+16 (adding)"


def test_a_range_that_runs_backwards_or_never_grows_is_refused() -> None:
    assert refused("64-16*2") == "the range '64-16*2' ends below its start: write the smaller length first"
    assert refused("16-64*1") == "the range '16-64*1' never grows: multiply a start >= 1 by a factor >= 2"
    assert refused("0-64*2") == "the range '0-64*2' never grows: multiply a start >= 1 by a factor >= 2"
    assert refused("16-64+0") == "the range '16-64+0' never grows: add a step >= 1"
    assert parse_lengths("1-4*2") == [1, 2, 4] and parse_lengths("1-3+1") == [1, 2, 3]


def test_more_lengths_than_a_table_can_hold_are_refused() -> None:
    assert len(parse_lengths(f"1-{MAX_LENGTHS}+1")) == MAX_LENGTHS
    message = f"'1-{MAX_LENGTHS + 1}+1' gives more than {MAX_LENGTHS} lengths: use a coarser range"
    assert refused(f"1-{MAX_LENGTHS + 1}+1") == message
    assert refused("1-1000000+1") == f"'1-1000000+1' gives more than {MAX_LENGTHS} lengths: use a coarser range"
    # two lists that only together pass the cap
    half = MAX_LENGTHS // 2
    text = f"1-{half}+1,{half + 1}-{MAX_LENGTHS + 1}+1"
    assert refused(text) == f"{text!r} gives more than {MAX_LENGTHS} lengths: use a coarser range"


def test_a_sweep_runs_one_prompt_lengths_configurations_together() -> None:
    assert configurations([8, 4], [2, 1]) == [Config(8, 2), Config(8, 1), Config(4, 2), Config(4, 1)]
    assert configurations([8], [2], [1, 3]) == [Config(8, 2, 1), Config(8, 2, 3)]


def test_a_prompt_is_stretched_or_cut_to_exactly_its_tokens_between_its_special_ones() -> None:
    assert stretch_ids([0], [5, 6, 7], [9], 7) == [0, 5, 6, 7, 5, 6, 9]
    assert stretch_ids([0], [5, 6, 7], [9], 4) == [0, 5, 6, 9]
    assert stretch_ids([], [5, 6], [], 1) == [5]
    assert stretch_ids([0, 1], [5], [], 3) == [0, 1, 5]


def test_a_prompt_too_short_for_its_special_tokens_or_without_text_is_refused() -> None:
    with pytest.raises(KVMagicError) as caught:
        stretch_ids([0], [5], [9], 2)
    assert caught.value.params == ("prompt_tokens",)
    assert caught.value.spelled(lambda name: "-p") == (
        "a prompt of 2 tokens leaves no room for text next to the tokenizer's 2 special tokens: raise -p to 3 or more"
    )
    with pytest.raises(KVMagicError, match=r"^the prompt has no text tokens to repeat: write some text in it$"):
        stretch_ids([0], [], [], 4)
