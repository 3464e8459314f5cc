"""Every run is bounded and visible: the warm-up is checked and is the first probe, a strategy it says nothing of
is probed with two tokens, --predict's rows past the budget are predicted, and a long run shows a progress bar over
its timed runs."""

from __future__ import annotations

import pytest

from kvmagic import KVMagicError, run_benchmark
from kvmagic.addons.predict import predict_run
from kvmagic.addons.predict.costmodel import Probes
from kvmagic.runner import benchmark, plan

from .conftest import PROMPT, raises_usage, said

PROMPT_TOKENS = len(PROMPT.encode())  # tiny's tokenizer: one token per byte


def test_the_warm_up_is_checked_against_the_positions(tiny) -> None:
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=3000)
    assert said(caught.value) == (
        f"the prompt ({PROMPT_TOKENS} tokens) plus 3000 warm-up tokens exceeds the 2048 positions 'tiny' supports: "
        "shorten the prompt or lower warmup_tokens"
    )


def test_the_magic_names_the_warm_up_flag(shell) -> None:

    with raises_usage(match=r"plus 3000 warm-up tokens exceeds .*: shorten the prompt or lower -w$"):
        shell.run_cell_magic("kvbench", "-n 2 -w 3000", PROMPT)


def _probes(monkeypatch) -> list[int]:
    """The two-token probe, counted: each strategy's run timed as 0.02 s without the cache, 0.012 s with it."""
    calls: list[int] = []

    def injected(loaded, inputs, new_tokens, strategy):
        calls.append(new_tokens)
        return 0.012 if strategy.caches else 0.02

    monkeypatch.setattr(plan, "first_call", injected)
    return calls


# one token warms up the cache off and tells F, not a cached step: only the cached strategy is probed
@pytest.mark.parametrize(("warmup", "probed"), [(4, []), (1, [2]), (0, [2, 2])])
def test_a_warm_up_of_two_tokens_or_more_is_the_only_probe(tiny, monkeypatch, warmup: int, probed: list) -> None:
    calls = _probes(monkeypatch)
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=warmup)
    assert calls == probed and result.facts.estimated_s > 0
    calls.clear()
    run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=warmup, max_seconds=0)  # no budget: nothing probed
    assert calls == []


def test_the_probe_runs_a_compiled_strategy_without_compiling_it(tiny, monkeypatch) -> None:
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
    fake = SimpleNamespace(loaded=tiny, attempt=lambda strategy, run: run())
    assert plan.probe_two_tokens(fake, [compiled], {}) == {parse("static+compile"): 0.01}
    assert told == [True] and compiled.settings["disable_compile"] is False


# Three rounds of probes of a slow machine, each point's median 20 s (F) and 2 s (D), G and C 0; the fastest round
# took half the median round's time, so the budget counts half of each: F 10 s, D 1 s.
PROBES = Probes(
    prefill={10: [10.0, 20.0, 300.0], 20: [300.0, 20.0, 10.0]},
    decode={10.5: [1.0, 2.0, 2.0, 1.0, 100.0, 100.0], 20.5: [2.0, 1.0, 100.0, 2.0, 1.0, 100.0]},
    overheads=((0.0, 0.0), (1.0, 1.0), (0.0, 0.0)),
    rounds_s=(1.0, 3.0, 2.0),
)


def test_predict_shows_the_median_round_and_measures_what_its_fastest_round_fits(tiny, monkeypatch) -> None:
    monkeypatch.setattr(predict_run, "probe", lambda *a, **k: PROBES)
    # By hand, prompt 10, -n 3,2, the least work first: a round at the fastest round's costs, uncached 20 s and
    # 30 s, cached 10 + 1 = 11 s and 10 + 2 x 1 = 12 s: 31 s, then 42 s; within 50 s only the first
    result = run_benchmark(tiny, PROMPT, new_tokens=[3, 2], prompt_tokens=10, warmup_tokens=0, predict=True,
                           max_seconds=50)  # fmt: skip
    assert [c.new_tokens for c in result.configs] == [2] and result.cost_model == PROBES.typical()
    # its figures are typical runs: the medians (uncached 20 s a step; cached 20 s, then 2 s a step), every
    # configuration in the order asked
    predicted = [(p.new_tokens, p.uncached_s, p.cached_s) for p in result.predictions]
    assert predicted == [(3, pytest.approx(60), pytest.approx(24)), (2, pytest.approx(40), pytest.approx(22))]


def test_a_long_run_shows_a_bar_over_its_timed_runs(tiny, monkeypatch, capsys) -> None:
    monkeypatch.setattr(plan, "first_call", lambda loaded, inputs, new_tokens, strategy: 5.0)  # probed: about 20 s
    monkeypatch.setattr(benchmark, "PROGRESS_AFTER_S", 0.0)  # a run of that length has lasted past the delay
    run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0, progress=True)
    bar = capsys.readouterr().err
    assert f"kvbench 1/1: prompt {PROMPT_TOKENS}, new 3 100%" in bar and "done]" in bar  # closed full


def test_a_short_run_shows_none(tiny, monkeypatch, capsys) -> None:
    monkeypatch.setattr(benchmark, "PROGRESS_AFTER_S", 3600.0)  # the whole run falls within the bar's delay
    run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0, progress=True)
    assert "kvbench" not in capsys.readouterr().err


def _notebook_bar(monkeypatch) -> list:
    """tqdm's Jupyter widget in place of tqdm.auto's choice, each bar made kept for inspection."""
    import tqdm.auto
    from tqdm.notebook import tqdm as widget_bar

    made: list = []

    class Recorded(widget_bar):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorded)
    return made


def test_a_run_that_beats_its_estimate_leaves_no_red_bar_in_jupyter(tiny, monkeypatch) -> None:
    """tqdm's widget turns red ("danger") when closed short of its total; the total is only an estimate."""
    monkeypatch.setattr(plan, "first_call", lambda loaded, inputs, new_tokens, strategy: 5.0)  # about 20 s
    made = _notebook_bar(monkeypatch)
    monkeypatch.setattr(benchmark, "PROGRESS_AFTER_S", 0.0)
    run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0, progress=True)
    (bar,) = made
    assert bar.n == bar.total and bar.container.children[1].bar_style != "danger"


def test_a_stopped_run_says_so_on_its_bar(tiny, monkeypatch) -> None:
    monkeypatch.setattr(plan, "first_call", lambda loaded, inputs, new_tokens, strategy: 5.0)
    made = _notebook_bar(monkeypatch)
    monkeypatch.setattr(benchmark, "PROGRESS_AFTER_S", 0.0)

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(benchmark, "measure_rounds", interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0, progress=True)
    (bar,) = made
    assert bar.container.children[1].bar_style == "danger" and "stopped" in bar.desc
