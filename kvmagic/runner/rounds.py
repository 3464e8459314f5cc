"""Measuring one configuration: warm-ups, interleaved timed rounds under a stop rule, and what they leave."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import TYPE_CHECKING

from kvmagic.core.stop import FixedRounds, StopRule
from kvmagic.measure.accelerator import PeakMemory
from kvmagic.measure.greedy import greedy_config
from kvmagic.measure.memory import cache_nbytes, predicted_kv_nbytes
from kvmagic.measure.strategies import Strategy, plain_pair, reset_static_cache_state
from kvmagic.measure.timing import profiled_generate, returned_cache, timed_generate
from kvmagic.results.records import StepProfile, times_of
from kvmagic.results.result import Measurement
from kvmagic.runner.mismatch import batch_mismatches, margin_at

if TYPE_CHECKING:
    import torch
    from transformers import BatchEncoding, GenerationConfig

    from kvmagic.model.loading import LoadedModel

__all__ = ["condition_config", "first_call", "measure_rounds", "warm_up"]

_ONE_ROUND = FixedRounds(1)


def condition_config(
    loaded: LoadedModel, new_tokens: int, strategy: Strategy, *, keep_cache: bool = False
) -> GenerationConfig:
    """The greedy config of one condition: its settings applied to a fresh copy, never to the model's.

    ``keep_cache`` asks ``generate`` to return the cache it built (it builds it either way)."""
    settings = strategy.settings
    config = greedy_config(loaded.model, loaded.tokenizer, new_tokens, settings.get("use_cache", True))
    for key, value in settings.items():
        setattr(config, key, copy.deepcopy(value))  # generate may consume a cache_config dict
    config.return_dict_in_generate = keep_cache
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


def measure_rounds(
    loaded: LoadedModel,
    inputs: BatchEncoding,
    *,
    new_tokens: int,
    conditions: Sequence[Strategy] = (),
    stop: StopRule = _ONE_ROUND,
    steps: bool = False,
    on_run: Callable[[float], object] | None = None,
) -> Measurement:
    """Time interleaved rounds (one run of each condition per round) until ``stop`` says enough, and
    check that every run generated the same tokens as the first.

    Everything a row reports comes from the runs the protocol makes anyway, read outside the timed
    region: the KV cache's bytes from the cache each timed run returns, peak memory reset before and
    read after each timed run (where the backend keeps a peak: allocator statistics, the kernel's
    high-water mark), and time to first token from one one-token run per condition. The hooked run
    per condition (per-step times, top-2 margins) comes only with ``steps``, or for the condition
    whose tokens differed, to say how close its choice was there. ``on_run`` hears each timed run's seconds.
    """
    conditions = conditions or plain_pair(loaded)
    prompt_tokens = inputs["input_ids"].shape[-1]
    configs = {c.name: condition_config(loaded, new_tokens, c, keep_cache=True) for c in conditions}
    rounds = _Rounds(loaded, inputs, prompt_tokens, on_run)
    started = perf_counter()
    while True:
        for condition in conditions:
            rounds.run(condition, configs[condition.name])
        if stop.done(rounds.count(conditions), perf_counter() - started, rounds.times(conditions)):
            break
    ttft = {c.name: first_call(loaded, inputs, 1, c) for c in conditions}
    found = _measurement(loaded, prompt_tokens, new_tokens, rounds, ttft)
    profiled = list(configs) if steps else [found.runs[found.mismatch.run]] if found.mismatch else []
    profiles = {name: _profile(loaded, inputs, configs[name], prompt_tokens) for name in profiled}
    mismatch = found.mismatch
    if mismatch is not None and profiles:
        ids = rounds.generated[mismatch.run][mismatch.sequence]
        mismatch = dataclasses.replace(
            mismatch, margin=margin_at(profiles[found.runs[mismatch.run]], ids, mismatch.position)
        )
    return dataclasses.replace(found, profiles=profiles, mismatch=mismatch, sequential=stop.sequential)


class _Rounds:
    """The timed runs so far, in the order they ran, and what each condition's runs left behind."""

    def __init__(
        self, loaded: LoadedModel, inputs: BatchEncoding, prompt_tokens: int, on_run: Callable[[float], object] | None
    ) -> None:
        self.loaded, self.inputs, self.prompt_tokens, self.on_run = loaded, inputs, prompt_tokens, on_run
        self.devices = loaded.devices  # once: reading it walks every parameter
        self.names: list[str] = []
        self.seconds: list[float] = []
        self.generated: list[list[list[int]]] = []  # per run, every sequence of its batch
        self.kv_bytes: dict[str, int] = {}
        self.peak_bytes: dict[str, int] = {}
        self.peak_source = ""
        self._holder: str | None = None  # the static strategy whose cache transformers keeps on the model now

    def run(self, condition: Strategy, config: GenerationConfig) -> None:
        """One timed run; the cache it returned is counted and dropped, all outside the timed region."""
        loaded, name = self.loaded, condition.name
        if condition.static and self._holder not in (None, name):
            reset_static_cache_state(loaded.model)  # one static strategy must not run on another's cache
        self._holder = name if condition.static else self._holder
        peak = _quiet_peak(self.devices)
        output, elapsed = timed_generate(loaded.model, self.inputs, config, self.devices, peak=peak)
        cache = returned_cache(output)
        self.kv_bytes[name] = 0 if cache is None else cache_nbytes(cache)
        if peak is not None:
            self.peak_bytes[name] = max(self.peak_bytes.get(name, 0), peak.peak_bytes)
            self.peak_source = peak.source
        self.names.append(name)
        self.seconds.append(elapsed)
        if self.on_run is not None:
            self.on_run(elapsed)
        self.generated.append(output.sequences[:, self.prompt_tokens :].tolist())

    def count(self, conditions: Sequence[Strategy]) -> int:
        return len(self.names) // len(conditions)

    def times(self, conditions: Sequence[Strategy]) -> dict[str, list[float]]:
        return {c.name: times_of(self.names, self.seconds, c.name) for c in conditions}


def _quiet_peak(devices: tuple[torch.device, ...]) -> PeakMemory | None:
    """A peak tracker that costs nothing inside the timed region: allocator statistics or the kernel's
    high-water mark, never a sampling thread (that would compete with the run it measures)."""
    peak = PeakMemory(devices)
    return None if peak.host and peak.sample else peak


def _measurement(
    loaded: LoadedModel, prompt_tokens: int, new_tokens: int, rounds: _Rounds, ttft: dict[str, float]
) -> Measurement:
    tokenizer, model, generated = loaded.tokenizer, loaded.model, rounds.generated
    reference, batch = generated[0][0], len(generated[0])
    mismatch, mismatches = batch_mismatches(tokenizer, rounds.names, generated)
    return Measurement(
        prompt_tokens=prompt_tokens,
        new_tokens=new_tokens,
        runs=tuple(rounds.names),
        seconds=tuple(rounds.seconds),
        generated_ids=tuple(reference),
        generated_text=str(tokenizer.decode(reference)),
        mismatch=mismatch,
        mismatches=mismatches,
        # generate computes keys and values for every position but the last generated token's, per sequence.
        kv_predicted_bytes=batch * predicted_kv_nbytes(model.config, prompt_tokens + new_tokens - 1, model.dtype),
        kv_position_bytes=batch * predicted_kv_nbytes(model.config, 1, model.dtype),  # one position, every sequence
        ttft_s=ttft,
        kv_bytes=rounds.kv_bytes,
        peak_bytes=rounds.peak_bytes,
        peak_source=rounds.peak_source,
        batch=batch,
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
