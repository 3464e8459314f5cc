"""Nothing a checkpoint ships changes what is measured: sampling, penalties, its cache and compile settings."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
import transformers
from packaging.version import Version

from kvmagic.measure.greedy import GREEDY_OFF, greedy_config, non_greedy_settings
from kvmagic.measure.strategies import resolve
from kvmagic.measure.timing import profiled_generate, timed_generate
from kvmagic.runner.prompt import encode_prompt

from .conftest import PROMPT

TF5 = Version(transformers.__version__).major >= 5
NEW_TOKENS = 6


def _config(tiny, settings: dict[str, Any], new_tokens: int = NEW_TOKENS) -> transformers.GenerationConfig:
    config = greedy_config(tiny.model, tiny.tokenizer, new_tokens, settings.get("use_cache", True))
    for key, value in settings.items():
        setattr(config, key, copy.deepcopy(value))
    return config


@pytest.fixture
def own_config(tiny) -> Iterator[transformers.GenerationConfig]:
    """The model's generation config, free to change: the original object comes back afterwards."""
    original = tiny.model.generation_config
    tiny.model.generation_config = copy.deepcopy(original)
    try:
        yield tiny.model.generation_config
    finally:
        tiny.model.generation_config = original


@pytest.fixture
def inputs(tiny):
    return encode_prompt(tiny, PROMPT)


def _ids(tiny, inputs, settings: dict[str, Any]) -> list[int]:
    output, _ = timed_generate(tiny.model, inputs, _config(tiny, settings), tiny.devices)
    return output[0, inputs["input_ids"].shape[-1] :].tolist()


def _shipped(ids: list[int]) -> dict[str, Any]:
    """What an instruct checkpoint may put in its generation_config.json, each a change to greedy output or speed."""
    return {
        "do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 20, "repetition_penalty": 1.3,
        "no_repeat_ngram_size": 2, "encoder_repetition_penalty": 1.2, "bad_words_ids": [[ids[1]]],
        "sequence_bias": [[[ids[2]], -20.0]], "suppress_tokens": [ids[3]], "begin_suppress_tokens": [ids[0]],
        "forced_bos_token_id": 5, "forced_eos_token_id": 7, "exponential_decay_length_penalty": (1, 3.0),
        "renormalize_logits": True, "guidance_scale": 1.5, "low_memory": True, "prompt_lookup_num_tokens": 3,
        "cache_implementation": "static", "min_length": 40, "stop_strings": None,
        "watermarking_config": transformers.WatermarkingConfig(bias=8.0),
    }  # fmt: skip


def test_greedy_runs_ignore_every_setting_the_checkpoint_ships(tiny, own_config, inputs, monkeypatch) -> None:
    baseline = _ids(tiny, inputs, {})
    for key, value in _shipped(baseline).items():
        setattr(own_config, key, value)
    saved = own_config.to_dict()
    prepared: list[transformers.GenerationConfig] = []
    original = tiny.model._prepare_generation_config

    def record(*args: Any, **kwargs: Any) -> Any:
        config, model_kwargs = original(*args, **kwargs)
        prepared.append(copy.deepcopy(config))
        return config, model_kwargs

    monkeypatch.setattr(tiny.model, "_prepare_generation_config", record)
    assert _ids(tiny, inputs, {}) == baseline
    used = prepared[-1]  # what generate ran with, after transformers filled it from the model's defaults
    wrong = {k: getattr(used, k) for k, off in GREEDY_OFF.items() if hasattr(used, k) and getattr(used, k) != off}
    assert wrong == {}
    assert used.cache_implementation == "dynamic"
    assert used.get_generation_mode() == "greedy_search"
    assert tiny.model.generation_config is own_config and own_config.to_dict() == saved


def test_the_settings_that_differ_from_greedy_are_listed(tiny, own_config) -> None:
    assert non_greedy_settings(tiny.model) == {}
    shipped = _shipped([10, 11, 12, 13])
    for key, value in shipped.items():
        setattr(own_config, key, value)
    listed = non_greedy_settings(tiny.model)
    assert set(listed) == {k for k, v in shipped.items() if v is not None}
    assert listed["watermarking_config"] == shipped["watermarking_config"].to_dict()
    assert listed["exponential_decay_length_penalty"] == [1, 3.0]
    assert listed["repetition_penalty"] == 1.3 and listed["sequence_bias"] == shipped["sequence_bias"]
    assert json.loads(json.dumps(listed)) == listed


@contextmanager
def _model_config_cache(tiny, implementation: str) -> Iterator[None]:
    text_config = tiny.model.config.get_text_config()
    had, before = hasattr(text_config, "cache_implementation"), getattr(text_config, "cache_implementation", None)
    text_config.cache_implementation = implementation
    try:
        yield
    finally:
        if had:
            text_config.cache_implementation = before
        else:
            del text_config.cache_implementation


@pytest.mark.parametrize("where", ["generation_config", "model config"])
def test_the_cached_condition_and_dynamic_state_their_cache(tiny, own_config, inputs, where: str) -> None:
    """transformers 4.55 falls back to a cache_implementation in the model config; a checkpoint's
    generation config may name one too. The cached strategy and ``dynamic`` get a dynamic cache anyway."""
    if where == "generation_config":
        own_config.cache_implementation = "static"
    with _model_config_cache(tiny, "static" if where == "model config" else None):
        assert (where == "model config") == ("config.cache_implementation" in non_greedy_settings(tiny.model))
        for settings in ({"use_cache": True}, dict(resolve(tiny, "dynamic").settings)):
            run = profiled_generate(tiny.model, inputs, _config(tiny, settings), tiny.devices)
            assert type(run.cache).__name__ == "DynamicCache"


@contextmanager
def _as_if_on_cuda(model: torch.nn.Module) -> Iterator[None]:
    cls = type(model)
    assert "device" not in vars(cls)
    cls.device = property(lambda self: torch.device("cuda", 0))
    try:
        yield
    finally:
        del cls.device


def test_only_a_compile_strategy_would_be_compiled_on_cuda(tiny, inputs, monkeypatch) -> None:
    """transformers compiles any static cache by itself on CUDA unless told not to: ask its own
    criteria, as if the model sat on CUDA, for every strategy's generate (then run uncompiled here)."""
    decisions: list[tuple[str, bool]] = []
    criteria = type(tiny.model)._valid_auto_compile_criteria
    name = ""

    def on_cuda(model_kwargs: dict, generation_config: transformers.GenerationConfig) -> bool:
        with _as_if_on_cuda(tiny.model):
            decisions.append((name, criteria(tiny.model, model_kwargs, generation_config)))
        return False

    monkeypatch.setattr(tiny.model, "_valid_auto_compile_criteria", on_cuda)
    for name in ("off", "dynamic", "static", "static+compile"):
        timed_generate(tiny.model, inputs, _config(tiny, dict(resolve(tiny, name).settings), 2), tiny.devices)
    name = "cached strategy"
    timed_generate(tiny.model, inputs, _config(tiny, {"use_cache": True}, 2), tiny.devices)
    assert [n for n, compiled in decisions if compiled] == ["static+compile"]
    assert {n for n, _ in decisions} == {"off", "dynamic", "static", "static+compile", "cached strategy"}


def test_the_model_config_object_is_never_replaced_for_good(tiny, inputs) -> None:
    own = tiny.model.generation_config

    class Boom(RuntimeError):
        pass

    def explode(*args: Any, **kwargs: Any) -> None:
        assert tiny.model.generation_config is not own  # the run's own config stands in during the call
        raise Boom

    original = tiny.model.generate
    tiny.model.generate = explode
    try:
        with pytest.raises(Boom):
            timed_generate(tiny.model, inputs, _config(tiny, {}), tiny.devices)
    finally:
        del tiny.model.generate
    assert tiny.model.generate == original and tiny.model.generation_config is own


@pytest.mark.parametrize("name", ["off", "dynamic", "static"])
def test_a_greedy_run_draws_no_warning_from_transformers(tiny, inputs, name: str, caplog, recwarn, monkeypatch) -> None:
    monkeypatch.setattr(logging.getLogger("transformers"), "propagate", True)  # transformers keeps its logs apart
    config = _config(tiny, dict(resolve(tiny, name).settings))
    with caplog.at_level("WARNING"):
        timed_generate(tiny.model, inputs, config, tiny.devices)
        profiled_generate(tiny.model, inputs, config, tiny.devices)
    assert [r.getMessage() for r in caplog.records] == []
    assert [str(w.message) for w in recwarn] == []


@pytest.mark.gpu
def test_on_cuda_transformers_decides_to_compile_only_the_compile_strategy(tiny, inputs, monkeypatch) -> None:
    """Its real decision, on the real device; the compile itself is skipped (it takes a while)."""
    decisions: list[tuple[str, bool]] = []
    decide = tiny.model._valid_auto_compile_criteria
    name = ""

    def record(model_kwargs: dict, generation_config: transformers.GenerationConfig) -> bool:
        decisions.append((name, decide(model_kwargs, generation_config)))
        return False

    monkeypatch.setattr(tiny.model, "_valid_auto_compile_criteria", record)
    for name in ("off", "dynamic", "static", "offloaded_static", "static+compile"):
        timed_generate(tiny.model, inputs, _config(tiny, dict(resolve(tiny, name).settings), 2), tiny.devices)
    assert [n for n, compiled in decisions if compiled] == ["static+compile"]
