"""The runner's state agrees with itself when a strategy drops out mid-run: what is timed is what still runs, and a
failure names the configuration it came at, however many strategies each earlier one measured."""

from __future__ import annotations

from typing import Any

import torch

from kvmagic import run_benchmark
from kvmagic.measure import strategies
from kvmagic.runner import benchmark

from .conftest import PROMPT


def test_a_compiled_strategy_whose_first_call_fails_is_not_timed(tiny, monkeypatch) -> None:
    timed: list[list[str]] = []
    real = benchmark.measure_rounds

    def measure_rounds(loaded: Any, inputs: Any, *, strategies: Any, **options: Any) -> Any:
        timed.append([str(s.strategy) for s in strategies])
        assert not any(s.strategy.compiled for s in strategies), "a compiled strategy reached the timed rounds"
        return real(loaded, inputs, strategies=strategies, **options)

    def first_call(*args: Any) -> float:
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(strategies, "_compile_reason", lambda loaded: "")  # as on a GPU: it would compile
    monkeypatch.setattr(benchmark, "first_call", first_call)
    monkeypatch.setattr(benchmark, "measure_rounds", measure_rounds)
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, cache="off,dynamic,static", compile=True)
    assert timed == [["off", "dynamic", "static"]]
    assert result.skipped["static+compile"] == "failed: RuntimeError: no compiler here"
    assert [str(m.strategy) for m in result.measurements] == ["off", "dynamic", "static"]


def test_out_of_memory_names_its_configuration_after_a_strategy_dropped_out(tiny, monkeypatch) -> None:
    """Three strategies at the first prompt length, two at the second (static fails its warm-up there), then out of
    memory: the configuration named is the one it came at, not one counted from the rows (which ran past the
    sweep's end)."""
    real_warm_up, real_generate = benchmark.warm_up, type(tiny.model).generate
    long_prompt: list[int] = []

    def warm_up(loaded: Any, inputs: Any, tokens: int, setups: Any) -> None:
        if inputs["input_ids"].shape[1] > 16 and setups[0].strategy.static:
            raise RuntimeError("no static cache at this length")
        real_warm_up(loaded, inputs, tokens, setups)

    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None and ids.shape[1] > 16 and kwargs["generation_config"].max_new_tokens == 3:
            long_prompt.append(ids.shape[1])
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_generate(self, *args, **kwargs)

    monkeypatch.setattr(benchmark, "warm_up", warm_up)
    monkeypatch.setattr(type(tiny.model), "generate", generate)
    result = run_benchmark(
        tiny, PROMPT, prompt_tokens=[16, 24], new_tokens=[2, 3], warmup_tokens=1, cache="off,dynamic,static",
        max_seconds=0,
    )  # fmt: skip
    assert result.skipped["static"].startswith("failed: RuntimeError: no static cache at this length")
    assert [(c.prompt_tokens, c.new_tokens) for c in result.configs] == [(16, 2), (16, 3), (24, 2)]
    assert result.facts.stopped == "out of accelerator memory at 24+3 tokens"
