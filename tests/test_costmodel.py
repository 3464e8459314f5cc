"""The cost model's pure parts: fitting, degree choice, summation and the explanation, on synthetic timings."""

from __future__ import annotations

import math

import pytest

from kvmagic.addons.predict.costmodel import CostModel, Probes, break_even, generate_overhead, probe_lengths
from kvmagic.core.curves import Polynomial, crossing, fit_polynomial, lowest

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


def test_the_break_even_sentence_names_both_lengths_or_says_never() -> None:
    """The second note's tail: where the cache starts to pay and where it doubles speed, from the model alone."""
    grows = CostModel(prefill=Polynomial((1.0, 1.0)), decode=Polynomial((2.0,)))  # 1.2x at 3 new tokens, 2.15x at 7
    tail = "the cache breaks even from 3 new tokens on and passes 2x from 7 (prompt of 0)"
    assert grows.explain(0, 4, kv_bytes=None, weight_bytes=None)[1].endswith(f"; {tail}")
    # F(L) = 1 + 0.06 L and D = 1: N new tokens after none run 1 + 0.03 (N - 1) times faster cached
    slow = CostModel(prefill=Polynomial((1.0, 0.06)), decode=Polynomial((1.0,)))
    assert (break_even(slow, 0), break_even(slow, 0, 2.0), break_even(slow, 0, 3.0)) == (2, 35, 68)
    assert slow.explain(0, 4, kv_bytes=None, weight_bytes=None)[1].endswith(
        "; the cache breaks even from 2 new tokens on and passes 2x from 35 (prompt of 0)"
    )
    # F = D + 0.5: the cache gains less than a step's worth over any length, and 2x never comes
    never_twice = CostModel(prefill=Polynomial((1.5,)), decode=Polynomial((1.0,)))
    assert never_twice.explain(2, 4, kv_bytes=None, weight_bytes=None)[1].endswith(
        "; the cache breaks even from 2 new tokens on and never reaches 2x (prompt of 2)"
    )
    flat = CostModel(prefill=Polynomial((1.0,)), decode=Polynomial((1.0,)))
    assert flat.explain(5, 4, kv_bytes=None, weight_bytes=None)[1] == (
        "predicted speed-up 1.00x at 5+4 tokens; the cache never breaks even and never reaches 2x (prompt of 5)"
    )


def test_the_explanation_closes_on_what_the_cache_saves_and_reads_overheads_in_milliseconds() -> None:
    # 9.99 ms read as milliseconds, not a thousandth off (10 ms): three figures show the difference
    model = CostModel(Polynomial((0.002,)), Polynomial((0.001,)), step_overhead_s=0.00999, call_overhead_s=0.00999)
    notes = model.explain(3, 2, kv_bytes=None, weight_bytes=None)
    assert notes[0].endswith("generate's own work G = 9.99 ms per step and C = 9.99 ms per call")
    assert notes[-1] == (
        "the cache saves only what grows with length: where the fixed per-step cost dominates, both strategies "
        "pay about the same per token and the speed-up stays small; longer prompts and generations raise it"
    )
    # without the weights' size there is nothing to set the cache's bytes against
    assert notes == model.explain(3, 2, kv_bytes=1024, weight_bytes=0)


def test_each_step_is_said_to_be_dominated_by_its_larger_part_half_and_half_counting_as_fixed() -> None:
    # at 4 tokens: F(4) + G = 1 + 0.25 * 4 + 0 = 2 s, half fixed; D(4) + G = 4 s with 1 + 1 fixed
    model = CostModel(Polynomial((1.0, 0.25)), Polynomial((1.0, 0.5)), step_overhead_s=0.0)
    notes = model.explain(3, 2, kv_bytes=None, weight_bytes=None)
    assert notes[2] == (
        "at 4 tokens the uncached step F(4) + G = 2e+03 ms is 50% fixed per-step cost: the fixed per-step cost dominates"
    )
    assert notes[3] == (
        "at 4 tokens the cached step D(4) + G = 3e+03 ms is 33% fixed per-step cost: the cost growing with length "
        "dominates"
    )
    # a fit whose fixed part runs past the whole step (a negative slope) is all fixed, never above 100%
    sloping = CostModel(Polynomial((2.0, -0.25)), Polynomial((1.0,)))
    assert "is 100% fixed per-step cost" in sloping.explain(3, 2, kv_bytes=None, weight_bytes=None)[2]
    # a step the fit puts at no time at all has no share to speak of: no note for it
    vanishing = CostModel(Polynomial((1.0, -0.25)), Polynomial((1.0,)))
    notes = vanishing.explain(3, 2, kv_bytes=None, weight_bytes=None)
    assert [n for n in notes if n.startswith("at 4 tokens")] == [
        "at 4 tokens the cached step D(4) + G = 1e+03 ms is 100% fixed per-step cost: the fixed per-step cost dominates"
    ]


def test_a_model_with_no_cached_time_has_no_speedup_and_no_break_even() -> None:
    free = CostModel(Polynomial((1.0,)), Polynomial((0.0,)), step_overhead_s=0.0)
    # the cached prefill still costs F(P): only a cache of no time at all has no ratio
    assert free.speedup(0, 3) == 3.0
    nothing = CostModel(Polynomial((-1.0,)), Polynomial((0.0,)))
    assert math.isnan(nothing.speedup(0, 3))
    assert break_even(nothing, 0, limit=20) is None
    # half a second a call makes a cached run of 0.7 s: a run under one second still has a ratio
    small = CostModel(Polynomial((0.1,)), Polynomial((0.05,)), call_overhead_s=0.5)
    assert small.speedup(0, 3) == pytest.approx(0.8 / 0.7)
    assert break_even(small, 0) == 2


def test_a_saved_model_without_overheads_reads_them_as_zero() -> None:
    read = CostModel.from_dict({"prefill": [1.0, 2.0], "decode": [3.0]})
    assert read == CostModel(Polynomial((1.0, 2.0)), Polynomial((3.0,)))
    assert (read.step_overhead_s, read.call_overhead_s, read.probe_s) == (0.0, 0.0, 0.0)


def test_fitting_refuses_what_it_cannot_fit_in_words() -> None:
    with pytest.raises(ValueError, match=r"^no points to fit$"):
        fit_polynomial([])
    with pytest.raises(ValueError, match=r"^timings must be positive: residuals count relative to them$"):
        fit_polynomial([(1, 1.0), (2, -1.0)])


def test_lengths_at_zero_alone_fit_a_constant() -> None:
    # every length 0: no scale to divide by, and only a constant is determined
    assert fit_polynomial([(0, 2.0), (0, 2.0)]).coefficients == pytest.approx((2.0,))


def test_a_parabola_through_points_that_need_a_pivot_is_solved_exactly() -> None:
    # lengths 0, 1, 2: the normal equations' first column is led by a smaller entry than a later row's
    curve = fit_polynomial([(0, 3.0), (1, 1.0), (2, 1.0), (3, 3.0), (4, 7.0)])  # 3 - 3L + L^2
    assert curve.degree == 2
    assert curve.coefficients == pytest.approx((3.0, -3.0, 1.0), rel=1e-9)


def test_a_curve_must_cut_the_held_out_error_by_a_tenth_to_be_chosen() -> None:
    # a perfect line held out point by point: degree 1 predicts each exactly; a constant does not
    assert fit_polynomial([(n, 1.0 + n) for n in (1, 2, 3)]).degree == 1
    # a parabola fits a line as well as the line does (no better): the line is kept
    assert fit_polynomial([(n, 1.0 + n) for n in LENGTHS]).degree == 1
    # one degree more than the points can hold out is never tried, even when asked for
    assert fit_polynomial([(n, 1.0 + n * n) for n in (1, 2, 3, 4)], max_degree=3).degree == 2


def test_two_curves_cross_at_the_first_whole_length_past_their_flip() -> None:
    fast_start = Polynomial((1.0, 1.0))  # 1 + L
    flat = Polynomial((10.5,))
    # 1 + L passes 10.5 past L = 9.5: from 10 on the order has flipped
    assert crossing(fast_start, flat, 0, 100) == 10
    assert crossing(flat, fast_start, 0, 100) == 10
    assert crossing(fast_start, flat, 0, 10) == 10 and crossing(fast_start, flat, 0, 9) is None
    assert crossing(fast_start, flat, 9, 100) == 10 and crossing(fast_start, flat, 10, 100) is None
    # curves of different degrees: 2 + L against L^2 / 4 + 1 (a parabola, padded), flip past L = 2 + 2 sqrt 2
    assert crossing(Polynomial((2.0, 1.0)), Polynomial((1.0, 0.0, 0.25)), 0, 100) == 5
    assert crossing(Polynomial((1.0, 0.0, 0.25)), Polynomial((2.0, 1.0)), 0, 100) == 5
    # at a whole-length root the curves tie there; the order has flipped one length on
    assert crossing(Polynomial((0.0, 1.0)), Polynomial((4.0,)), 0, 100) == 5


def test_curves_that_keep_their_order_or_only_touch_do_not_cross() -> None:
    assert crossing(Polynomial((1.0, 1.0)), Polynomial((5.0, 1.0)), 0, 100) is None  # parallel
    assert crossing(Polynomial((1.0, 1.0)), Polynomial((2.0, 2.0)), 0, 100) is None  # diverging
    # a tie at the low end is no order to flip
    assert crossing(Polynomial((1.0, 1.0)), Polynomial((1.0, 2.0)), 0, 100) is None
    assert crossing(Polynomial((4.0,)), Polynomial((0.0, 1.0)), 4, 100) is None
    # L^2 touches 0 at L = 0 only: no flip past it; (L - 3)^2 + 1 against 1 touches at 3 and keeps its order
    assert crossing(Polynomial((10.0, -6.0, 1.0)), Polynomial((1.0,)), 0, 100) is None
    # (L - 3)^2 - 0.25 flips twice (at 2.5 and 3.5): the first flip is the one named
    assert crossing(Polynomial((8.75, -6.0, 1.0)), Polynomial((0.0,)), 0, 100) == 3
    # a root below the low end is a flip already passed
    assert crossing(Polynomial((-5.0, 1.0)), Polynomial((0.0,)), 6, 100) is None
    # a parabola with no real roots never meets the line
    assert crossing(Polynomial((1.0, 0.0, 1.0)), Polynomial((0.0,)), 0, 100) is None


def test_a_flip_between_two_whole_lengths_is_found_at_the_next_one() -> None:
    # 3.5 - L crosses 0 at 3.5: from 4 it is negative, and 4 is the first length past it
    assert crossing(Polynomial((3.5, -1.0)), Polynomial((0.0,)), 0, 4) == 4
    assert crossing(Polynomial((3.5, -1.0)), Polynomial((0.0,)), 0, 3) is None
    # a curve barely above the other at low (0.5 against 0): a positive difference under one still has a sign
    assert crossing(Polynomial((0.5, -1.0)), Polynomial((0.0,)), 0, 10) == 1
    # ... and barely below it at the first length past the root (-0.5 at 1, -0.5 + 1 = 0.5 at 2 for the other)
    assert crossing(Polynomial((0.0, 0.5)), Polynomial((0.75,)), 0, 10) == 2


def test_the_lowest_point_of_a_curve_over_a_range_is_at_an_end_or_its_vertex() -> None:
    bowl = Polynomial((10.0, -6.0, 1.0))  # (L - 3)^2 + 1: least 1 at L = 3
    assert lowest(bowl, 0, 10) == 1.0
    assert lowest(bowl, 4, 10) == 2.0 and lowest(bowl, 0, 2) == 2.0  # vertex outside: the nearer end
    assert lowest(bowl, 3, 10) == 1.0 and lowest(bowl, 0, 3) == 1.0  # vertex at an end
    assert lowest(bowl, 2.5, 10) == 1.0 and lowest(bowl, 0, 2.5) == 1.25  # the vertex is at 3, not at 2 nor 4
    assert lowest(Polynomial((5.0, -1.0)), 0, 4) == 1.0  # a line: its lower end
    assert lowest(Polynomial((2.0,)), 0, 4) == 2.0
    assert lowest(Polynomial((0.0, 0.0, -1.0)), -1, 2) == -4.0  # a cap: an end, never its vertex
    # a vertex off the middle: (L - 1)^2 over [0, 10] is least at 1, not at -1 or 1/4
    assert lowest(Polynomial((1.0, -2.0, 1.0)), 0, 10) == 0.0
    # a wider bowl, (L - 6)^2 / 2 = 18 - 6L + L^2/2: least 0 at 6
    assert lowest(Polynomial((18.0, -6.0, 0.5)), 0, 10) == 0.0


def test_a_single_timing_of_a_second_fits_the_constant_one_second() -> None:
    assert fit_polynomial([(5, 1.0)]).coefficients == (1.0,)


def test_equal_timings_stay_a_constant_and_no_degree_passes_the_one_asked_for() -> None:
    assert fit_polynomial([(n, 0.5) for n in LENGTHS]).coefficients == (0.5,)
    cubic = [(n, 10.0 + n**3) for n in (1, 2, 3, 4, 5)]
    assert fit_polynomial(cubic, max_degree=3).degree == 3  # the points hold a cubic out ...
    assert fit_polynomial(cubic).degree == 2  # ... but the default stops at a parabola
