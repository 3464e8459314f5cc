"""The memory frontier's arithmetic against numbers worked out by hand for a toy shape."""

from __future__ import annotations

import dataclasses
import math

import pytest

from kvmagic.addons.frontier.cache_layout import CacheLayout, kv_bytes, layout
from kvmagic.addons.frontier.reach import Activations, FitCheck, Frontier, frontier, largest, peak_bytes
from kvmagic.core.strategy import Strategy

from .shapes import SHAPE

ACTIVATIONS = Activations(forward_fixed=100, forward_per_token=10, decode_fixed=50, decode_per_position=2)
DYNAMIC = layout("dynamic")
QUANTIZED = CacheLayout("q", "quantized", bits=4, group_size=64, residual=3, windowed=False, dequantized_layers=2.0)


def test_strategy_names_map_to_layouts() -> None:
    assert layout("off").kind == "none"
    assert CacheLayout("dynamic", "dynamic") == DYNAMIC
    assert not layout("dynamic", windowed_dynamic=False).windowed  # transformers 4.55 keeps sliding layers whole
    assert layout("static+compile").kind == "static"
    assert layout("offloaded_static") == CacheLayout("offloaded_static", "static", device_layers=2)
    assert layout("quantized:quanto", kv_bits=2) == CacheLayout(
        "quantized:quanto", "quantized", bits=2, group_size=64, residual=128, windowed=False, dequantized_layers=2.0
    )
    fp8 = layout("quantized:fp8")
    assert (fp8.bits, fp8.group_size, fp8.residual) == (8, 0, 0)


def test_held_keys_and_values_per_layout() -> None:
    assert kv_bytes(SHAPE, DYNAMIC, 5) == 8 * (5 + 3) * 2 == 128  # the windowed layer holds 3
    assert kv_bytes(SHAPE, layout("dynamic", windowed_dynamic=False), 5) == 8 * 10 * 2
    assert kv_bytes(SHAPE, layout("static"), 5, batch=3) == 3 * 128
    assert kv_bytes(SHAPE, layout("off"), 5) == 0
    # quantized, no window: 2 recent positions in full precision (residual - 1), 3 at 4 bits + 2 x 2 bytes per 64
    assert kv_bytes(SHAPE, QUANTIZED, 5) == 2 * (8 * 2 * 2 + 3 * 8 * (0.5 + 4 / 64)) == 91
    assert kv_bytes(SHAPE, QUANTIZED, 5, prompt_tokens=5) == 2 * 5 * 8 * 0.5625  # the prompt is quantized at once
    assert kv_bytes(SHAPE, QUANTIZED, 5, prompt_tokens=4) == 2 * (8 * 1 * 2 + 4 * 8 * 0.5625)
    assert kv_bytes(SHAPE, layout("quantized:fp8"), 5) == 2 * 5 * 8 * 1
    assert kv_bytes(SHAPE, dataclasses.replace(DYNAMIC, device_layers=1), 5) == 8 * 5 * 2  # the largest layer


def test_peak_memory_of_a_generate_per_strategy() -> None:
    # 2-token prompt, 10 new tokens: 11 positions cached at the end, 11 + 3 held by the dynamic cache
    assert peak_bytes(SHAPE, layout("off"), ACTIVATIONS, 2, 10) == 100 + 10 * 11
    # dynamic: max(prefill 120 + 64, held 224 + decode 50 + 2 x 11)
    assert peak_bytes(SHAPE, DYNAMIC, ACTIVATIONS, 2, 10) == 296
    # the prefill dominates: its activations, and the prompt whole in both layers (the window slides at the step)
    assert peak_bytes(SHAPE, DYNAMIC, ACTIVATIONS, 4, 2) == 140 + 16 * 8
    assert peak_bytes(SHAPE, DYNAMIC, ACTIVATIONS, 2, 10, batch=2) == 2 * 224 + 50 + 2 * 2 * 11
    # static: 11 positions preallocated, plus the larger of the prefill (120) and a decode step's fixed part
    assert peak_bytes(SHAPE, layout("static"), ACTIVATIONS, 2, 10) == 224 + 120
    # quantized: 2 full + 9 quantized positions per layer, decode 72, two dequantized copies of 11 x 8 x 2 bytes
    assert peak_bytes(SHAPE, QUANTIZED, ACTIVATIONS, 2, 10) == 145 + 72 + 2 * 176
    assert peak_bytes(SHAPE, QUANTIZED, ACTIVATIONS, 2, 1) == 120 + 2 * 2 * 8 * 0.5625  # one new token: the prefill


def test_largest_finds_the_last_n_that_fits() -> None:
    assert largest(lambda n: n <= 37) == 37
    assert largest(lambda n: n <= 1) == 1
    assert largest(lambda n: n <= 37, cap=20) == 20
    assert largest(lambda n: False) == 0
    assert largest(lambda n: n <= 10**12) == 10**12


def test_the_frontier_per_strategy_in_the_memory_free() -> None:
    off, dynamic = frontier(SHAPE, 300, ACTIVATIONS, [layout("off"), DYNAMIC], prompt_tokens=2, new_tokens=10)
    # dynamic: 10 new tokens take 296; 11 take 240 + 50 + 24 = 314
    assert (dynamic.max_new_tokens, dynamic.max_context, dynamic.max_prompt, dynamic.max_batch) == (10, 12, 2, 1)
    assert dynamic.peak_bytes == 296 and dynamic.kv_bytes_per_token == 224 / 11 and dynamic.limited_by == "memory"
    # off: 100 + 10 x (prompt + new - 1) <= 300
    assert (off.max_new_tokens, off.max_prompt, off.max_batch, off.kv_bytes_per_token) == (19, 11, 1, 0)
    (capped,) = frontier(
        dataclasses.replace(SHAPE, max_positions=8), 10**6, ACTIVATIONS, [DYNAMIC], prompt_tokens=2, new_tokens=2
    )
    assert (capped.max_new_tokens, capped.max_prompt, capped.limited_by) == (6, 6, "positions")
    (none,) = frontier(SHAPE, 50, ACTIVATIONS, [DYNAMIC], prompt_tokens=2, new_tokens=10)
    assert (none.max_new_tokens, none.max_context, none.max_prompt, none.max_batch) == (0, 0, 0, 0)


def test_a_sliding_model_reaches_further_than_the_same_shape_with_every_layer_full() -> None:
    """In 1000 bytes, prompt 2: a layer of window 3 stops at 3 x 16 bytes, so each step past it costs 16 + 2
    bytes instead of 32 + 2; transformers 4.55's dynamic cache, which keeps the layer whole, reaches as far
    as the full shape."""
    full = dataclasses.replace(SHAPE, windows=(None, None))
    kept_whole = layout("dynamic", windowed_dynamic=False)
    (sliding,), (whole,), (everything,) = (
        frontier(shape, 1000, ACTIVATIONS, [cache], prompt_tokens=2, new_tokens=10)
        for shape, cache in ((SHAPE, DYNAMIC), (SHAPE, kept_whole), (full, DYNAMIC))
    )
    # E = 1 + new cached: full 32 x E + 50 + 2 x E <= 1000 at E = 27; sliding 16 x (E + 3) + 50 + 2 x E at 50
    assert (everything.max_new_tokens, sliding.max_new_tokens, whole.max_new_tokens) == (26, 49, 26)
    assert sliding.max_context > everything.max_context == whole.max_context


def test_a_fit_check_compares_prediction_measurement_and_budget() -> None:
    check = FitCheck("dynamic", 2, 10, 1, budget_bytes=300, predicted_bytes=296, measured_bytes=333, tensor_bytes=259)
    assert not check.fitted
    assert check.error == pytest.approx(259 / 296 - 1) and check.overhead == pytest.approx(333 / 259 - 1)
    assert FitCheck("off", 2, 10, 1, 300, 296, 290, 290).fitted
    assert isinstance(check.strategy, Strategy) and check.strategy == Strategy.of("dynamic")  # read once, typed


def test_every_other_strategy_maps_to_the_layout_it_keeps() -> None:
    assert layout("offloaded") == CacheLayout("offloaded", "dynamic", device_layers=2)
    assert layout("offloaded", windowed_dynamic=False) == CacheLayout(
        "offloaded", "dynamic", windowed=False, device_layers=2
    )
    # a cache_implementation that windows every layer is preallocated, as a static cache is
    assert layout("hybrid") == CacheLayout("hybrid", "static")
    assert layout("sliding_window") == CacheLayout("sliding_window", "static")
    assert layout("press:knorm:0.25", pruned=0.25) == CacheLayout("press:knorm:0.25", "dynamic", pruned=0.25)
    assert layout("quantized:hqq", kv_bits=8) == CacheLayout(
        "quantized:hqq", "quantized", bits=8, group_size=64, residual=128, windowed=False, dequantized_layers=2.0
    )
    # a warm twin holds what its cold self holds; kv_bits leave a cache that takes no width as it is
    assert layout("dynamic+prefix").kind == "dynamic" and layout("static", kv_bits=2) == layout("static")
    assert layout("off", kv_bits=4) == CacheLayout("off", "none")


def test_a_press_frees_its_share_of_the_prompt_once_the_prefill_is_past() -> None:
    # no window: 2 layers of 16 bytes a position. A prompt of 8 with a quarter pruned keeps 6 of its positions.
    press = layout("press:knorm:0.25", windowed_dynamic=False, pruned=0.25)
    assert kv_bytes(SHAPE, press, 10, prompt_tokens=8) == 2 * 16 * (6 + 2)
    # at the prefill the prompt is whole; with no prompt given nothing is counted as pruned
    assert kv_bytes(SHAPE, press, 8, prompt_tokens=8) == 2 * 16 * 8
    assert kv_bytes(SHAPE, press, 10) == 2 * 16 * 10
    # kvpress keeps int(prompt x (1 - ratio)): 7 x 0.75 = 5.25 keeps 5
    assert kv_bytes(SHAPE, press, 9, prompt_tokens=7) == 2 * 16 * (5 + 2)


def test_an_offloaded_cache_holds_its_largest_layers_on_the_device() -> None:
    # the windowed layer first: the one layer on the device is still the full one
    shape = dataclasses.replace(SHAPE, windows=(3, None))
    assert kv_bytes(shape, dataclasses.replace(DYNAMIC, device_layers=1), 5) == 8 * 5 * 2
    assert kv_bytes(shape, dataclasses.replace(DYNAMIC, device_layers=2), 5) == 8 * (5 + 3) * 2
    assert kv_bytes(shape, layout("offloaded"), 5, batch=2) == 2 * 8 * (5 + 3) * 2


def test_a_static_cache_adds_a_decode_steps_fixed_part_only_when_it_decodes() -> None:
    heavy_step = Activations(forward_fixed=10, forward_per_token=1, decode_fixed=500, decode_per_position=2)
    static = layout("static")
    # one new token: the prefill alone (2 x 2 positions of 16 bytes, and 10 + 2 of activations)
    assert peak_bytes(SHAPE, static, heavy_step, 2, 1) == 64 + 12
    # two: 3 + 3 positions preallocated, and a decode step's fixed 500 outweighs the prefill
    assert peak_bytes(SHAPE, static, heavy_step, 2, 2) == 96 + 500
    assert peak_bytes(SHAPE, static, heavy_step, 2, 2, batch=2) == 2 * 96 + 500


def test_a_quantized_batch_dequantizes_a_layer_per_sequence() -> None:
    # batch 2: twice the held 145 bytes, a decode of 50 + 2 x 2 x 11, two copies of 11 x 16 bytes per sequence
    assert peak_bytes(SHAPE, QUANTIZED, ACTIVATIONS, 2, 10, batch=2) == 2 * 145 + 50 + 44 + 2 * 2 * 176


def test_largest_never_passes_its_cap_and_starts_where_told() -> None:
    assert [largest(lambda n: True, cap=cap) for cap in range(1, 12)] == list(range(1, 12))
    assert [largest(lambda n: n <= 6, cap=cap) for cap in range(1, 9)] == [1, 2, 3, 4, 5, 6, 6, 6]
    assert largest(lambda n: n <= 37, start=5) == 37
    assert largest(lambda n: n <= 4, start=5) == 0
    assert largest(lambda n: n <= 5, start=5) == 5
    asked = []
    assert largest(lambda n: asked.append(n) or n <= 9, start=3, cap=100) == 9
    assert min(asked) == 3


def test_a_row_names_its_configuration_and_a_prompt_that_leaves_no_room_is_not_a_context() -> None:
    (row,) = frontier(SHAPE, 300, ACTIVATIONS, [QUANTIZED], prompt_tokens=2, new_tokens=10, batch=1)
    assert row.config == (2, 10, 1) and str(row.config) == "2+10 tokens"
    assert row.strategy == Strategy.of("q")
    # 11 positions cached: the prompt's 2 at 4 bits, the last 2 of the 9 new in full precision, the rest at 4 bits
    assert row.kv_bytes_per_token == kv_bytes(SHAPE, QUANTIZED, 11, prompt_tokens=2) / 11
    assert row.kv_bytes_per_token == 2 * (8 * 2 * 2 + 9 * 8 * 0.5625) / 11
    assert row.peak_bytes == peak_bytes(SHAPE, QUANTIZED, ACTIVATIONS, 2, 10)
    (batched,) = frontier(SHAPE, 10**4, ACTIVATIONS, [DYNAMIC], prompt_tokens=2, new_tokens=10, batch=3)
    assert batched.config == (2, 10, 3) and batched.batch == 3
    # the peak and the reach are the batch's; the bytes per token are one sequence's
    assert batched.peak_bytes == peak_bytes(SHAPE, DYNAMIC, ACTIVATIONS, 2, 10, 3)
    assert batched.kv_bytes_per_token == 224 / 11
    # 224 b + 50 + 22 b <= 10^4 up to b = 40
    assert batched.max_batch == 40


def test_the_position_limit_stops_the_prompt_too() -> None:
    # 10 positions; a prompt of 3 leaves 7 new tokens, 4 new tokens leave a prompt of 6
    (row,) = frontier(
        dataclasses.replace(SHAPE, max_positions=10), 10**6, ACTIVATIONS, [DYNAMIC], prompt_tokens=3, new_tokens=4
    )
    assert (row.max_new_tokens, row.max_prompt, row.max_context, row.limited_by) == (7, 6, 10, "positions")
    # a prompt already at the limit leaves one new token's search, not none
    (full,) = frontier(
        dataclasses.replace(SHAPE, max_positions=4), 10**6, ACTIVATIONS, [DYNAMIC], prompt_tokens=4, new_tokens=4
    )
    assert (full.max_new_tokens, full.max_prompt, full.limited_by) == (1, 1, "memory")


def test_a_fit_check_without_a_prediction_or_tensors_has_no_ratio() -> None:
    check = FitCheck("static", 4, 8, 2, budget_bytes=100, predicted_bytes=0, measured_bytes=100, tensor_bytes=0)
    assert math.isnan(check.error) and math.isnan(check.overhead)
    assert check.fitted  # exactly at the budget still fits
    assert check.config == (4, 8, 2) and str(check.config) == "4+8 tokens x 2 sequences"


def test_a_frontiers_unchecked_strategies_are_read_once() -> None:
    found = Frontier(rows=[], checks=[], free_bytes=1.0, unchecked={"static": 12.5})
    assert found.unchecked == {Strategy.of("static"): 12.5}
    assert all(isinstance(s, Strategy) for s in found.unchecked)


def test_activations_are_one_sequences_unless_told_and_a_layout_reads_its_strategy_once() -> None:
    assert ACTIVATIONS.forward(5) == 150 and ACTIVATIONS.forward(5, batch=2) == 200
    assert ACTIVATIONS.decode(5) == 60 and ACTIVATIONS.decode(5, batch=2) == 70
    assert isinstance(CacheLayout("static", "static").strategy, Strategy)
    assert CacheLayout("static", "static").strategy.static


def test_keys_and_values_scale_with_the_kv_heads_and_recent_tokens_stay_in_full_precision() -> None:
    assert kv_bytes(dataclasses.replace(SHAPE, kv_heads=2), DYNAMIC, 5) == 2 * 128
    # transformers' residual of 128: 5 positions, none of them a prompt's, are all still in full precision
    quanto = layout("quantized:quanto", kv_bits=4)
    assert kv_bytes(SHAPE, quanto, 5) == 2 * 5 * 8 * 2
    assert kv_bytes(SHAPE, quanto, 5, prompt_tokens=1) == 2 * (4 * 8 * 2 + 1 * 8 * (0.5 + 4 / 64))
    # a quantized layer that windows holds no more recent positions in full precision than its window
    windowed = dataclasses.replace(quanto, windowed=True)
    assert kv_bytes(SHAPE, windowed, 5) == (5 + 3) * 8 * 2


def test_the_prefill_and_the_decode_peaks_count_every_sequence_and_the_prompts_share() -> None:
    # one new token, two sequences: the prefill's activations over 4 tokens (100 + 2 x 40) and the whole prompt
    # in both layers for each sequence (2 x 4 x 16 x 2)
    assert peak_bytes(SHAPE, DYNAMIC, ACTIVATIONS, 4, 1, batch=2) == 180 + 256
    heavy_step = Activations(forward_fixed=10, forward_per_token=1, decode_fixed=500, decode_per_position=2)
    # one new token is the prefill alone, however heavy a decode step would be; two are not
    assert peak_bytes(SHAPE, DYNAMIC, heavy_step, 2, 1) == 12 + 64
    assert peak_bytes(SHAPE, DYNAMIC, heavy_step, 2, 2) == (3 + 3) * 16 + 500 + 6
    # a static cache of one new token with no activations to speak of holds its cache and nothing else
    assert peak_bytes(SHAPE, layout("static"), Activations(0, 0), 2, 1) == 64
    # past the prefill a press holds its pruned prompt (6 of 8) and the 2 new positions; no window
    press = layout("press:knorm:0.25", windowed_dynamic=False, pruned=0.25)
    assert peak_bytes(SHAPE, press, heavy_step, 8, 3) == 2 * 16 * (6 + 2) + 500 + 20
    # the recent tokens a quantized cache keeps in full precision are those after the prompt: 9 of the 11
    quanto = layout("quantized:quanto", kv_bits=4)
    held = 2 * (9 * 8 * 2 + 2 * 8 * (0.5 + 4 / 64))
    assert peak_bytes(SHAPE, quanto, heavy_step, 2, 10) == held + 500 + 22 + 2 * 11 * 16
    # the layer read back whole is as wide as the kv heads
    wide = dataclasses.replace(SHAPE, kv_heads=2)
    assert peak_bytes(wide, QUANTIZED, ACTIVATIONS, 2, 10) == 2 * 145 + 72 + 2 * 352
