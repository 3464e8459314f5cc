"""The runner: plan the configurations, warm up, measure each under its stop rule, build the result once.

Off/on is the two-strategy case of a ``cache`` comparison: both go through the same warm-up, the
same measuring loop (:func:`kvmagic.runner.rounds.measure_rounds`) and the same result.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any

from kvmagic.core.addon import AddOn, addons, used_by
from kvmagic.core.config import Config
from kvmagic.core.sequential import first_stop
from kvmagic.core.spec import BenchSpec
from kvmagic.core.stop import stop_rule
from kvmagic.core.strategy import PAIR, Strategy
from kvmagic.measure.accelerator import release_memory
from kvmagic.measure.environment import environment
from kvmagic.measure.greedy import non_greedy_settings
from kvmagic.measure.guards import is_out_of_memory, with_memory_advice
from kvmagic.measure.lockstep import lockstep
from kvmagic.measure.memory import kv_sizes
from kvmagic.measure.strategies import reset_static_cache_state
from kvmagic.measure.threads import torch_threads
from kvmagic.results.records import DEADLINE_STOPS, RunFacts
from kvmagic.results.result import BenchmarkResult, Measurement
from kvmagic.runner.deadline_run import Cut, Deadline, HeldTo, LeftOut, cut_after
from kvmagic.runner.plan import Plan, make_plan, probe_two_tokens, rounds_of, todo
from kvmagic.runner.progress import Bar, Eta, progress_bar
from kvmagic.runner.prompt import batched
from kvmagic.runner.rounds import TTFT_RUNS, TimedRuns, first_call, measure_rounds, warm_up

if TYPE_CHECKING:
    from transformers import BatchEncoding

    from kvmagic.measure.loaded import LoadedModel
    from kvmagic.measure.strategies import Setup

__all__ = ["PROGRESS_AFTER_S", "run_benchmark"]

PROGRESS_AFTER_S = 1.0  # a run shows its progress bar once it has lasted this long (its estimate included)


def run_benchmark(
    loaded: LoadedModel, prompt: str, spec: BenchSpec | None = None, *, progress: bool = False, label: str = "",
    **options: Any,
) -> BenchmarkResult:  # fmt: skip
    """Time greedy generation of ``prompt`` with the KV cache off and on, as ``spec`` asks.

    ``options`` are :class:`~kvmagic.core.spec.BenchSpec` fields (``new_tokens=64, repeat=3``),
    applied over ``spec``. The protocol: tokenize once; warm up each strategy with
    ``warmup_tokens`` untimed tokens; then rounds of one uncached and one cached timed run,
    interleaved so drift hits both alike, until the stop rule (``repeat``: a number, or ``"auto"``)
    says enough. Times are medians; the speed-up is a ratio of medians. Several lengths make a
    sweep over their cross product; ``cache`` compares strategies instead of off/on. ``progress``
    shows a progress bar over a sweep, its description led by ``label`` (the model's name, say). A
    KeyboardInterrupt ends a sweep early: the configurations finished so far come back, the result ``partial``.
    A model loaded as one of several ranks a launcher started (``loaded.world``) is measured by every rank in
    lockstep (:mod:`kvmagic.measure.lockstep`); only the first rank shows progress, and the add-ons' ``finished``
    make every rank's result the same.
    """
    spec = BenchSpec.of(spec, **options)
    progress = progress and (loaded.world is None or loaded.world.first)
    longest = max(spec.new_tokens)
    advice = (
        f"out of accelerator memory generating {'' if len(spec.new_tokens) == 1 else 'up to '}{longest} tokens: "
        "lower {new_tokens}, shorten the prompt, or load the model with a smaller {dtype} (float16 or bfloat16)"
    )
    # A partial, not a lambda: a closure would keep ``loaded`` alive in the frames of a failed run.
    with torch_threads(spec.threads):  # the whole run, probes and estimates too; put back after
        try:
            run = partial(_run, loaded, prompt, spec, progress, label)
            return with_memory_advice(run, advice, "new_tokens", "dtype")
        finally:  # a static cache transformers keeps on the model must not outlive the run (4.55 keeps it whole)
            reset_static_cache_state(loaded.model)


def _run(loaded: LoadedModel, prompt: str, spec: BenchSpec, progress: bool, label: str) -> BenchmarkResult:
    plan = make_plan(loaded, prompt, spec)
    before = {addon: addon.before(plan) for addon in used_by(spec)}  # probes, untimed, before any run
    deadline = Deadline(spec.max_seconds, rounds=rounds_of(plan), first_tokens=TTFT_RUNS, clock=perf_counter)
    planned = todo(plan, before)
    measurements: list[Measurement] = []
    stopped = ""  # why the configurations left were not measured
    try:
        with progress_bar(enabled=progress, delay_s=PROGRESS_AFTER_S) as bar:
            deadline.start()
            with cut_after(_cut_in(deadline, loaded, planned)):
                eta = bar.eta = _warm_first(plan, planned, deadline)
                for found in _measure_each(plan, planned, bar, eta, label, deadline, before):
                    measurements += found
                if deadline.left_out and not measurements:  # its bar leaves no trace: the error says it all
                    raise deadline.nothing_finished([s.strategy for s in plan.runnable])
    except Cut:  # past the deadline by its margin: the run under way is dropped, the finished ones kept
        deadline.stopped_by_cut(planned, {m.config for m in measurements})
        stopped = "cut"
    except KeyboardInterrupt:
        if len(plan.configs) == 1:  # nothing finished to return: the user asked to stop
            raise
        stopped = "interrupted"  # the interrupted configuration is dropped: only finished rows are results
    except RuntimeError as error:
        if not (is_out_of_memory(error) and measurements):
            raise  # with nothing finished, the memory advice says what to change
        stopped = f"out of accelerator memory at {deadline.current}"
    if stopped.startswith("out of"):
        release_memory()  # only now: inside the except block the error's frames held the failed run's tensors
    if stopped == "cut" and not measurements:  # raised here, not in the except block: no frames kept
        raise deadline.nothing_finished([s.strategy for s in plan.runnable])
    stopped = stopped or ("deadline" if deadline.left_out else "")  # work left out that it did not start
    measurements = _as_asked(plan, measurements)
    kept = {addon.name: addon.after(plan, measurements, found) for addon, found in before.items()}
    return _result(plan, prompt, deadline, measurements, stopped, kept)


def _as_asked(plan: Plan, measurements: list[Measurement]) -> list[Measurement]:
    """The measurements in the order the configurations were asked for: they were measured the least work first."""
    order = {config: index for index, config in enumerate(plan.configs)}
    return sorted(measurements, key=lambda m: order[m.config])


def _result(
    plan: Plan, prompt: str, deadline: Deadline, measurements: list[Measurement], stopped: str,
    kept: Mapping[str, Any],
) -> BenchmarkResult:  # fmt: skip
    """The result, built once from what was measured, what the run found out and what each add-on kept."""
    loaded, spec = plan.loaded, plan.spec
    result = BenchmarkResult(
        model=loaded.name,
        measurements=measurements,
        spec=spec,
        strategies=[s.strategy for s in plan.strategies],
        skipped=dict(plan.skipped),
        remarks=plan.remarks,
        metadata=environment(loaded),
        facts=_facts(plan, prompt, deadline, stopped),
        addons={name: data for name, data in kept.items() if data is not None},
    )
    for addon in addons():
        result = addon.finished(plan, result)
    return result


def _cut_in(deadline: Deadline, loaded: LoadedModel, planned: list[Config]) -> float | None:
    """Seconds until the timer cuts the run (None: never): not with nothing to measure, and never across ranks:
    one rank cut in a collective would leave the others waiting in it; their deadline is kept by what each
    starts, decided alike."""
    return deadline.cut_in if loaded.world is None and planned else None


def _facts(plan: Plan, prompt: str, deadline: Deadline, stopped: str) -> RunFacts:
    """What the run found out besides its times."""
    loaded, spec = plan.loaded, plan.spec
    model = loaded.model
    left_out = tuple(deadline.left_out) if stopped in DEADLINE_STOPS else ()
    return RunFacts(
        prompt_sha256=hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest(),
        prompt=prompt,
        natural_prompt_tokens=plan.natural_tokens,
        prompt_stretched=spec.prompt_tokens is not None and any(n != plan.natural_tokens for n in plan.inputs),
        configurations=len(plan.configs),
        estimated_s=deadline.estimate_s,
        stopped=stopped,
        left_out=left_out,
        fitting_s=deadline.fitting_s([s.strategy for s in plan.runnable]) if left_out else None,
        kv_sizes=kv_sizes(model.config, model.dtype),
        model_generation_settings=non_greedy_settings(model),  # what the benchmark turned off: see the note
    )


def _warm(plan: Plan, prompt_tokens: int, deadline: Deadline) -> None:
    """Warm up each strategy at this prompt length for the warm-up tokens asked; where any strategy is more than
    the cache off and on, every one runs at least one token (a backend builds its kernels on first use, and the
    reference must start as warm as what it is compared with). One that fails here is skipped with the error as
    its reason instead of ending the run. Each warm-up's time is the deadline's evidence of how the machine runs
    before the first timed run."""
    inputs, tokens = plan.inputs[prompt_tokens], _warmup_tokens(plan)
    for strategy in plan.runnable:
        if not strategy.strategy.compiled:  # a compiled strategy warms up at each configuration's own shape
            seconds = plan.attempt(strategy, partial(_warmed, plan.loaded, inputs, tokens, strategy))
            if seconds is not None:
                deadline.saw(strategy.strategy, Config(prompt_tokens, tokens), seconds)


def _warmup_tokens(plan: Plan) -> int:
    tokens = plan.spec.warmup_tokens
    return max(tokens, 1) if any(strategy.strategy not in PAIR for strategy in plan.runnable) else tokens


def _warmed(loaded: LoadedModel, inputs: BatchEncoding, tokens: int, strategy: Setup) -> float:
    """Seconds of one strategy's warm-up."""
    started = perf_counter()
    warm_up(loaded, inputs, tokens, [strategy])
    return perf_counter() - started


def _first_calls(plan: Plan, inputs: BatchEncoding, new_tokens: int) -> dict[Strategy, float]:
    """The static cache is sized to the whole length, so every configuration starts from a fresh one, and
    a compiled strategy compiles here, untimed, at exactly the shape its timed runs use."""
    reset_static_cache_state(plan.loaded.model)
    found = {}
    for strategy in plan.runnable:
        if strategy.strategy.compiled:
            seconds = plan.attempt(strategy, partial(first_call, plan.loaded, inputs, new_tokens, strategy))
            if seconds is not None:
                found[strategy.strategy] = seconds
    return found


def _warm_first(plan: Plan, planned: list[Config], deadline: Deadline) -> Eta:
    """Warm up at the first prompt length: the warm-up is the run's first probe. Where it says nothing of a
    strategy (a cached one's steps under two tokens, or none: a compiled strategy) and there is a budget, a
    two-token run of that strategy does. Then the first estimate, and the progress bar's arithmetic over the runs
    it projects."""
    rounds = first_stop() if plan.spec.repeat == "auto" else plan.spec.repeat
    if not planned:  # an add-on left every row out: nothing to warm up for
        return Eta([], rounds, clock=perf_counter)
    prompt_tokens = planned[0].prompt_tokens
    _warm(plan, prompt_tokens, deadline)
    told = {seen.strategy for seen in deadline.seen if seen.config.new_tokens > 1 or not seen.strategy.caches}
    unknown = [s for s in plan.runnable if s.strategy not in told]
    if plan.spec.max_seconds and unknown:
        for strategy, seconds in probe_two_tokens(plan, unknown, plan.inputs[prompt_tokens]).items():
            deadline.saw(strategy, Config(prompt_tokens, 2), seconds)
    names = [s.strategy for s in plan.runnable]
    deadline.estimate(planned, names, _warmup_tokens(plan))
    return Eta(deadline.to_come(planned, 0, names), rounds, ends_by=deadline.ends_by, clock=perf_counter)


def _measure_each(
    plan: Plan, planned: list[Config], bar: Bar, eta: Eta, label: str, deadline: Deadline, before: Mapping[AddOn, Any]
) -> Iterator[list[Measurement]]:
    """Measure the planned configurations in order, a measurement per strategy, warming up each new prompt
    length first, each add-on (with what its ``before`` found) starting the strategies as they run there; what the
    deadline says would pass it is left out, and every timed run reaches the deadline's evidence and the bar's
    arithmetic."""
    loaded, spec = plan.loaded, plan.spec
    warmed = {planned[0].prompt_tokens} if planned else set()
    rule = lockstep(stop_rule(spec))  # across ranks, rank 0 says when to stop
    for index, config in enumerate(planned):
        prompt_tokens, new_tokens, batch = config
        names = [s.strategy for s in plan.runnable]
        where = f"prompt {prompt_tokens}, new {new_tokens}" + (f", batch {batch}" if batch > 1 else "")
        said = f"kvbench {label}{' ' if label else ''}{index + 1}/{len(planned)}: {where}"
        if prompt_tokens not in warmed:
            if not deadline.warms(config, deadline.warmup_seconds(prompt_tokens, names, _warmup_tokens(plan))):
                continue
            bar.describe(said)
            _warm(plan, prompt_tokens, deadline)
            warmed.add(prompt_tokens)
        if not deadline.starts(config, names):
            continue
        bar.describe(said)
        inputs = batched(plan.inputs[prompt_tokens], batch)
        runnable = plan.runnable
        for addon, found in before.items():
            runnable = addon.starting(plan, inputs, runnable, found)
        first = _first_calls(plan, inputs, new_tokens)
        runnable = [s for s in runnable if s.strategy not in plan.skipped]  # a first call that failed skipped it
        eta.begin(index, [s.strategy for s in runnable])
        heard = _Heard(deadline, eta, planned, index, [s.strategy for s in runnable])
        try:
            yield measure_rounds(
                loaded, inputs, new_tokens=new_tokens, strategies=runnable, stop=HeldTo(rule, heard.round_fits),
                steps=spec.steps, on_run=heard, first_calls=first, judge=plan.judge,
                measured=partial(_measured, plan, inputs),
            )  # fmt: skip
        except LeftOut:
            deadline.leave_out(config)
            continue
        deadline.finished()


class _Heard:
    """What each timed run of one configuration tells: the deadline's evidence (the runs go round by round, the
    strategies in order) and the bar's time left, renewed from it."""

    def __init__(self, deadline: Deadline, eta: Eta, todo: list[Config], index: int, names: list[Strategy]) -> None:
        self.deadline, self.eta, self.todo, self.index, self.names = deadline, eta, todo, index, names
        self.runs = 0

    def __call__(self, seconds: float) -> None:
        config = self.todo[self.index]
        self.deadline.saw(self.names[self.runs % len(self.names)], config, seconds, timed=True)
        self.runs += 1
        self.eta.ran(seconds)
        self.eta.update(self.deadline.to_come(self.todo, self.index, self.names, done=self.runs))

    def round_fits(self, rounds: int) -> bool:
        return self.deadline.round_fits(self.todo[self.index], self.names, rounds)


def _measured(
    plan: Plan, inputs: BatchEncoding, measurements: list[Measurement], runs: Mapping[Strategy, TimedRuns]
) -> list[Measurement]:
    """A configuration's measurements as each add-on makes them, in the registry's order."""
    for addon in addons():
        measurements = addon.measured(plan, inputs, measurements, runs)
    return measurements
