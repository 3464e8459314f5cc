"""The memory frontier's arithmetic against numbers worked out by hand for a toy shape."""

from __future__ import annotations

import dataclasses

import pytest

from kvmagic.core.frontier import (
    Activations,
    CacheLayout,
    FitCheck,
    frontier,
    kv_bytes,
    largest,
    layout,
    peak_bytes,
)  # fmt: skip
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
