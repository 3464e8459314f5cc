"""The cost model's pure parts: fitting, degree choice, summation and the explanation, on synthetic timings."""

from __future__ import annotations

import pytest

from kvmagic.core.costmodel import (
    CostModel,
    Polynomial,
    Probes,
    break_even,
    fit_polynomial,
    generate_overhead,
    probe_lengths,
)

LENGTHS = (16, 32, 64, 128, 256)


def test_polynomial_evaluates_and_describes_its_coefficients() -> None:
    curve = Polynomial((0.5, 0.25, 0.125))
    assert curve(2) == 0.5 + 0.5 + 0.5
    assert curve.degree == 2
    assert curve.describe() == "0.5 +0.25*L +0.125*L^2 s"


def test_a_line_is_fitted_exactly_and_chosen_over_a_parabola() -> None:
    curve = fit_polynomial([(n, 0.002 + 0.0001 * n) for n in LENGTHS])
    assert curve.degree == 1
    assert curve.coefficients == pytest.approx((0.002, 0.0001), rel=1e-9)


def test_a_parabola_is_found_when_the_data_curve() -> None:
    curve = fit_polynomial([(n, 0.001 + 1e-5 * n + 1e-7 * n * n) for n in LENGTHS])
    assert curve.degree == 2
    assert curve.coefficients == pytest.approx((0.001, 1e-5, 1e-7), rel=1e-6)


def test_noise_around_a_constant_stays_a_constant() -> None:
    times = (0.0050, 0.0052, 0.0049, 0.0051, 0.0050)
    curve = fit_polynomial(list(zip(LENGTHS, times)))
    assert curve.degree == 0
    # least squares of relative residuals: the constant c minimising sum((c - t) / t)^2 is sum(1/t) / sum(1/t^2)
    assert curve.coefficients == pytest.approx((sum(1 / t for t in times) / sum(1 / t**2 for t in times),), rel=1e-12)


def test_residuals_count_relative_to_each_timing() -> None:
    # 0.25 s and 0.75 s at one length: a 0.05 s miss on the short one weighs as much as 0.15 s on the long one
    assert fit_polynomial([(8, 0.25), (8, 0.75)]).coefficients == pytest.approx((0.3,), rel=1e-12)
    # a line through short timings survives one long outlier better than an unweighted fit would
    points = [(16, 0.002), (32, 0.003), (64, 0.005), (128, 0.009), (256, 0.03)]
    assert fit_polynomial(points, max_degree=1)(16) == pytest.approx(0.002, rel=0.1)
    with pytest.raises(ValueError, match="positive"):
        fit_polynomial([(1, 0.0), (2, 1.0)])


def test_too_few_lengths_limit_the_degree() -> None:
    # Three lengths leave a held-out check for a line but not for a parabola, even on a perfect parabola.
    assert fit_polynomial([(1, 1.0), (2, 4.0), (3, 9.0)]).degree == 1
    with pytest.raises(ValueError):
        fit_polynomial([])


def test_generation_cost_sums_the_steps_of_each_condition() -> None:
    model = CostModel(prefill=Polynomial((1.0, 2.0)), decode=Polynomial((3.0, 0.5)), step_overhead_s=0.25)
    # uncached: F(2) + F(3) + F(4) = 5 + 7 + 9, plus 3 G
    assert model.generate_seconds(2, 3, use_cache=False) == 21.75
    # cached: F(2) + D(3) + D(4) = 5 + 4.5 + 5, plus 3 G
    assert model.generate_seconds(2, 3, use_cache=True) == 15.25
    assert [model.step_seconds(2, i, use_cache=True) for i in range(3)] == [5.25, 4.75, 5.25]
    assert [model.step_seconds(2, i, use_cache=False) for i in range(3)] == [5.25, 7.25, 9.25]
    assert model.speedup(2, 3) == 21.75 / 15.25
    assert model.generate_seconds(7, 1, use_cache=False) == model.generate_seconds(7, 1, use_cache=True) == 15.25
    called = CostModel(model.prefill, model.decode, step_overhead_s=0.25, call_overhead_s=2.0)
    assert (
        called.generate_seconds(2, 3, use_cache=False) == 23.75
        and called.generate_seconds(2, 3, use_cache=True) == 17.25
    )


def test_a_noisy_fit_never_predicts_negative_steps() -> None:
    model = CostModel(prefill=Polynomial((1.0,)), decode=Polynomial((2.0, -1.0)))
    assert model.generate_seconds(0, 4, use_cache=True) == 1.0 + 1.0 + 0.0 + 0.0


def test_break_even_and_the_length_at_which_the_cache_doubles_speed() -> None:
    model = CostModel(prefill=Polynomial((1.0, 1.0)), decode=Polynomial((2.0,)))
    # N new tokens after none: uncached N + N(N-1)/2, cached 2N - 1: equal at N = 2, 1.2x at 3, 1.91x at 6, 2.15x at 7
    assert break_even(model, 0) == 3
    assert break_even(model, 0, 2.0) == 7
    assert break_even(CostModel(Polynomial((1.0,)), Polynomial((1.0,))), 0, limit=50) is None
    # a per-call C = 3 that both strategies pay dilutes the ratio: 2x now from N = 8 (39 s vs 18 s; at 7, 31 vs 16)
    slow_call = CostModel(Polynomial((1.0, 1.0)), Polynomial((2.0,)), call_overhead_s=3.0)
    assert break_even(slow_call, 0) == 3 and break_even(slow_call, 0, 2.0) == 8


def test_probe_lengths_spread_geometrically_with_both_ends() -> None:
    assert probe_lengths(16, 271) == [16, 32, 66, 134, 271]
    assert probe_lengths(4, 6) == [4, 5, 6]
    assert probe_lengths(5, 5) == [5]
    assert probe_lengths(5, 5, count=1) == [5]  # one length needs no spread


def test_the_model_round_trips_through_a_dict() -> None:
    model = CostModel(
        Polynomial((1.0, 2.0)), Polynomial((3.0,)), step_overhead_s=0.5, call_overhead_s=0.75, probe_s=1.5
    )
    assert CostModel.from_dict(model.to_dict()) == model


def test_the_explanation_names_the_curves_the_break_even_the_dominant_term_and_the_bytes() -> None:
    model = CostModel(
        prefill=Polynomial((0.001, 0.0001)), decode=Polynomial((0.002,)), step_overhead_s=0.001, call_overhead_s=0.002
    )
    notes = model.explain(16, 64, kv_bytes=2 * 1024 * 1024, weight_bytes=8 * 1024 * 1024)
    assert notes[0] == (
        "cost model: prefill F(L) = 0.001 +0.0001*L s; decode step D(L) = 0.002 s; generate's own work G = 1 ms per step "
        "and C = 2 ms per call"
    )
    assert notes[1].startswith(
        f"predicted speed-up {model.speedup(16, 64):.2f}x at 16+64 tokens; the cache breaks even from "
    )
    # At 79 tokens: F + G = 1 + 7.9 + 1 ms, of which 2 ms are fixed; D + G = 3 ms, all fixed.
    assert notes[2] == (
        "at 79 tokens the uncached step F(79) + G = 9.9 ms is 20% fixed per-step cost: the cost growing with length dominates"
    )
    assert (
        notes[3]
        == "at 79 tokens the cached step D(79) + G = 3 ms is 100% fixed per-step cost: the fixed per-step cost dominates"
    )
    assert (
        notes[-1]
        == "KV cache at 79 tokens: 2 MiB against 8 MiB of weights (25.0%): the memory the cache trades for time"
    )
    assert len(model.explain(16, 64, kv_bytes=None, weight_bytes=None)) == len(notes) - 1


def test_generate_overhead_reads_the_gaps_between_forwards() -> None:
    # forwards 2 s, 1 s, 1 s with gaps of 0.25 s and 0.75 s between them, in a call of 6 s: G is the median gap
    # (0.5 s), and C what is left beyond the 4 s of forwards and three G (1.5 s): 0.5 s
    stamps = [1.0, 3.0, 3.25, 4.25, 5.0, 6.0]
    assert generate_overhead(6.0, stamps) == (0.5, 0.5)
    assert generate_overhead(5.0, stamps) == (0.5, 0.0)  # a call shorter than its parts: never a negative C
    with pytest.raises(ValueError, match=r"^need the start and end of two forwards or more$"):
        generate_overhead(1.0, [0.0, 0.5])
    # two forwards of 1 s with a gap of 0.5 s, in a call of 4 s: G 0.5 s, C 4 - 2 - 2 x 0.5 = 1 s
    assert generate_overhead(4.0, [0.0, 1.0, 1.5, 2.5]) == (0.5, 1.0)


def test_probes_fit_each_points_median_round_and_scale_it_to_the_fastest_round() -> None:
    # F = 0.001 + 0.0001 L and D = 0.002 in each point's median round; loads slowed other rounds
    probes = Probes(
        prefill={16: [0.0026, 0.0052, 0.0020], 32: [0.0080, 0.0042, 0.0042], 64: [0.0074, 0.0099, 0.0030]},
        decode={16.5: [0.002, 0.004, 0.001, 0.009, 0.002, 0.002], 64.5: [0.005, 0.002, 0.002, 0.001, 0.004, 0.002]},
        overheads=((0.001, 0.004), (0.0005, 0.003), (0.002, 0.002)),
        rounds_s=(0.5, 0.4, 0.1),
        probe_s=1.5,
    )
    typical = probes.typical()
    assert typical.prefill.coefficients == pytest.approx((0.001, 0.0001)) and typical.decode.coefficients == (0.002,)
    assert (typical.step_overhead_s, typical.call_overhead_s, typical.probe_s) == (0.001, 0.003, 1.5)
    # the fastest round took a quarter of the median round's time: every figure a quarter
    fastest = probes.fastest()
    assert fastest.prefill.coefficients == pytest.approx((0.00025, 0.000025))
    assert fastest.decode.coefficients == (0.0005,)
    assert (fastest.step_overhead_s, fastest.call_overhead_s, fastest.probe_s) == (0.00025, 0.00075, 1.5)


def test_a_scaled_model_scales_every_time_in_it() -> None:
    model = CostModel(Polynomial((1.0, 2.0)), Polynomial((3.0,)), step_overhead_s=0.5, call_overhead_s=0.25)
    assert model.scaled(2.0) == CostModel(Polynomial((2.0, 4.0)), Polynomial((6.0,)), 1.0, 0.5)
    doubled = model.scaled(2.0)
    assert doubled.generate_seconds(5, 7, use_cache=False) == 2 * model.generate_seconds(5, 7, use_cache=False)
