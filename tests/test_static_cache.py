"""Static caches: the state transformers keeps between calls, and when it compiles one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
import transformers

from kvmagic.measure import strategies
from kvmagic.measure.capabilities import static_cache_state
from kvmagic.measure.greedy import greedy_config
from kvmagic.measure.memory import cache_nbytes, kv_sizes
from kvmagic.measure.strategies import reset_static_cache_state, resolve
from kvmagic.measure.timing import profiled_generate
from kvmagic.runner.prompt import encode_prompt

from .conftest import PROMPT


def _static_run(tiny, inputs, new_tokens: int, name: str = "static") -> Any:
    config = greedy_config(tiny.model, tiny.tokenizer, new_tokens, True)
    for key, value in resolve(tiny, name).settings.items():
        setattr(config, key, value)
    return profiled_generate(tiny.model, inputs, config, tiny.devices)


def _held_tokens(tiny, cache: Any) -> float:
    """Positions the returned cache holds, from its bytes (transformers 5 adds a few bytes of counters)."""
    return cache_nbytes(cache) / kv_sizes(tiny.model.config, tiny.dtype).held_bytes(1)


@pytest.fixture
def inputs(tiny):
    reset_static_cache_state(tiny.model)
    yield encode_prompt(tiny, PROMPT)
    reset_static_cache_state(tiny.model)


def test_a_short_static_run_after_a_long_one_holds_the_long_cache_unless_reset(tiny, inputs) -> None:
    prompt = inputs["input_ids"].shape[-1]
    _static_run(tiny, inputs, 64)
    carried = _static_run(tiny, inputs, 8)
    assert int(_held_tokens(tiny, carried.cache)) == prompt + 64 - 1
    reset_static_cache_state(tiny.model)
    sized = _static_run(tiny, inputs, 8)
    exact = kv_sizes(tiny.model.config, tiny.dtype).after(prompt, 8)
    assert 0 <= cache_nbytes(sized.cache) - exact <= 8 * tiny.model.config.num_hidden_layers
    assert sized.output.tolist() == carried.output.tolist()


def test_the_reset_forgets_what_the_installed_line_keeps(tiny) -> None:
    """4.55 keeps the cache object (an offloaded static one, once run, is reused for static); 5.x its length."""
    model, kept = tiny.model, static_cache_state()
    assert kept in (("_cache",), ("_previous_max_cache_length",))
    for name in kept:
        setattr(model, name, object())
    reset_static_cache_state(model)
    assert not set(kept) & set(vars(model))
    reset_static_cache_state(model)  # nothing there: nothing to do


def _fake(device: str, device_map: dict[str, Any] | None = None, quantizer: Any = None) -> SimpleNamespace:
    model = SimpleNamespace(device=torch.device(device), _can_compile_fullgraph=True, hf_quantizer=quantizer)
    if device_map is not None:
        model.hf_device_map = device_map
    return model


def _loaded(model: SimpleNamespace) -> SimpleNamespace:
    places = getattr(model, "hf_device_map", {"": model.device}).values()
    devices = {torch.device("cuda", p) if isinstance(p, int) else torch.device(p) for p in places if p != "disk"}
    return SimpleNamespace(model=model, devices=tuple(sorted(devices, key=str)))


PLACEMENTS = {
    "one gpu": ("cuda:0", {"": 0}, None),
    "no map": ("cuda:0", None, None),
    "two gpus": ("cuda:0", {"model.layers.0": 0, "model.layers.1": 1}, None),
    "gpu and cpu": ("cuda:0", {"model.layers.0": 0, "lm_head": "cpu"}, None),
    "gpu and disk": ("cuda:0", {"model.layers.0": 0, "lm_head": "disk"}, None),
    "cpu only map": ("cpu", {"": "cpu"}, None),
    "quantized, not compileable": ("cuda:0", {"": 0}, SimpleNamespace(is_compileable=False)),
    "quantized, compileable": ("cuda:0", {"": 0}, SimpleNamespace(is_compileable=True)),
    "xpu": ("xpu:0", None, None),
}


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_the_compile_reason_says_what_transformers_decides(tiny, placement: str) -> None:
    """Ask transformers' own criteria about a model placed so, with a real static cache and the
    +compile settings: a row claims a compile exactly when transformers would do it."""
    device, device_map, quantizer = PLACEMENTS[placement]
    fake = _fake(device, device_map, quantizer)
    fake.config = tiny.model.config
    config = greedy_config(tiny.model, tiny.tokenizer, 2, True)
    for key, value in resolve(tiny, "static+compile").settings.items():
        setattr(config, key, value)
    try:
        cache = transformers.StaticCache(config=tiny.model.config, max_cache_len=8, max_batch_size=1)  # 4.55
    except TypeError:  # 5.x sizes the batch on first write
        cache = transformers.StaticCache(config=tiny.model.config, max_cache_len=8)
    model_kwargs = {"cache": cache, "past_key_values": cache}  # 5.24 reads the first, 4.55 and 5.17 the second
    compiles = type(tiny.model)._valid_auto_compile_criteria(fake, model_kwargs, config)
    reason = strategies._compile_reason(_loaded(fake))
    assert (reason == "") is compiles, reason
    assert reason == "" or reason.endswith(": not compiled")


def test_the_reason_names_the_cpu_offload(tiny) -> None:
    reason = strategies._compile_reason(_loaded(_fake("cuda:0", {"a": 0, "b": "cpu"})))
    assert "layers on the CPU beside the accelerator" in reason
    reason = strategies._compile_reason(_loaded(_fake("cuda:0", {"a": 0, "b": "disk"})))
    assert "offloads layers to disk" in reason


def test_each_row_records_the_static_cache_it_used_sized_for_that_row(tiny) -> None:
    """A longer configuration first, then a shorter one: the shorter row's static cache has its own length."""
    from kvmagic import run_benchmark

    result = run_benchmark(tiny, "The KV cache", new_tokens=[8, 2], warmup_tokens=0, cache="off,static")
    rows = result.to_dataframe().set_index(["new_tokens", "strategy"])
    prompt = result.configs[0].prompt_tokens
    # Preallocated for the whole sequence (the last token's keys and values are never written; transformers
    # 5 adds a few bytes of counters per layer, 4.55 one position): within one position of prompt + new.
    assert abs(rows.loc[(8, "static"), "cache_tokens"] - (prompt + 8)) <= 1
    assert abs(rows.loc[(2, "static"), "cache_tokens"] - (prompt + 2)) <= 1  # not the 8-token row's cache
    assert rows.loc[(2, "off"), "cache_tokens"] == 0


def test_no_static_cache_outlives_the_run_that_made_it(tiny, monkeypatch) -> None:
    from kvmagic import run_benchmark
    from kvmagic.runner import benchmark

    kept: list[set[str]] = []
    real = benchmark._run

    def measured(*args: Any) -> Any:
        found = real(*args)
        kept.append(set(static_cache_state()) & set(vars(tiny.model)))  # what the run left, before the end
        return found

    monkeypatch.setattr(benchmark, "_run", measured)
    run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0, cache="off,static", quality=False)
    assert kept == [set(static_cache_state())]  # the installed line keeps its state on the model during a run
    assert not set(static_cache_state()) & set(vars(tiny.model))  # and the run takes it away at its end
