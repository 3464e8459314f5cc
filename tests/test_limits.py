"""The hardware limits' arithmetic against numbers worked out by hand for a toy shape."""

from __future__ import annotations

import math

import pytest

from kvmagic.addons.limits.bounds import (
    COMPUTE,
    MEMORY,
    Hardware,
    Step,
    StrategyLimit,
    _strategy_limit,
    compute_bound_from,
    decode_step,
    forward_step,
    limits_for,
    limits_note,
    prefill_step,
)  # fmt: skip
from kvmagic.core.shape import ModelShape

from .shapes import SHAPE

HARDWARE = Hardware(bandwidth_bytes_s=1000.0, flops_s=4000.0)  # 4 FLOPs per byte at the ridge


def test_the_shape_counts_parameters_reads_and_positions() -> None:
    # per layer: q,k,v,o = 8 x 4 x (2 + 2 + 1 + 1) = 192, MLP 3 x 8 x 16 = 384; two layers
    assert SHAPE.matmul_params == 2 * (192 + 384) == 1152
    assert SHAPE.weights_read == 1000 - 10 * 8 * 2  # the untied input embedding is gathered, not read
    assert ModelShape(**{**SHAPE.__dict__, "tied_embeddings": True}).weights_read == 1000
    assert SHAPE.kv_bytes_per_position == 2 * 1 * 4 * 2
    assert SHAPE.positions(5) == 5 + 3 and SHAPE.positions(2) == 2 + 2
    # causal pairs: full layer 1 + 2 + ... + 5 = 15; windowed 1 + 2 + 3 + 3 + 3 = 12
    assert SHAPE.attended(5) == 27 and SHAPE.attended(2) == 3 + 3
    assert ModelShape(**{**SHAPE.__dict__, "windows": ()}).attended(5) == 30
    with pytest.raises(ValueError, match="windows lists 1 layers"):
        ModelShape(**{**SHAPE.__dict__, "windows": (None,)})


def test_an_uncached_forward_counts_matmuls_the_causal_triangle_and_one_row_of_logits() -> None:
    step = forward_step(SHAPE, 5)
    assert step.flops == 2 * 5 * 1152 + 4 * 2 * 4 * 27 + 2 * 8 * 10 == 12544
    assert step.bytes == 840 + 2 * 2 * 8 * 2 * 5 == 1160  # weights, and the residual stream between layers
    assert step.memory_s(HARDWARE) == 1.16 and step.compute_s(HARDWARE) == 3.136
    assert step.seconds(HARDWARE) == 3.136 and step.bound(HARDWARE) == COMPUTE
    # the prefill writes the prompt's keys and values: 8 positions over both layers, 16 bytes each
    assert prefill_step(SHAPE, 5) == type(step)(1160 + 16 * 8, 12544)


def test_a_cached_step_reads_the_weights_once_and_each_sequences_cache() -> None:
    step = decode_step(SHAPE, 5)
    assert step.bytes == 840 + 64 + 16 * 8 == 1032
    assert step.flops == 2 * 1152 + 4 * 2 * 4 * 8 + 160 == 2720
    assert step.bound(HARDWARE) == MEMORY and step.seconds(HARDWARE) == 1.032
    # a cache that keeps the sliding layer whole (transformers 4.55) reads all 5 positions of both layers
    assert decode_step(ModelShape(**{**SHAPE.__dict__, "cache_windows": False}), 5).bytes == 840 + 64 + 16 * 10
    batched = decode_step(SHAPE, 5, batch=3)
    assert batched.bytes == 840 + 3 * (64 + 128) and batched.flops == 3 * 2720
    assert decode_step(SHAPE, 5, batch=100).bound(HARDWARE) == COMPUTE  # 68 s of arithmetic, 20.04 s of traffic


def test_a_generate_sums_its_steps_under_each_condition() -> None:
    limits = limits_for(SHAPE, HARDWARE, prompt_tokens=4, new_tokens=3)
    # uncached: forwards over 4, 5, 6 tokens, all compute-bound: 9984, 12544, 15136 FLOPs
    assert limits.uncached.seconds == pytest.approx(2.496 + 3.136 + 3.784)
    assert limits.uncached.first_token_s == pytest.approx(2.496)
    assert limits.uncached.memory_s == pytest.approx(1.096 + 1.16 + 1.224)
    assert limits.uncached.governs == COMPUTE
    # cached: the prefill of 4 (compute-bound), then steps seeing 5 and 6 positions (memory-bound)
    assert limits.cached.seconds == pytest.approx(2.496 + 1.032 + 1.048)
    assert limits.cached.compute_s == pytest.approx(2.496 + 0.68 + 0.688)
    assert limits.cached.governs == MEMORY
    assert limits.cached.decode_tok_s == pytest.approx(2 / (1.032 + 1.048))
    assert limits.speedup == pytest.approx(9.416 / 4.576)
    assert limits.weights_share == pytest.approx(840 / 1048)
    assert limits.cached.reached(9.152) == pytest.approx(0.5)
    assert math.isnan(limits_for(SHAPE, HARDWARE, 4, 1).cached.decode_tok_s)
    with pytest.raises(ValueError):
        limits_for(SHAPE, HARDWARE, 0, 3)


def test_uncached_turns_compute_bound_where_its_arithmetic_outlasts_its_traffic() -> None:
    # one token: 2528 FLOPs (0.632 s) against 904 bytes (0.904 s); two tokens: 4960 (1.24 s) against 968 (0.968 s)
    assert forward_step(SHAPE, 1).bound(HARDWARE) == MEMORY
    assert compute_bound_from(SHAPE, HARDWARE) == 2
    assert compute_bound_from(SHAPE, Hardware(1000.0, 1e30)) is None  # infinitely fast arithmetic never bounds


def test_the_note_says_what_limits_each_condition_and_the_share_each_run_is_at() -> None:
    limits = limits_for(SHAPE, HARDWARE, prompt_tokens=4, new_tokens=3)
    assert limits_note(limits, uncached_s=18.832, cached_s=9.152) == (
        "cached decode is memory-bound (weights are 80% of each step's bytes): a smaller dtype would help most, "
        "or a larger batch that shares each read of the weights; uncached is compute-bound from 2 tokens on "
        "(every step of this run); cached runs at 50% of what memory bandwidth allows and uncached runs at 50% "
        "of what matrix throughput allows"
    )
    kv_heavy = ModelShape(**{**SHAPE.__dict__, "kv_heads": 64, "windows": ()})
    assert "a quantized cache would help most" in limits_note(limits_for(kv_heavy, HARDWARE, 64, 2))
    batched = limits_note(limits_for(SHAPE, HARDWARE, 1, 3, batch=100))
    assert batched.startswith("cached decode is compute-bound at batch 100")
    assert limits_note(limits_for(SHAPE, HARDWARE, 1, 3)).endswith("; uncached is compute-bound from 2 tokens on")


def test_the_hardware_describes_itself() -> None:
    assert Hardware(38.1e9, 105.5e9, "cpu", "float32").describe() == (
        "cpu float32: 38.1 GB/s copy bandwidth, 105.5 GFLOP/s matmul"
    )


def test_a_step_whose_traffic_and_arithmetic_take_as_long_counts_as_memory_bound() -> None:
    step = Step(bytes=1000.0, flops=4000.0)  # 1 s of each
    assert step.bound(HARDWARE) == MEMORY and step.seconds(HARDWARE) == 1.0


def test_a_single_step_generate_is_governed_by_that_step() -> None:
    # one new token: each strategy's only step is a forward over the prompt of 4, compute-bound (2.496 s vs 1.096 s)
    limits = limits_for(SHAPE, HARDWARE, prompt_tokens=4, new_tokens=1)
    assert limits.uncached.governs == limits.cached.governs == COMPUTE
    assert limits.uncached.new_tokens == limits.cached.new_tokens == 1
    assert limits.config == (4, 1, 1)
    slow_arithmetic = limits_for(SHAPE, Hardware(1e9, 1.0), prompt_tokens=4, new_tokens=1)
    assert slow_arithmetic.cached.governs == COMPUTE
    fast_arithmetic = limits_for(SHAPE, Hardware(1.0, 1e12), prompt_tokens=4, new_tokens=1)
    assert fast_arithmetic.cached.governs == MEMORY


def test_decode_speed_needs_a_second_token_and_time_spent_on_it() -> None:
    assert math.isnan(StrategyLimit(2.0, 1.0, 1.0, 1.0, MEMORY, new_tokens=1).decode_tok_s)
    assert math.isnan(StrategyLimit(1.0, 1.0, 1.0, 1.0, MEMORY, new_tokens=3).decode_tok_s)
    assert StrategyLimit(2.0, 1.5, 1.0, 1.0, MEMORY, new_tokens=3).decode_tok_s == 4.0


@pytest.mark.parametrize(("prompt", "new", "batch"), [(0, 3, 1), (4, 0, 1), (4, 3, 0)])
def test_each_count_must_be_at_least_one(prompt: int, new: int, batch: int) -> None:
    with pytest.raises(ValueError, match=r"^prompt_tokens, new_tokens and batch must be at least 1$"):
        limits_for(SHAPE, HARDWARE, prompt, new, batch)


def test_a_batch_turns_the_first_token_compute_bound() -> None:
    # two sequences of one token: 5056 FLOPs (1.264 s) against 840 + 2 x 64 bytes (0.968 s)
    assert forward_step(SHAPE, 1, batch=2) == Step(968, 5056)
    assert compute_bound_from(SHAPE, HARDWARE, batch=2) == 1
    assert limits_for(SHAPE, HARDWARE, 1, 2, batch=2).compute_bound_from == 1
    # a prefill's keys and values are each sequence's: 2 x 2 positions of 16 bytes, twice
    assert prefill_step(SHAPE, 2, batch=2) == Step(
        840 + 2 * (2 * 2 * 8 * 2 * 2) + 2 * 64, 2 * (4 * 1152 + 32 * 6 + 160)
    )


def test_a_cache_as_large_as_the_weights_leaves_them_half_of_each_step() -> None:
    # weights read 192 bytes; the step seeing 5 positions reads 64 of residual stream and 8 x 16 of cache: 192
    even = ModelShape(**{**SHAPE.__dict__, "weight_bytes": 352})
    limits = limits_for(even, Hardware(1.0, 1e12), prompt_tokens=4, new_tokens=2)
    assert limits.weights_share == 0.5
    assert limits_note(limits).startswith(
        "cached decode is memory-bound (weights are 50% of each step's bytes): a smaller dtype would help most"
    )


def test_the_note_of_a_machine_whose_arithmetic_never_bounds_and_of_one_measured_run() -> None:
    fast = Hardware(1000.0, 1e30)
    limits = limits_for(SHAPE, fast, prompt_tokens=4, new_tokens=3)
    # cached: the prefill's 1.096 + 0.112 s of traffic, then 1.032 + 1.048 s
    assert limits_note(limits, cached_s=6.576) == (
        "cached decode is memory-bound (weights are 80% of each step's bytes): a smaller dtype would help most, "
        "or a larger batch that shares each read of the weights; uncached stays memory-bound at every length; "
        "cached runs at 50% of what memory bandwidth allows"
    )
    only_uncached = limits_note(limits_for(SHAPE, HARDWARE, 4, 3), uncached_s=9.416 * 4)
    assert only_uncached.endswith("; uncached runs at 25% of what matrix throughput allows")
    assert "cached runs at" not in only_uncached.replace("uncached runs at", "")


def test_the_steps_after_the_first_govern_by_their_time_half_and_half_counting_as_memory() -> None:
    hardware = Hardware(bandwidth_bytes_s=1.0, flops_s=4.0)
    prefill = Step(bytes=100.0, flops=0.0)  # a long first step, which does not govern
    # after it, 2 s of traffic and 2 s of arithmetic: a tie is memory's
    tie = _strategy_limit([prefill, Step(2.0, 0.0), Step(0.0, 8.0)], hardware)
    assert tie.governs == MEMORY and tie.seconds == 104.0 and tie.first_token_s == 100.0
    # 1.5 s against 2.5 s: the larger part governs
    assert _strategy_limit([prefill, Step(1.5, 0.0), Step(0.0, 10.0)], hardware).governs == COMPUTE
    assert _strategy_limit([prefill, Step(2.5, 0.0), Step(0.0, 6.0)], hardware).governs == MEMORY
