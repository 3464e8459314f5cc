"""The KV bytes a dynamic cache holds layer by layer, by hand numbers, as each transformers line keeps them."""

from __future__ import annotations

import math

import pytest

from kvmagic.core.kvbytes import KVSizes, SlidingKeep

WINDOWED = SlidingKeep(windowed=True, kept=-1, view=True, fixed_bytes=8)  # transformers 5's, as probed
WHOLE = SlidingKeep()  # transformers 4.55's: a sliding layer kept as a full one
POSITION = 2 * 1 * 16 * 4  # keys and values, 1 KV head of 16, float32
HYBRID = (16,) * 5 + (None,)  # Gemma 3's pattern cut down: 5 sliding layers of window 16, then 1 full


def test_a_windowed_layer_holds_its_window_after_a_step_and_the_whole_prompt_after_the_prefill() -> None:
    assert WINDOWED.held(16, 71) == 15 + 1  # 15 kept, a slice of the 16 the last step attended over
    assert WINDOWED.held(16, 64, written=64) == 64  # the prefill's 15 are a slice of the prompt's 64
    assert WINDOWED.held(16, 10) == 10 and WINDOWED.held(16, 16) == 16 and WINDOWED.held(None, 71) == 71
    assert SlidingKeep(windowed=True, kept=-1).held(16, 71) == 15  # a cache that copied its slice
    assert WHOLE.held(16, 71) == 71


@pytest.mark.parametrize(
    ("keep", "new_tokens", "expected"),
    [
        (WINDOWED, 8, (5 * 16 + 71) * POSITION + 5 * 8),  # 19,368 B
        (WINDOWED, 1, 6 * 64 * POSITION + 5 * 8),  # 49,192 B
        (WHOLE, 8, 6 * 71 * POSITION),  # 54,528 B
        (WHOLE, 1, 6 * 64 * POSITION),
    ],
)
def test_after_a_generate(keep: SlidingKeep, new_tokens: int, expected: int) -> None:
    sizes = KVSizes(POSITION, HYBRID, keep)
    assert sizes.after(64, new_tokens) == expected
    assert sizes.after(64, new_tokens, batch=4) == 4 * (expected - 5 * keep.fixed_bytes) + 5 * keep.fixed_bytes


def test_hand_figures_at_64_plus_8() -> None:
    assert KVSizes(POSITION, HYBRID, WINDOWED).after(64, 8) == 19_368
    assert KVSizes(POSITION, HYBRID, WHOLE).after(64, 8) == 54_528


def test_a_sliding_layer_stops_growing_past_its_window_only_where_the_cache_windows_it() -> None:
    windowed, whole = KVSizes(POSITION, HYBRID, WINDOWED), KVSizes(POSITION, HYBRID, WHOLE)
    grown = [windowed.held_bytes(n + 1) - windowed.held_bytes(n) for n in (8, 15, 16, 100)]
    assert grown == [6 * POSITION, 6 * POSITION, POSITION, POSITION]
    assert [whole.held_bytes(n + 1) - whole.held_bytes(n) for n in (8, 100)] == [6 * POSITION] * 2


@pytest.mark.parametrize("keep", [WINDOWED, WHOLE])
@pytest.mark.parametrize("positions", [1, 7, 16, 17, 71, 1000])
def test_positions_inverts_the_bytes_held_after_a_step(keep: SlidingKeep, positions: int) -> None:
    sizes = KVSizes(POSITION, HYBRID, keep)
    assert sizes.positions(sizes.held_bytes(positions, batch=3), batch=3) == pytest.approx(positions)


def test_no_positions_fill_a_cache_past_every_window() -> None:
    sizes = KVSizes(POSITION, (16, 16), WINDOWED)
    assert sizes.positions(sizes.held_bytes(16)) == 16
    assert math.isnan(sizes.positions(sizes.held_bytes(16) + POSITION))
