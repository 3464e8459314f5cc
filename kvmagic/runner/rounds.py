"""Measuring one configuration: warm-ups, interleaved timed rounds under a stop rule, and what they leave."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any

from kvmagic.core.config import Config
from kvmagic.core.stop import FixedRounds, StopRule
from kvmagic.measure.accelerator import PeakMemory
from kvmagic.measure.lockstep import from_first, slowest
from kvmagic.measure.memory import cache_nbytes
from kvmagic.measure.strategies import Setup, plain_pair, reset_static_cache_state, strategy_config
from kvmagic.measure.timing import profiled_generate, returned_cache, timed_generate
from kvmagic.results.records import StepProfile
from kvmagic.results.result import Measurement
from kvmagic.runner.mismatch import margin_at, strategy_mismatch

if TYPE_CHECKING:
    import torch
    from transformers import BatchEncoding, GenerationConfig

    from kvmagic.core.quality import Quality
    from kvmagic.core.strategy import Strategy
    from kvmagic.measure.loaded import LoadedModel

__all__ = ["Judging", "Measured", "TimedRuns", "first_call", "measure_rounds", "warm_up"]

_ONE_ROUND = FixedRounds(1)
TTFT_RUNS = 3  # one-token runs per strategy whose median is its time to first token
# How a comparison reads each strategy's quality at one configuration (:class:`~kvmagic.runner.judge.Judge`).
Judging = Callable[["LoadedModel", "BatchEncoding", int, Sequence[Setup]], Mapping["Strategy", "Quality"]]


@dataclass(frozen=True)
class TimedRuns:
    """What one strategy's timed runs at a configuration left beside its measurement: how each was asked, what each
    generated (every sequence of its batch), and this process's own seconds (its measurement keeps, across ranks in
    lockstep, the slowest rank's)."""

    config: GenerationConfig
    generated: list[list[list[int]]]
    own_s: list[float]


# What the add-ons make of a configuration's measurements once its rounds are done (the runner asks each add-on's
# ``measured``), from what each strategy's timed runs left.
Measured = Callable[[list[Measurement], Mapping["Strategy", TimedRuns]], list[Measurement]]


def warm_up(loaded: LoadedModel, inputs: BatchEncoding, tokens: int, strategies: Sequence[Setup] = ()) -> None:
    """One untimed run per strategy (the cache off and on unless told), so first-call costs stay out of
    the timed runs."""
    if not tokens:
        return
    for strategy in strategies or plain_pair(loaded):
        with strategy.around(loaded.model):
            timed_generate(loaded.model, inputs, strategy_config(loaded, tokens, strategy), loaded.devices)


def first_call(loaded: LoadedModel, inputs: Mapping[str, Any], new_tokens: int, strategy: Setup) -> float:
    """Seconds of one untimed run of ``strategy`` at this configuration's exact shape (a compile's first call)."""
    config = strategy_config(loaded, new_tokens, strategy)
    inputs = strategy.given(loaded.model, inputs)
    with strategy.around(loaded.model):
        return timed_generate(loaded.model, inputs, config, loaded.devices)[1]


def _first_tokens(loaded: LoadedModel, inputs: BatchEncoding, strategies: Sequence[Setup]) -> dict[Strategy, float]:
    """Each strategy's time to first token: the median of TTFT_RUNS one-token runs, interleaved like the rounds,
    so that no single run slowed by the machine decides it."""
    runs: dict[Strategy, list[float]] = {s.strategy: [] for s in strategies}
    for _ in range(TTFT_RUNS):
        for strategy in strategies:
            runs[strategy.strategy].append(first_call(loaded, inputs, 1, strategy))
    return {name: statistics.median(seconds) for name, seconds in runs.items()}


def measure_rounds(
    loaded: LoadedModel,
    inputs: BatchEncoding,
    *,
    new_tokens: int,
    strategies: Sequence[Setup] = (),
    stop: StopRule = _ONE_ROUND,
    steps: bool = False,
    on_run: Callable[[float], object] | None = None,
    first_calls: Mapping[Strategy, float] | None = None,
    judge: Judging | None = None,
    measured: Measured | None = None,
) -> list[Measurement]:
    """Time interleaved rounds (one run of each strategy per round) until ``stop`` says enough; a
    :class:`Measurement` per strategy, each checked against the first strategy's first run (the reference).

    Everything a measurement holds comes from the runs the protocol makes anyway, read outside the timed
    region: the KV cache's bytes from the cache each timed run returns, peak memory reset before and read
    after each timed run (where the backend keeps a peak: allocator statistics, the kernel's high-water
    mark), and time to first token from the median of TTFT_RUNS one-token runs per strategy, interleaved.
    The hooked run per strategy (per-step times, top-2 margins) comes only with ``steps``, or for the
    strategy whose run differed first, to say how close its choice was there. ``first_calls`` are the
    compiled strategies' untimed first calls, whose excess over the median run is their compile time.
    ``on_run`` hears each run's seconds.
    ``judge``, in a comparison of strategies, reads each strategy's quality against the full cache's;
    ``measured``, the add-ons' part, gets the measurements before any hooked run.
    """
    strategies = strategies or plain_pair(loaded)
    prompt_tokens = inputs["input_ids"].shape[-1]
    configs = {s.strategy: strategy_config(loaded, new_tokens, s, keep_cache=True) for s in strategies}
    rounds = _Rounds(loaded, inputs, prompt_tokens, on_run)
    started = perf_counter()
    while True:
        for strategy in strategies:
            rounds.run(strategy, configs[strategy.strategy])
        if stop.done(len(rounds.seconds[strategies[0].strategy]), perf_counter() - started, rounds.seconds):
            break
    ttft = _first_tokens(loaded, inputs, strategies)
    quality = judge(loaded, inputs, new_tokens, strategies) if judge is not None else {}
    found = [rounds.measurement(s.strategy, Config(prompt_tokens, new_tokens, rounds.batch), ttft) for s in strategies]
    if measured is not None:
        runs = {name: TimedRuns(configs[name], rounds.generated[name], rounds.own[name]) for name in configs}
        found = measured(found, runs)
    profiled = set(configs) if steps else from_first(_first_to_differ(found))  # every rank profiles alike
    kept = []
    for m in found:
        strategy = next(s for s in strategies if s.strategy == m.strategy)
        profiled_run = m.strategy in profiled
        profile = _profile(loaded, inputs, configs[m.strategy], strategy) if profiled_run else None
        mismatch = m.mismatch
        if mismatch is not None and profile is not None:
            ids = rounds.generated[m.strategy][mismatch.run][mismatch.sequence]
            mismatch = dataclasses.replace(mismatch, margin=margin_at(profile, ids, mismatch.position))
        compile_s = (first_calls or {}).get(m.strategy)
        extra = compile_s - m.median_s if compile_s is not None else m.compile_s
        judged = quality.get(m.strategy)
        kept.append(dataclasses.replace(m, profile=profile, mismatch=mismatch, compile_s=extra, quality=judged))
    return kept


def _first_to_differ(found: Sequence[Measurement]) -> set[Strategy]:
    """The strategy whose run, in the order they ran, first left the reference's tokens."""
    differing = [(m.mismatch.run, i, m.strategy) for i, m in enumerate(found) if m.mismatch is not None]
    return {min(differing)[2]} if differing else set()


class _Rounds:
    """The timed runs so far, per strategy in the order they ran, and what each strategy's runs left behind."""

    def __init__(
        self,
        loaded: LoadedModel,
        inputs: BatchEncoding,
        prompt_tokens: int,
        on_run: Callable[[float], object] | None,
    ) -> None:
        self.loaded, self.inputs, self.prompt_tokens, self.on_run = loaded, inputs, prompt_tokens, on_run
        self.devices = loaded.devices  # once: reading it walks every parameter
        self.batch = int(inputs["input_ids"].shape[0])
        self.seconds: dict[Strategy, list[float]] = {}  # each run's slowest rank's (this process's, unsplit)
        self.own: dict[Strategy, list[float]] = {}  # this rank's own
        self.generated: dict[Strategy, list[list[list[int]]]] = {}  # per strategy, per run, every sequence of its batch
        self.kv_bytes: dict[Strategy, int] = {}
        self.peak_bytes: dict[Strategy, int] = {}
        self.peak_source = ""
        self._holder: Strategy | None = None  # the static strategy whose cache transformers keeps on the model now

    def run(self, strategy: Setup, config: GenerationConfig) -> None:
        """One timed run; the cache it returned is counted and dropped, all outside the timed region."""
        loaded, name = self.loaded, strategy.strategy
        if strategy.static and self._holder not in (None, name):
            reset_static_cache_state(loaded.model)  # one static strategy must not run on another's cache
        self._holder = name if strategy.static else self._holder
        given, peak = strategy.given(loaded.model, self.inputs), _quiet_peak(self.devices)
        with strategy.around(loaded.model):
            output, own = timed_generate(loaded.model, given, config, self.devices, peak=peak, own=True)
        elapsed = slowest(own)
        cache = returned_cache(output)
        self.kv_bytes[name] = 0 if cache is None else cache_nbytes(cache)
        if peak is not None:
            self.peak_bytes[name] = max(self.peak_bytes.get(name, 0), peak.peak_bytes)
            self.peak_source = peak.source
        self.seconds.setdefault(name, []).append(elapsed)
        self.own.setdefault(name, []).append(own)
        if self.on_run is not None:
            self.on_run(elapsed)
        self.generated.setdefault(name, []).append(output.sequences[:, self.prompt_tokens :].tolist())

    def measurement(self, name: Strategy, config: Config, ttft: Mapping[Strategy, float]) -> Measurement:
        tokenizer = self.loaded.tokenizer
        first = next(iter(self.generated))  # the strategy that ran first: its first run is the reference
        reference = self.generated[first][0][0]
        ids = self.generated[name][0][0]
        return Measurement(
            config=config,
            strategy=name,
            seconds=tuple(self.seconds[name]),
            generated_ids=tuple(ids),
            generated_text=str(tokenizer.decode(ids)),
            mismatch=strategy_mismatch(tokenizer, reference, self.generated[name], first=name == first),
            ttft_s=ttft[name],
            kv_bytes=self.kv_bytes.get(name),
            peak_bytes=self.peak_bytes.get(name),
            peak_source=self.peak_source if name in self.peak_bytes else "",
        )


def _quiet_peak(devices: tuple[torch.device, ...]) -> PeakMemory | None:
    """A peak tracker that costs nothing inside the timed region: allocator statistics or the kernel's
    high-water mark, never a sampling thread (that would compete with the run it measures)."""
    peak = PeakMemory(devices)
    return None if peak.host and peak.sample else peak


def _profile(loaded: LoadedModel, inputs: Mapping[str, Any], config: GenerationConfig, strategy: Setup) -> StepProfile:
    prompt_tokens = inputs["input_ids"].shape[-1]
    inputs = strategy.given(loaded.model, inputs)
    with strategy.around(loaded.model):
        run = profiled_generate(loaded.model, inputs, config, loaded.devices)
    return StepProfile(
        step_s=tuple(run.step_seconds),
        margins=tuple(run.margins),
        generated_ids=tuple(run.output[0, prompt_tokens:].tolist()),
        peak_bytes=run.peak_bytes,
        kv_bytes=0 if run.cache is None else cache_nbytes(run.cache),
    )
