"""A reused prefix: warm twins start every timed run from a fresh copy of the prefix's cache, made before the clock
starts, and the table sets them against their cold selves."""

from __future__ import annotations

import dataclasses
import math
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest

from kvmagic import BenchmarkResult, run_benchmark
from kvmagic.addons.prefix import prefix_cache as prefix_module
from kvmagic.addons.prefix.marked_prompt import cut_prompt
from kvmagic.core.strategy import DYNAMIC, OFF, parse, parse_list
from kvmagic.errors import KVMagicError
from kvmagic.measure.strategies import resolve
from kvmagic.runner import rounds as rounds_module
from kvmagic.runner.prompt import encode_prompt

from .conftest import PROMPT, raises_usage

SYSTEM = "You are a careful assistant. You answer in short sentences and never guess.\n"
MARKED_PROMPT = f"{SYSTEM}---\nWhat does the KV cache store?"


def test_a_marked_prefix_puts_the_prefix_tokens_first_and_drops_the_line(tiny) -> None:
    inputs, tokens = cut_prompt(tiny, MARKED_PROMPT)
    head = tiny.tokenizer(SYSTEM)["input_ids"]
    rest = tiny.tokenizer("What does the KV cache store?", add_special_tokens=False)["input_ids"]
    assert tokens == len(head) and inputs["input_ids"][0].tolist() == head + rest
    assert inputs["attention_mask"].sum() == len(head) + len(rest)


@pytest.mark.parametrize("prompt", ["no line here", "---\nonly after", f"{SYSTEM}---\n  \n"])
def test_a_marked_prefix_needs_a_line_with_text_on_both_sides(tiny, prompt: str) -> None:
    with pytest.raises(KVMagicError, match=r"^prefix marked needs a line --- between the shared prefix and the rest"):
        run_benchmark(tiny, prompt, new_tokens=2, prefix="marked")


@pytest.fixture(scope="module")
def warm(tiny) -> tuple[BenchmarkResult, list[tuple[str, Any]]]:
    """A --prefix marked run, with what every timed generate was handed."""
    handed: list[tuple[str, Any]] = []
    real = rounds_module.timed_generate

    def recording(model, inputs, config, devices, **options):  # type: ignore[no-untyped-def]
        passed = inputs.get("cache", inputs.get("past_key_values"))
        if config.return_dict_in_generate:  # a timed run: the budget's probes and the one-token runs keep no cache
            # the cache itself is kept, so that no later copy can take a freed one's id
            handed.append(("warm" if passed is not None else "cold", passed and (passed, passed.get_seq_length())))
        return real(model, inputs, config, devices, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rounds_module, "timed_generate", recording)
        result = run_benchmark(tiny, MARKED_PROMPT, new_tokens=4, warmup_tokens=0, repeat=3, prefix="marked")
    return result, handed


def test_each_warm_run_gets_its_own_copy_of_the_prefix_cache_before_the_clock(tiny, warm) -> None:
    result, handed = warm
    assert result.strategies == list(parse_list("off,dynamic,dynamic+prefix"))
    tokens = result.prefix_tokens
    assert tokens == len(tiny.tokenizer(SYSTEM)["input_ids"])
    caches = [cache for kind, cache in handed if kind == "warm"]
    assert [kind for kind, _ in handed] == ["cold", "cold", "warm"] * 3  # off, dynamic, dynamic+prefix per round
    # Handed over as an argument, each copy existed before timed_generate started its clock, holding the prefix
    # alone; every run got its own (one run's generate grows its copy, which the next must not start from).
    assert len({id(cache) for cache, _ in caches}) == 3
    assert [held for _, held in caches] == [tokens] * 3


def test_the_table_sets_the_warm_twin_against_its_cold_self(warm) -> None:
    result, _ = warm
    frame = result.to_dataframe().set_index("strategy")
    cold, twin = result.measurement("dynamic"), result.measurement("dynamic+prefix")
    assert cold is not None and twin is not None
    assert frame.loc["dynamic+prefix", "reused_tokens"] == result.prefix_tokens
    assert frame.loc["dynamic", "reused_tokens"] == 0 and math.isnan(frame.loc["dynamic", "warm_speedup"])
    assert frame.loc["dynamic+prefix", "warm_speedup"] == cold.median_s / twin.median_s
    assert frame.loc["dynamic+prefix", "warm_ttft_speedup"] == cold.ttft_s / twin.ttft_s
    assert bool(frame.loc["dynamic+prefix", "same_as_cold"]) and twin.identical
    (note,) = [n for n in result.notes() if n.startswith("prefix: ")]
    assert f"first {result.prefix_tokens} tokens reused" in note and "with the same tokens" in note
    assert "warm_speedup" in str(result).splitlines()[0]
    again = BenchmarkResult.from_json(result.to_json())
    assert again.prefix_tokens == result.prefix_tokens
    assert again.to_dataframe().equals(result.to_dataframe())


def test_a_warm_twin_slower_than_its_cold_self_is_called_slower(warm) -> None:
    result, _ = warm
    cold = result.measurement("dynamic")
    assert cold is not None
    slowed = [
        dataclasses.replace(m, ttft_s=cold.ttft_s * 2.5, seconds=tuple(s * 1.25 for s in cold.seconds))
        if str(m.strategy) == "dynamic+prefix" else m
        for m in result.measurements
    ]  # fmt: skip
    (note,) = [n for n in dataclasses.replace(result, measurements=slowed).notes() if n.startswith("prefix: ")]
    assert "(2.50x slower), the whole run 1.25x slower" in note and "faster" not in note


def test_only_a_cache_that_grows_and_copies_gets_a_warm_twin(tiny, monkeypatch) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, prefix=4, cache="dynamic,static", quality=False)
    assert result.strategies == list(parse_list("off,dynamic,static,dynamic+prefix,static+prefix"))
    grows = "a reused prefix needs a cache that grows: a static one is sized by the call that builds it"
    assert result.skipped == {parse("static+prefix"): grows}

    class Uncopyable:
        def __deepcopy__(self, memo: object) -> None:
            raise RuntimeError("no copies")

    monkeypatch.setattr(prefix_module, "_built", lambda *args: Uncopyable())
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, prefix=4)
    assert result.skipped == {
        parse("dynamic+prefix"): "its Uncopyable cannot be copied for each run (RuntimeError), so a prefix cannot be "
        "reused with it"
    }
    assert [m.strategy for m in result.measurements] == [OFF, DYNAMIC]


def test_the_prefix_cache_is_built_inside_its_strategys_context(tiny, monkeypatch) -> None:
    """As every generate of a strategy: the untimed run that builds a warm twin's prefix cache enters the context of
    the strategy it twins (a press's hooks, were one to get a twin), and leaves it after."""
    inside = []

    @contextmanager
    def marked(model):
        inside.append(True)
        yield
        inside.append(False)

    real = prefix_module.timed_generate

    def recording(model, inputs, config, devices, **kwargs):  # type: ignore[no-untyped-def]
        handed.append(inside[-1:] == [True])
        return real(model, inputs, config, devices, **kwargs)

    handed: list[bool] = []
    monkeypatch.setattr(prefix_module, "timed_generate", recording)
    cold = dataclasses.replace(resolve(tiny, "dynamic"), wrap=marked)
    plan = SimpleNamespace(loaded=tiny)
    head = {key: value[:, :4] for key, value in encode_prompt(tiny, PROMPT).items()}
    cache = prefix_module._built(plan, head, cold)
    assert handed == [True] and inside == [True, False] and cache.get_seq_length() == 4


def test_a_batch_reuses_a_prefix_per_sequence_and_quality_leaves_the_twin_to_its_cold_self(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0, batch=2, prefix=5, cache="off,dynamic")
    twin = result.measurement("dynamic+prefix")
    assert twin is not None and twin.identical and twin.quality is None
    assert result.measurement("dynamic").quality is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prefix": 400}, r"^prefix 400 leaves no token of the \d+-token prompt after it: give fewer tokens"),
        (
            {"prefix": 4, "prompt_tokens": (4, 8)},
            r"^prefix 4 leaves no token of the 4-token prompt after it: give prefix fewer tokens, or prompt_tokens a",
        ),
        ({"prefix": 0}, r"^prefix must be a number of tokens >= 1 or 'marked', got 0$"),
        (
            {"prefix": "marked", "chat": True},
            r"^prefix marked cuts at the prompt's line ---; chat would wrap it: use prefix N$",
        ),
        (
            {"prefix": "marked", "prompt_tokens": 8},
            r"^prefix marked cuts at the prompt's line ---; prompt_tokens would stretch it: use prefix N$",
        ),
        ({"prefix": 4, "repeat": "auto"}, r"^repeat auto compares the cache off against on: drop it, or drop prefix$"),
        ({"prefix": 4, "predict": True}, r"^predict compares the cache off against on: drop it, or drop prefix$"),
    ],
)
def test_a_prefix_that_cannot_be_reused_is_refused(tiny, kwargs: dict, message: str) -> None:
    with pytest.raises(KVMagicError, match=message):
        run_benchmark(tiny, PROMPT, new_tokens=2, **kwargs)


def test_the_magic_cuts_a_cell_at_its_line(shell) -> None:
    frame = shell.run_cell_magic("kvbench", "-n 2 -w 0 --prefix marked", MARKED_PROMPT)
    assert list(frame["strategy"]) == ["off", "dynamic", "dynamic+prefix"]
    with raises_usage(r"^%kvbench: --prefix: expected a number of tokens >= 1 or 'marked', got 'x' \(see %kvbench\?"):
        shell.run_cell_magic("kvbench", "-n 2 --prefix x", MARKED_PROMPT)
    with raises_usage("^--prefix marked cuts at the prompt's line ---; --chat would wrap it: use --prefix N$"):
        shell.run_cell_magic("kvbench", "-n 2 --prefix marked --chat", MARKED_PROMPT)


def test_a_gate_on_a_prefix_run_takes_the_metrics_its_strategy_rows_have(capsys) -> None:
    from kvmagic.frontends.cli import main

    code = main(["-m", "tiny", "--prefix", "4", "--compare", "base.json", "--fail-on", "cached_s:+10%", "a prompt"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("kvbench: error: cannot read --fail-on 'cached_s:+10%': write METRIC")
    assert "one of speedup, seconds" in err.replace("\n  ", " ")  # refused before any model loads
