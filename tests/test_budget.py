"""Every run is bounded and visible: one configuration is estimated and refused like a sweep, the warm-up
is checked and counted, and a long run shows a progress bar over its timed runs."""

from __future__ import annotations

import pytest

from kvmagic import KVMagicError, run_benchmark
from kvmagic.core.budget import scaled_seconds
from kvmagic.runner import benchmark, plan

from .conftest import PROMPT, raises_usage, said

PROMPT_TOKENS = len(PROMPT.encode())  # tiny's tokenizer: one token per byte


@pytest.fixture
def two_tokens(monkeypatch) -> list[int]:
    """The budget's two-token runs, timed as 0.02 s without the cache and 0.012 s with it (F(P) = 0.01 s)."""
    calls: list[int] = []

    def injected(loaded, inputs, new_tokens, strategy):
        calls.append(new_tokens)
        return 0.012 if strategy.caches else 0.02

    monkeypatch.setattr(plan, "first_call", injected)
    return calls


def test_scaled_seconds_by_hand() -> None:
    # Uncached: 0.01 s * (1 + 11/10 + 12/10 + 13/10) for 4 tokens after 10; cached: 0.01 + 3 * (0.012 - 0.01).
    assert scaled_seconds(0.01, 0.02, 10, 4, use_cache=False) == pytest.approx(0.046)
    assert scaled_seconds(0.01, 0.012, 10, 4, use_cache=True) == pytest.approx(0.016)
    assert scaled_seconds(0.01, 0.005, 10, 3, use_cache=True) == pytest.approx(0.0102)  # noise: 1% of F(P) a step
    assert scaled_seconds(0.01, 0.02, 10, 0, use_cache=False) == 0.0


def test_one_configuration_past_the_budget_is_refused_before_it_runs(tiny, two_tokens, monkeypatch) -> None:
    generated: list[int] = []
    monkeypatch.setattr(type(tiny.model), "generate", lambda *a, **k: generated.append(1))
    new, warmup = 1500, 4
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, new_tokens=new, warmup_tokens=warmup, max_seconds=5)
    uncached = sum(scaled_seconds(0.01, 0.02, PROMPT_TOKENS, n, use_cache=False) for n in (warmup, new, 1))
    cached = sum(scaled_seconds(0.01, 0.012, PROMPT_TOKENS, n, use_cache=True) for n in (warmup, new, 1))
    minutes = round((uncached + cached) / 60)
    assert said(caught.value) == (
        f"would take about {minutes} min, over max_seconds 5 s: raise it or lower new_tokens, prompt_tokens or repeat"
    )
    assert two_tokens == [2] * 6 and generated == []  # nothing but the estimate ran: three rounds of the pair


def test_the_magic_refuses_it_with_its_flags(shell, two_tokens) -> None:

    with raises_usage(match=r", over --max-seconds 1 s: raise it or lower -n, -p or -r$"):
        shell.run_cell_magic("kvbench", "-n 1500 --max-seconds 1", PROMPT)


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


def test_the_warm_up_counts_in_the_estimate(tiny, two_tokens) -> None:
    short = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=1).facts.estimated_s
    long = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=8).facts.estimated_s
    extra = sum(scaled_seconds(0.01, t, PROMPT_TOKENS, 8, use_cache=c) for t, c in ((0.02, False), (0.012, True)))
    extra -= sum(scaled_seconds(0.01, t, PROMPT_TOKENS, 1, use_cache=c) for t, c in ((0.02, False), (0.012, True)))
    assert long - short == pytest.approx(extra)


def test_a_long_run_shows_a_bar_over_its_timed_runs(tiny, monkeypatch, capsys) -> None:
    monkeypatch.setattr(plan, "first_call", lambda loaded, inputs, new_tokens, strategy: 5.0)  # about 20 s
    monkeypatch.setattr(benchmark, "PROGRESS_AFTER_S", 0.0)  # a run of that length has lasted past the delay
    run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0, progress=True)
    bar = capsys.readouterr().err
    assert f"kvbench 1/1: prompt {PROMPT_TOKENS}, new 3 100%" in bar and "done]" in bar  # closed full


def test_a_short_run_shows_none(tiny, two_tokens, monkeypatch, capsys) -> None:
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
