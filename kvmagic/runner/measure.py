"""Measuring one configuration: warm-ups, interleaved timed rounds under a stop rule, the hooked runs."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from time import perf_counter
from typing import TYPE_CHECKING

from kvmagic.core.stop import FixedRounds, StopRule
from kvmagic.measure.greedy import greedy_config
from kvmagic.measure.memory import cache_nbytes, predicted_kv_nbytes
from kvmagic.measure.strategies import Strategy, plain_pair, reset_static_cache_state
from kvmagic.measure.timing import profiled_generate, timed_generate
from kvmagic.results.data import Measurement
from kvmagic.results.records import StepProfile, times_of
from kvmagic.runner.mismatch import find_mismatch, margin_at, mismatches_by_condition

if TYPE_CHECKING:
    from transformers import BatchEncoding, GenerationConfig

    from kvmagic.model.loading import LoadedModel

__all__ = ["condition_config", "first_call", "measure", "warm_up"]

_ONE_ROUND = FixedRounds(1)


def condition_config(loaded: LoadedModel, new_tokens: int, strategy: Strategy) -> GenerationConfig:
    """The greedy config of one condition: its settings applied to a fresh copy, never to the model's."""
    settings = strategy.settings
    config = greedy_config(loaded.model, loaded.tokenizer, new_tokens, settings.get("use_cache", True))
    for key, value in settings.items():
        setattr(config, key, copy.deepcopy(value))  # generate may consume a cache_config dict
    return config


def warm_up(loaded: LoadedModel, inputs: BatchEncoding, tokens: int, conditions: Sequence[Strategy] = ()) -> None:
    """One untimed run per condition (the cache off and on unless told), so first-call costs stay out of
    the timed runs."""
    if not tokens:
        return
    for condition in conditions or plain_pair(loaded):
        timed_generate(loaded.model, inputs, condition_config(loaded, tokens, condition), loaded.devices)


def first_call(loaded: LoadedModel, inputs: BatchEncoding, new_tokens: int, condition: Strategy) -> float:
    """Seconds of one untimed run of ``condition`` at this configuration's exact shape (a compile's first call)."""
    config = condition_config(loaded, new_tokens, condition)
    return timed_generate(loaded.model, inputs, config, loaded.devices)[1]


def measure(
    loaded: LoadedModel,
    inputs: BatchEncoding,
    *,
    new_tokens: int,
    conditions: Sequence[Strategy] = (),
    stop: StopRule = _ONE_ROUND,
    profile: bool = True,
) -> Measurement:
    """Time interleaved rounds (one run of each condition per round) until ``stop`` says enough, and
    check that every run generated the same tokens as the first.

    The headline runs are bare ``generate`` calls. After them comes one extra hooked run per
    condition for what needs hooks: per-step times, top-2 margins, peak memory and the returned
    cache. Their cost never reaches the headline times; ``profile=False`` skips them.
    """
    conditions = conditions or plain_pair(loaded)
    prompt_tokens = inputs["input_ids"].shape[-1]
    configs = {c.name: condition_config(loaded, new_tokens, c) for c in conditions}
    runs: list[str] = []
    seconds: list[float] = []
    generated: list[list[int]] = []
    started = perf_counter()
    rounds = 0
    holder = None  # the static strategy whose cache transformers keeps on the model now
    while True:
        for condition in conditions:
            name = condition.name
            if condition.static and holder not in (None, name):
                reset_static_cache_state(loaded.model)  # untimed: one static strategy must not run on another's
            holder = name if condition.static else holder
            output, elapsed = timed_generate(loaded.model, inputs, configs[name], loaded.devices)
            runs.append(name)
            seconds.append(elapsed)
            generated.append(output[0, prompt_tokens:].tolist())
        rounds += 1
        times = {name: times_of(runs, seconds, name) for name in configs}
        if stop.done(rounds, perf_counter() - started, times):
            break
    profiles = {name: _profile(loaded, inputs, c, prompt_tokens) for name, c in configs.items()} if profile else {}
    found = _measurement(loaded, prompt_tokens, new_tokens, runs, seconds, generated, profiles)
    return dataclasses.replace(found, sequential=stop.sequential)


def _measurement(
    loaded: LoadedModel,
    prompt_tokens: int,
    new_tokens: int,
    runs: list[str],
    seconds: list[float],
    generated: list[list[int]],
    profiles: dict[str, StepProfile],
) -> Measurement:
    tokenizer, model = loaded.tokenizer, loaded.model
    reference = generated[0]
    mismatch = find_mismatch(tokenizer, reference, generated, range(1, len(generated)))
    if mismatch is not None and profiles:
        margin = margin_at(profiles[runs[mismatch.run]], generated[mismatch.run], mismatch.position)
        mismatch = dataclasses.replace(mismatch, margin=margin)
    return Measurement(
        prompt_tokens=prompt_tokens,
        new_tokens=new_tokens,
        runs=tuple(runs),
        seconds=tuple(seconds),
        generated_ids=tuple(reference),
        generated_text=str(tokenizer.decode(reference)),
        mismatch=mismatch,
        mismatches=mismatches_by_condition(tokenizer, runs, generated),
        profiles=profiles,
        # generate computes keys and values for every position but the last generated token's.
        kv_predicted_bytes=predicted_kv_nbytes(model.config, prompt_tokens + new_tokens - 1, model.dtype),
    )


def _profile(loaded: LoadedModel, inputs: BatchEncoding, config: GenerationConfig, prompt_tokens: int) -> StepProfile:
    run = profiled_generate(loaded.model, inputs, config, loaded.devices)
    return StepProfile(
        step_s=tuple(run.step_seconds),
        margins=tuple(run.margins),
        generated_ids=tuple(run.output[0, prompt_tokens:].tolist()),
        peak_bytes=run.peak_bytes,
        kv_bytes=0 if run.cache is None else cache_nbytes(run.cache),
    )
