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
from kvmagic.results.records import RunFacts
from kvmagic.results.result import BenchmarkResult, Measurement
from kvmagic.runner.plan import Budget, Plan, make_plan, plan_budget
from kvmagic.runner.progress import Bar, Eta, progress_bar
from kvmagic.runner.prompt import batched
from kvmagic.runner.rounds import TimedRuns, first_call, measure_rounds, warm_up

if TYPE_CHECKING:
    from transformers import BatchEncoding

    from kvmagic.measure.loaded import LoadedModel

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
    budget = Budget(plan.configs, [1.0] * len(plan.configs))
    measurements: list[Measurement] = []
    stopped = ""  # why the configurations left were not measured
    try:
        with progress_bar(enabled=progress, delay_s=PROGRESS_AFTER_S) as bar:
            budget = plan_budget(plan)  # before the warm-up, which it counts: nothing long runs unbudgeted
            eta = bar.eta = _warm_first(plan, budget)
            for found in _measure_each(plan, budget, bar, eta, label, before):
                measurements += found
    except KeyboardInterrupt:
        if len(plan.configs) == 1:  # nothing finished to return: the user asked to stop
            raise
        stopped = "interrupted"  # the interrupted configuration is dropped: only finished rows are results
    except RuntimeError as error:
        if not (is_out_of_memory(error) and measurements):
            raise  # with nothing finished, the memory advice says what to change
        stopped = f"out of accelerator memory at {budget.todo[len(measurements) // len(plan.runnable)]}"
    if stopped.startswith("out of"):
        release_memory()  # only now: inside the except block the error's frames held the failed run's tensors
    kept = {addon.name: addon.after(plan, measurements, found) for addon, found in before.items()}
    result = BenchmarkResult(
        model=loaded.name,
        measurements=measurements,
        spec=spec,
        strategies=[s.strategy for s in plan.strategies],
        skipped=dict(plan.skipped),
        remarks=plan.remarks,
        metadata=environment(loaded),
        facts=_facts(plan, prompt, budget, stopped),
        predictions=list(budget.predictions),
        cost_model=budget.cost,
        addons={name: data for name, data in kept.items() if data is not None},
    )
    for addon in addons():
        result = addon.finished(plan, result)
    return result


def _facts(plan: Plan, prompt: str, budget: Budget, stopped: str) -> RunFacts:
    """What the run found out besides its times."""
    loaded, spec = plan.loaded, plan.spec
    model = loaded.model
    return RunFacts(
        prompt_sha256=hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest(),
        prompt=prompt,
        natural_prompt_tokens=plan.natural_tokens,
        prompt_stretched=spec.prompt_tokens is not None and any(n != plan.natural_tokens for n in plan.inputs),
        configurations=len(plan.configs),
        estimated_s=budget.estimate_s,
        stopped=stopped,
        kv_sizes=kv_sizes(model.config, model.dtype),
        model_generation_settings=non_greedy_settings(model),  # what the benchmark turned off: see the note
        weight_bytes=sum(p.numel() * p.element_size() for p in model.parameters()) if spec.predict else None,
    )


def _warm(plan: Plan, prompt_tokens: int) -> None:
    """Warm up each strategy at this prompt length for the warm-up tokens asked; where any strategy is more than
    the cache off and on, every one runs at least one token (a backend builds its kernels on first use, and the
    reference must start as warm as what it is compared with). One that fails here is skipped with the error as
    its reason instead of ending the run."""
    inputs, tokens = plan.inputs[prompt_tokens], plan.spec.warmup_tokens
    if any(strategy.strategy not in PAIR for strategy in plan.runnable):
        tokens = max(tokens, 1)
    for strategy in plan.runnable:
        if not strategy.strategy.compiled:  # a compiled strategy warms up at each configuration's own shape
            plan.attempt(strategy, partial(warm_up, plan.loaded, inputs, tokens, [strategy]))


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


def _warm_first(plan: Plan, budget: Budget) -> Eta:
    """Warm up at the first prompt length, and the progress bar's arithmetic, whose first evidence is how long
    the warm-up took against its estimate (where there is one, else each configuration weighs alike)."""
    started = perf_counter()
    _warm(plan, plan.configs[0].prompt_tokens)
    warmed_s = perf_counter() - started
    rounds = first_stop() if plan.spec.repeat == "auto" else plan.spec.repeat
    if budget.runs:
        return Eta(budget.runs, rounds, prior=(budget.warmup_s, warmed_s) if budget.warmup_s else (0.0, 0.0))
    return Eta([dict.fromkeys((s.strategy for s in plan.runnable), 1.0) for _ in budget.todo], rounds, seconds=False)


def _measure_each(
    plan: Plan, budget: Budget, bar: Bar, eta: Eta, label: str, before: Mapping[AddOn, Any]
) -> Iterator[list[Measurement]]:
    """Measure the planned configurations in order, a measurement per strategy, warming up each new prompt
    length first, each add-on (with what its ``before`` found) starting the strategies as they run there; every
    timed run reaches the bar's arithmetic."""
    loaded, spec = plan.loaded, plan.spec
    warmed = {plan.configs[0].prompt_tokens}
    stop = lockstep(stop_rule(spec))  # across ranks in lockstep, rank 0 says when to stop
    for index, config in enumerate(budget.todo):
        prompt_tokens, new_tokens, batch = config
        where = f"prompt {prompt_tokens}, new {new_tokens}" + (f", batch {batch}" if batch > 1 else "")
        bar.describe(f"kvbench {label}{' ' if label else ''}{index + 1}/{len(budget.todo)}: {where}")
        if prompt_tokens not in warmed:
            _warm(plan, prompt_tokens)
            warmed.add(prompt_tokens)
        inputs = batched(plan.inputs[prompt_tokens], batch)
        runnable = plan.runnable
        for addon, found in before.items():
            runnable = addon.starting(plan, inputs, runnable, found)
        first = _first_calls(plan, inputs, new_tokens)
        eta.begin(index, [s.strategy for s in runnable])
        yield measure_rounds(
            loaded, inputs, new_tokens=new_tokens, strategies=runnable, stop=stop, steps=spec.steps,
            on_run=lambda seconds: eta.ran(), first_calls=first, judge=plan.judge,
            measured=partial(_measured, plan, inputs),
        )  # fmt: skip


def _measured(
    plan: Plan, inputs: BatchEncoding, measurements: list[Measurement], runs: Mapping[Strategy, TimedRuns]
) -> list[Measurement]:
    """A configuration's measurements as each add-on makes them, in the registry's order."""
    for addon in addons():
        measurements = addon.measured(plan, inputs, measurements, runs)
    return measurements
