"""The budget as a deadline, on tiny run on a made-up machine's clock (:mod:`tests.virtual_time`): the least work
first, each configuration started only where the runs made project it to fit, what passes it left out and said,
a run past it cut; refused up front only far past it. No verdict depends on the speed of the machine that runs
the tests."""

from __future__ import annotations

import gc
import threading
import time

import pytest

from kvmagic import KVMagicError, run_benchmark
from kvmagic.core.config import Config
from kvmagic.core.deadline import CUT_MARGIN, FAR_PAST
from kvmagic.measure.capabilities import static_cache_state
from kvmagic.results.result import BenchmarkResult
from kvmagic.runner import benchmark
from kvmagic.runner.deadline_run import Cut, cut_after

from .conftest import PROMPT, raises_usage
from .model_state import snapshot
from .virtual_time import Machine, install

P = len(PROMPT.encode())  # tiny's tokenizer: a token per byte (82)
SWEEP = {"new_tokens": [16, 64, 256], "repeat": 3}  # the README's sweep


def _busy() -> Machine:
    """A machine on which the README's sweep takes 2.6 s, 12 s and 77 s a round, a warm-up 0.7 s."""
    return Machine(position_s=0.0012, step_s=0.03, fixed_s=0.02)


def _spent(machine: Machine, start: float) -> float:
    return machine.now - start


def test_a_sweep_past_its_budget_returns_its_finished_rows_and_names_what_it_left_out(tiny, monkeypatch) -> None:
    machine = install(monkeypatch, tiny, _busy())
    start = machine.now
    result = run_benchmark(tiny, PROMPT, max_seconds=60, **SWEEP)
    assert [c.new_tokens for c in result.configs] == [16, 64] and result.partial
    assert _spent(machine, start) <= 60
    assert result.facts.stopped == "deadline" and result.facts.left_out == (Config(P, 256),)
    assert result.notes()[0] == (
        f"left out {P}+256 tokens: it would pass --max-seconds 60 s; --max-seconds {result.facts.fitting_s:g} should "
        "fit it"
    )
    assert (P, 256, False, 1) not in machine.calls  # never started
    assert BenchmarkResult.from_json(result.to_json()) == result  # what it left out is kept in its file
    assert result.setup()["left_out"] == f"{P}+256 tokens"
    # the budget it names starts the whole sweep on the same machine (stopped there: tiny's real 256-token runs
    # would cost the test half a minute)
    started: list[int] = []
    real = benchmark.measure_rounds

    def stop_at_256(*args, **kwargs):
        started.append(kwargs["new_tokens"])
        if kwargs["new_tokens"] == 256:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(benchmark, "measure_rounds", stop_at_256)
    again = run_benchmark(tiny, PROMPT, max_seconds=result.facts.fitting_s, **SWEEP)
    assert started == [16, 64, 256] and again.facts.left_out == () and again.facts.stopped == "interrupted"


def test_a_machine_that_gets_busier_after_the_warm_up_still_ends_near_its_budget(tiny, monkeypatch) -> None:
    # the warm-up ran on the quiet machine; every timed run after it, four times slower
    machine = install(monkeypatch, tiny, _busy())
    machine.load = lambda call: 1.0 if call < 2 else 4.0
    start = machine.now
    result = run_benchmark(tiny, PROMPT, max_seconds=60, **SWEEP)
    assert [c.new_tokens for c in result.configs] == [16] and _spent(machine, start) <= 60
    assert result.facts.left_out == (Config(P, 64), Config(P, 256))
    assert result.notes()[0].startswith(
        f"left out {P}+64 tokens and {P}+256 tokens: they would pass --max-seconds 60 s"
    )


def test_a_run_the_machine_slows_past_the_deadline_is_cut_and_the_finished_rows_kept(tiny, monkeypatch) -> None:
    # from the 64-token configuration's first round on, the machine runs ten times slower
    machine = install(monkeypatch, tiny, _busy())
    slow_from = {"call": None}

    def load(call: int) -> float:
        return 10.0 if slow_from["call"] is not None and call >= slow_from["call"] else 1.0

    machine.load = load
    real = benchmark.measure_rounds

    def watched(*args, **kwargs):
        if kwargs["new_tokens"] == 64:
            slow_from["call"] = len(machine.calls)
        return real(*args, **kwargs)

    monkeypatch.setattr(benchmark, "measure_rounds", watched)
    start = machine.now
    result = run_benchmark(tiny, PROMPT, max_seconds=60, **SWEEP)
    assert _spent(machine, start) == pytest.approx(60 * (1 + CUT_MARGIN))  # cut by the timer, armed at the start
    assert [c.new_tokens for c in result.configs] == [16] and result.facts.stopped == "cut"
    assert result.facts.left_out == (Config(P, 64), Config(P, 256))
    assert result.notes()[0].startswith(
        f"left out {P}+64 tokens and {P}+256 tokens: {P}+64 tokens was still running {CUT_MARGIN:.0%} past "
        "--max-seconds 60 s and was cut; --max-seconds "
    )


def test_a_busy_moment_during_the_probe_refuses_nothing_that_fits(tiny, monkeypatch) -> None:
    # -n 100 -w 0: the two-token probes ran eight times slower than the runs: projected far over the 10 s budget,
    # not FAR_PAST times over it, so it runs, and fits
    machine = install(monkeypatch, tiny, Machine(position_s=0.0002, step_s=0.005, fixed_s=0.002))
    machine.load = lambda call: 8.0 if call < 2 else 1.0
    start = machine.now
    result = run_benchmark(tiny, PROMPT, new_tokens=100, warmup_tokens=0, max_seconds=10)
    assert machine.calls[:2] == [(P, 2, False, 1), (P, 2, True, 1)]  # the probe
    assert result.facts.estimated_s > 10 and _spent(machine, start) < 10 and not result.partial


def test_a_run_projected_far_past_its_budget_is_refused_before_any_timed_run(tiny, monkeypatch) -> None:
    machine = install(monkeypatch, tiny, Machine(position_s=0.01, step_s=0.01))
    first = machine.seconds(P, 300, use_cache=False)  # about 10 min: past FAR_PAST times 10 s
    assert first > FAR_PAST * 10
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, new_tokens=[600, 300], max_seconds=10)
    assert str(caught.value) == (  # the shortest configuration's first run, as the warm-up projects it
        f"{P}+300 tokens would take about {round(first / 60)} min, over {FAR_PAST:g} times max_seconds 10 s: raise it "
        "or lower new_tokens, prompt_tokens or repeat"
    )
    assert all(new <= 4 for _, new, _, _ in machine.calls)  # only the warm-up ran


def test_the_magic_refuses_it_with_its_flags(shell, tiny, monkeypatch) -> None:
    install(monkeypatch, tiny, Machine(position_s=0.01, step_s=0.01))
    with raises_usage(match=rf"^{P}\+300 tokens would take about .* over 10 times --max-seconds 10 s: raise it or "
                      r"lower -n, -p or -r$"):  # fmt: skip
        shell.run_cell_magic("kvbench", "-n 300 --max-seconds 10", PROMPT)


def test_a_cut_before_any_row_finished_says_what_would_fit(tiny, monkeypatch) -> None:
    # the probe says 20 s; the run takes ten times that, and is cut at the deadline and its margin
    machine = install(monkeypatch, tiny, Machine(position_s=0.0002, step_s=0.005))
    machine.load = lambda call: 1.0 if call < 2 else 10.0
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, new_tokens=1000, max_seconds=60)
    assert str(caught.value).startswith(
        f"nothing finished within max_seconds 60 s: {P}+1000 tokens ran past it and was cut; max_seconds "
    )


def test_rounds_that_would_pass_the_deadline_leave_their_configuration_out(tiny, monkeypatch) -> None:
    # the first round of 16 tokens, four times its projection, leaves no room for two more: nothing is kept,
    # and the error says so; with room for them, all three rounds run
    machine = install(monkeypatch, tiny, _busy())
    machine.load = lambda call: 1.0 if call < 2 else 4.0
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, new_tokens=16, repeat=3, max_seconds=20)
    assert str(caught.value).startswith(f"nothing finished within max_seconds 20 s: {P}+16 tokens would pass it")
    assert sum(1 for _, new, _, _ in machine.calls if new == 16) == 2  # one round, then left out
    assert len(run_benchmark(tiny, PROMPT, new_tokens=16, repeat=3, max_seconds=60).measurements[0].seconds) == 3


def test_the_least_work_is_measured_first_and_the_rows_shown_as_asked(tiny, monkeypatch) -> None:
    machine = install(monkeypatch, tiny, _busy())
    result = run_benchmark(tiny, PROMPT, new_tokens=[64, 16], prompt_tokens=[40, 10], warmup_tokens=1)
    timed = [(p, n) for p, n, _, _ in machine.calls if n > 2]  # not the probes, the warm-ups or first tokens
    assert list(dict.fromkeys(timed)) == [(10, 16), (40, 16), (10, 64), (40, 64)]
    assert [(c.prompt_tokens, c.new_tokens) for c in result.configs] == [(40, 64), (40, 16), (10, 64), (10, 16)]


def test_the_first_estimate_comes_from_the_warm_up_alone(tiny, monkeypatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(benchmark, "probe_two_tokens", lambda *a: calls.append(1) or {})
    machine = install(monkeypatch, tiny, _busy())
    result = run_benchmark(tiny, PROMPT, new_tokens=16, repeat=3)
    # exact on this machine but for each step's fixed cost, which the projection counts in proportion to length
    actual = sum(machine.seconds(p, n, c, b) for p, n, c, b in machine.calls)
    assert calls == [] and result.facts.estimated_s == pytest.approx(actual, rel=0.05)


def test_without_a_budget_nothing_is_probed_or_left_out(tiny, monkeypatch) -> None:
    machine = install(monkeypatch, tiny, _busy())
    result = run_benchmark(tiny, PROMPT, new_tokens=[16, 64], warmup_tokens=0, max_seconds=0)
    assert [n for _, n, _, _ in machine.calls if n > 1][:2] == [16, 16] and len(result.configs) == 2


# The timer itself: a real thread on the real clock, around work that runs until it is stopped.


def test_the_timer_cuts_a_run_that_does_not_end_as_ctrl_c_would() -> None:
    started = time.perf_counter()
    with pytest.raises(Cut), cut_after(0.05):
        while True:
            time.sleep(0.001)
    assert time.perf_counter() - started >= 0.05 and issubclass(Cut, KeyboardInterrupt)
    assert not any(thread.name == "kvbench-deadline" for thread in threading.enumerate())


def test_the_timer_stays_quiet_once_its_block_has_ended() -> None:
    with cut_after(0.05):
        pass
    time.sleep(0.1)  # a cut fired now would raise here
    with cut_after(None):
        time.sleep(0.01)


class _CutInside:
    """A forward hook that, at the n-th forward pass, arms a real timer and waits inside ``generate`` for it: a run
    that would never end by itself."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def __call__(self, module, args, output) -> None:
        self.calls += 1
        if self.calls == self.n:
            with cut_after(0.05):
                while True:
                    time.sleep(0.001)


def test_a_cut_run_is_dropped_the_rows_before_it_kept_and_the_model_usable(tiny) -> None:
    before = run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0, cache="off,dynamic,static")
    state = snapshot(tiny.model)
    # -n 2,3 without a budget: a one-token warm-up of each strategy, then the first configuration's 3 x 2 timed
    # forwards and 3 x 3 one-token ones; the 26th is in the second configuration's static run
    hook = tiny.model.register_forward_hook(_CutInside(26))
    try:
        result = run_benchmark(tiny, PROMPT, new_tokens=[2, 3], warmup_tokens=0, max_seconds=0,
                               cache="off,dynamic,static", quality=False)  # fmt: skip
    finally:
        hook.remove()
    assert [c.new_tokens for c in result.configs] == [2] and result.facts.stopped == "cut"
    assert snapshot(tiny.model) == state and gc.isenabled()
    assert not any(hasattr(tiny.model, name) for name in static_cache_state())  # forgotten: no stray state
    after = run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0, cache="off,dynamic,static")
    assert [m.generated_ids for m in after.measurements] == [m.generated_ids for m in before.measurements]
    assert after.identical


def test_a_users_ctrl_c_is_no_cut(tiny) -> None:
    class Interrupt:
        def __call__(self, module, args, output) -> None:
            raise KeyboardInterrupt

    hook = tiny.model.register_forward_hook(Interrupt())
    try:
        with pytest.raises(KeyboardInterrupt) as caught:  # one configuration: nothing finished to return
            run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0)
    finally:
        hook.remove()
    assert not isinstance(caught.value, Cut)
