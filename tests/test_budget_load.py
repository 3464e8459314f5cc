"""A budget that a passing load does not fool: the estimate counts the fastest of a few rounds of short
probes, so one slow round does not decide, and a hopeless sweep is refused from single forwards before the
probes at its longest lengths. Timings are injected: no verdict depends on the machine's speed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kvmagic import KVMagicError, run_benchmark
from kvmagic.core.costmodel import Probes
from kvmagic.runner import plan

from .conftest import PROMPT


def test_one_slow_two_token_run_does_not_decide(tiny, monkeypatch) -> None:
    # A load slows the first uncached run 250-fold: alone it would put the estimate at minutes, past the 1 s
    # budget. The fastest of three rounds counts: F(10) = 0.01 s, so by hand (prompt 10, -n 4, -w 2, -r 3):
    # uncached 0.01 (2 + 2/20) + 3 * 0.01 (4 + 12/20) + 0.01 (first token) = 0.169 s,
    # cached 0.012 + 3 * (0.01 + 3 * 0.002) + 0.01 = 0.07 s.
    calls: list[str] = []

    def injected(loaded, inputs, new_tokens, strategy):
        calls.append(str(strategy.strategy))
        if not strategy.caches:
            return 5.0 if calls.count(str(strategy.strategy)) == 1 else 0.02
        return 0.012

    monkeypatch.setattr(plan, "first_call", injected)
    result = run_benchmark(tiny, PROMPT, new_tokens=4, prompt_tokens=10, warmup_tokens=2, repeat=3, max_seconds=1)
    assert calls == ["off", "dynamic"] * 3  # in rounds: a passing load slows some of each strategy's runs
    assert result.facts.estimated_s == pytest.approx(0.169 + 0.07)


def test_the_estimate_takes_one_whole_round(tiny, monkeypatch) -> None:
    # Round by round (uncached, cached): (0.02, 0.5), (0.5, 0.012), (0.03, 0.018). The third is the fastest
    # round; the fastest run of each strategy (0.02 and 0.012) came in rounds a load slowed as a whole.
    times = iter([0.02, 0.5, 0.5, 0.012, 0.03, 0.018])
    monkeypatch.setattr(plan, "first_call", lambda loaded, inputs, new_tokens, strategy: next(times))
    result = run_benchmark(tiny, PROMPT, new_tokens=4, prompt_tokens=10, warmup_tokens=0, max_seconds=1)
    # F(10) = 0.015 s: uncached 0.015 (4 + 12/20) + 0.015 = 0.084 s, cached 0.015 + 3 * 0.003 + 0.015 = 0.039 s
    assert result.facts.estimated_s == pytest.approx(0.084 + 0.039)


# Three rounds of probes, each point's median 0.2 s (F) and 0.02 s (D), G and C 0; the fastest round took
# half the median round's time, so the budget counts half of each: F 0.1 s, D 0.01 s.
PROBES = Probes(
    prefill={10: [0.1, 0.2, 3.0], 20: [3.0, 0.2, 0.1]},
    decode={10.5: [0.01, 0.02, 0.02, 0.01, 1.0, 1.0], 20.5: [0.02, 0.01, 1.0, 0.02, 0.01, 1.0]},
    overheads=((0.0, 0.0), (1.0, 1.0), (0.0, 0.0)),
    rounds_s=(1.0, 3.0, 2.0),
)


def _count_probes(monkeypatch, forward: Callable[[int, int], float]) -> tuple[list[int], list[int]]:
    """Inject the sweep's single forwards (``forward(length, call)``, calls counted from 1) and its full
    probe (:data:`PROBES`), and count both."""
    forwards: list[int] = []
    probes: list[int] = []

    def injected(loaded, inputs, length):
        forwards.append(length)
        return forward(length, len(forwards))

    monkeypatch.setattr(plan, "forward_seconds", injected)
    monkeypatch.setattr(plan, "probe", lambda *a, **k: probes.append(1) or PROBES)
    return forwards, probes


def test_a_hopeless_sweep_is_refused_after_single_forwards(tiny, monkeypatch) -> None:
    # F(10) = 1 s and F(1) = 0.5 s: F grows at least 0.05 s a token past 10, so by hand
    # uncached 16 + 0.05 * 120 = 22 s and 64 + 0.05 * 2016 = 164.8 s, cached 1 s each: 188.8 s, past 60 s
    forwards, probes = _count_probes(monkeypatch, lambda length, call: 0.5 if length == 1 else 1.0)
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, new_tokens=[16, 64], prompt_tokens=10, warmup_tokens=0, max_seconds=60)
    assert str(caught.value).startswith("would take about 3 min, over ")
    assert forwards == [1, 10] * 3 and probes == []  # three rounds agreed; the probes at long lengths never ran


def test_one_slow_forward_does_not_refuse_a_sweep(tiny, monkeypatch) -> None:
    # The first round, under a load, puts even the lower bound past the 5 s budget (as above: uncached
    # 2 + 0.05 and 3 + 0.05 * 3, cached 1 + 1: 7.2 s); the second, at 0.1% of that, fits and ends the first
    # look: the sweep goes on to the full probe (its estimate 0.73 s, below) and runs.
    def forward(length: int, call: int) -> float:
        seconds = 0.5 if length == 1 else 1.0
        return seconds if call <= 2 else seconds / 1000

    forwards, probes = _count_probes(monkeypatch, forward)
    result = run_benchmark(tiny, PROMPT, new_tokens=[2, 3], prompt_tokens=10, warmup_tokens=0, max_seconds=5)
    assert forwards == [1, 10] * 2 and probes == [1]
    assert len(result.configs) == 2


def test_the_sweep_budget_counts_the_fastest_round_and_predict_the_median(tiny, monkeypatch) -> None:
    forwards, probes = _count_probes(monkeypatch, lambda length, call: 0.001)
    # By hand, prompt 10, -n 2,3: uncached 2 * 0.1 + 3 * 0.1 = 0.5 s; cached 0.1 + 0.01 + 0.1 + 2 * 0.01 = 0.23 s.
    # The median round would say twice that, 1.46 s, past the 1 s budget; the fastest round fits.
    result = run_benchmark(tiny, PROMPT, new_tokens=[2, 3], prompt_tokens=10, warmup_tokens=0, max_seconds=1)
    assert result.facts.estimated_s == pytest.approx(0.73) and len(result.configs) == 2
    # --predict's figures are typical runs: the medians (uncached 0.2 s a step; cached 0.2 s, then 0.02 s a step)
    result = run_benchmark(tiny, PROMPT, new_tokens=[2, 3], prompt_tokens=10, warmup_tokens=0, predict=True)
    predicted = [(p.uncached_s, p.cached_s) for p in result.predictions]
    assert predicted == [pytest.approx((0.4, 0.22)), pytest.approx((0.6, 0.24))]
    assert result.cost_model == PROBES.typical() and result.facts.estimated_s == pytest.approx(0.73)
    assert forwards == [1, 10] and probes == [1, 1]  # --predict refuses nothing: it needs no first look


def test_a_sweep_that_fits_takes_one_look_of_real_forwards(tiny, monkeypatch) -> None:
    seconds: list[tuple[int, float]] = []
    real = plan.forward_seconds
    monkeypatch.setattr(plan, "forward_seconds", lambda *a: seconds.append((a[2], real(*a))) or seconds[-1][1])
    result = run_benchmark(tiny, PROMPT, new_tokens=[2, 3], prompt_tokens="5,9", warmup_tokens=0, max_seconds=1e6)
    assert [length for length, _ in seconds] == [1, 5, 9] and all(s > 0 for _, s in seconds)
    assert len(result.configs) == 4


def test_the_estimate_runs_a_compiled_strategy_without_compiling_it(tiny, monkeypatch) -> None:
    """Its compile is paid by an untimed first call, never by a timed run: the probe must not pay it either, and
    the strategy itself keeps asking to compile."""
    from types import SimpleNamespace

    from kvmagic.core.strategy import parse
    from kvmagic.measure.strategies import Setup

    settings = {"use_cache": True, "cache_implementation": "static", "disable_compile": False, "compile_config": 1}
    compiled = Setup(parse("static+compile"), settings)
    told: list[bool] = []

    def probe(loaded, inputs, new_tokens, strategy):  # type: ignore[no-untyped-def]
        told.append(strategy.settings["disable_compile"])
        return 0.01

    monkeypatch.setattr(plan, "first_call", probe)
    fake = SimpleNamespace(runnable=[compiled], loaded=tiny, attempt=lambda strategy, run: run())
    assert plan._fastest_round(fake, {}) == {parse("static+compile"): (0.01, True)}
    assert told == [True] * plan.TRIES and compiled.settings["disable_compile"] is False
