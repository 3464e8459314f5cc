"""The benchmark: one prompt, a warm-up, then interleaved timed runs with the KV cache off and on."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import statistics
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any, Literal

from kvmagic.core import costmodel, stats
from kvmagic.core.budget import check_budget, estimate_seconds, plan_within_budget, round_seconds
from kvmagic.core.lengths import configurations, parse_lengths, stretch_ids
from kvmagic.errors import KVMagicError
from kvmagic.measure.environment import environment
from kvmagic.measure.guards import is_out_of_memory, with_memory_advice
from kvmagic.measure.memory import cache_nbytes, predicted_kv_nbytes
from kvmagic.measure.probe import probe
from kvmagic.measure.strategies import parse_names, strategies
from kvmagic.measure.timing import greedy_config, profiled_generate, timed_generate
from kvmagic.results.data import (
    BenchmarkResult,
    Measurement,
    Mismatch,
    Prediction,
    StepProfile,
    first_mismatch,
    times_of,
)

if TYPE_CHECKING:
    from transformers import BatchEncoding, GenerationConfig

    from kvmagic.model.loading import LoadedModel

__all__ = [
    "CONDITIONS", "MIN_AUTO_PAIRS", "Repeat", "condition_config", "encode_prompt", "enough_pairs", "measure",
    "run_benchmark", "stretch_prompt", "warm_up",
]  # fmt: skip

# name -> the generation-config settings that make the condition; --cache replaces these with strategies.
CONDITIONS: dict[str, dict[str, Any]] = {"uncached": {"use_cache": False}, "cached": {"use_cache": True}}
MIN_AUTO_PAIRS = 5  # a bootstrap over 3 pairs has 10 distinct resamples and looks tighter than it is
Repeat = int | Literal["auto"]


def encode_prompt(loaded: LoadedModel, prompt: str, *, chat: bool = False) -> BatchEncoding:
    """Tokenize once, on the model's input device; every run reuses these tensors."""
    _check_prompt(prompt)
    tokenizer = loaded.tokenizer
    if chat:
        if not getattr(tokenizer, "chat_template", None):
            raise KVMagicError(
                f"the tokenizer of {loaded.name!r} has no chat template: drop --chat to use the text as it is"
            )
        messages = [{"role": "user", "content": prompt}]
        encoded = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_dict=True, return_tensors="pt"
        )
    else:
        encoded = tokenizer(prompt, return_tensors="pt", return_token_type_ids=False)
    return encoded.to(loaded.device)


def stretch_prompt(loaded: LoadedModel, prompt: str, tokens: int) -> BatchEncoding:
    """The prompt as exactly ``tokens`` ids: its own tokens repeated (or cut), special tokens kept in place."""
    from transformers import BatchEncoding

    _check_prompt(prompt)
    tokenizer = loaded.tokenizer
    full = tokenizer(prompt, return_token_type_ids=False)["input_ids"]
    body = tokenizer(prompt, add_special_tokens=False, return_token_type_ids=False)["input_ids"]
    prefix, suffix = _special_ends(full, body)
    ids = stretch_ids(prefix, body, suffix, tokens)
    return BatchEncoding({"input_ids": [ids], "attention_mask": [[1] * len(ids)]}, tensor_type="pt").to(loaded.device)


def _special_ends(full: list[int], body: list[int]) -> tuple[list[int], list[int]]:
    """What the tokenizer adds around the text (a BOS, an EOS), found by locating the text's ids."""
    for start in range(len(full) - len(body) + 1):
        if full[start : start + len(body)] == body:
            return full[:start], full[start + len(body) :]
    return [], []


def run_benchmark(
    loaded: LoadedModel,
    prompt: str,
    *,
    new_tokens: int | Sequence[int] = 64,
    prompt_tokens: int | Sequence[int] | None = None,
    warmup_tokens: int = 4,
    repeat: Repeat = 1,
    chat: bool = False,
    max_seconds: float = 0,
    progress: bool = False,
    predict: bool = False,
    ci_target: float = 0.05,
    auto_cap: float = 60.0,
    cache: str | Sequence[str] | None = None,
    kv_bits: int | None = None,
    compile: bool = False,
    profile: bool = True,
) -> BenchmarkResult:
    """Time greedy generation of ``new_tokens`` tokens with the KV cache off and on.

    The protocol: tokenize once; warm up each condition with ``warmup_tokens`` untimed tokens;
    then ``repeat`` rounds of one uncached and one cached timed run, interleaved so drift hits
    both alike. Times are medians; the speed-up is a ratio of medians.

    Sequences of ``new_tokens`` and ``prompt_tokens`` make a sweep over their cross product,
    one measurement per pair. ``prompt_tokens`` sets the prompt to that many tokens by repeating
    (or cutting) the prompt's own tokens. Each prompt length is warmed up once, before its first
    measurement, since a new input shape can take a slower first call. With ``max_seconds`` (0:
    no limit), a short probe estimates a sweep's whole cost first and a costlier sweep is refused.
    ``progress`` shows a progress bar over a sweep's configurations. A KeyboardInterrupt ends
    a sweep early: the configurations finished so far come back, with ``partial=True``.

    ``predict`` probes the cost model (:mod:`kvmagic.core.costmodel`) first and adds its predictions
    beside the measured columns; configurations that would pass ``max_seconds`` are then
    predicted only, not refused. ``repeat="auto"`` takes pairs until the 95% interval of the
    speed-up lies within ``ci_target`` of it (at least 5 pairs), or ``auto_cap`` seconds of
    measuring a configuration have passed.

    ``cache`` (``"off,dynamic,static,quantized:fp8"``) compares those KV-cache strategies instead,
    under the same protocol, against ``off``; one that cannot run here is kept with its reason
    (see :mod:`kvmagic.strategies`). ``kv_bits`` sets a quantized cache's width; ``compile`` adds
    a torch.compile'd static cache, compiled during an untimed run of each configuration's shape.

    ``profile=False`` skips the one extra hooked run per condition that follows the timed ones:
    time to first token, decode speed, KV-cache bytes and peak memory are then left empty (NaN),
    and a benchmark of a large model on a slow device saves one ``generate`` per condition.
    """
    new_lengths = _lengths("new_tokens", new_tokens, flag="-n")
    _check_count("warmup_tokens", warmup_tokens, minimum=0, flag="-w")
    if isinstance(repeat, str) and repeat != "auto":
        raise KVMagicError(f"repeat (-r) must be a whole number >= 1 or 'auto', got {repeat!r}")
    if repeat != "auto":
        _check_count("repeat", repeat, minimum=1, flag="-r")
    _check_seconds("max_seconds", max_seconds, "--max-seconds", "(0: no limit)")
    _check_seconds("auto_cap", auto_cap, "--auto-cap")
    if isinstance(ci_target, bool) or not isinstance(ci_target, (int, float)) or not 0 < ci_target < 1:
        raise KVMagicError(
            f"ci_target (--ci-target) must be a fraction between 0 and 1, e.g. 0.05 for ±5%, got {ci_target!r}"
        )
    if cache is None and (kv_bits is not None or compile):
        raise KVMagicError(
            "--kv-bits and --compile choose how a --cache strategy runs: add --cache (e.g. --cache off,dynamic,static)"
        )
    names = None if cache is None else parse_names(cache)
    if names is not None and (predict or repeat == "auto"):
        raise KVMagicError("--predict and -r auto are about the cache off against on: drop them, or drop --cache")
    advice = (
        f"out of accelerator memory generating {'' if len(new_lengths) == 1 else 'up to '}{max(new_lengths)} tokens: "
        "lower -n, shorten the prompt, "
        "or load the model with a smaller --dtype (float16 or bfloat16)"
    )
    # A partial, not a lambda: a closure would keep ``loaded`` alive in the frames of a failed run.
    run = partial(
        _benchmark, loaded, prompt, new_lengths, prompt_tokens=prompt_tokens, warmup_tokens=warmup_tokens,
        repeat=repeat, chat=chat, max_seconds=max_seconds, progress=progress, predict=predict,
        ci_target=ci_target, auto_cap=auto_cap, names=names, kv_bits=kv_bits, compile=compile, profile=profile,
    )  # fmt: skip
    return with_memory_advice(run, advice)


def _benchmark(
    loaded: LoadedModel,
    prompt: str,
    new_lengths: list[int],
    *,
    prompt_tokens: int | Sequence[int] | None,
    warmup_tokens: int,
    repeat: Repeat,
    chat: bool,
    max_seconds: float,
    progress: bool,
    predict: bool,
    ci_target: float,
    auto_cap: float,
    names: list[str] | None,
    kv_bits: int | None,
    compile: bool,
    profile: bool,
) -> BenchmarkResult:
    chosen = None if names is None else strategies(loaded, names, kv_bits=kv_bits, compile=compile)
    natural = encode_prompt(loaded, prompt, chat=chat)
    natural_tokens = natural["input_ids"].shape[-1]
    if prompt_tokens is None:
        inputs = {natural_tokens: natural}
    elif chat:
        raise KVMagicError(
            "-p sets the plain prompt to an exact token count and cannot wrap it in the chat template: drop -p or --chat"
        )
    else:
        inputs = {n: stretch_prompt(loaded, prompt, n) for n in _lengths("prompt_tokens", prompt_tokens, flag="-p")}
    configs = configurations(list(inputs), new_lengths)
    for prompt_length, new_length in configs:
        _check_positions(loaded, prompt_length, new_length)

    result = BenchmarkResult(
        model=loaded.name,
        measurements=[],
        metadata={
            **environment(loaded),
            "prompt_sha256": hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest(),
            "chat": chat,
            "warmup_tokens": warmup_tokens,
            "repeat": repeat,
            "natural_prompt_tokens": natural_tokens,
            "prompt_stretched": prompt_tokens is not None and any(n != natural_tokens for n in inputs),
            "configurations": len(configs),
            "profile": profile,
            **({"ci_target": ci_target, "auto_cap": auto_cap} if repeat == "auto" else {}),
            **({"max_seconds": max_seconds, "weight_bytes": _weight_bytes(loaded)} if predict else {}),
        },
    )
    conditions = CONDITIONS
    if chosen is not None:
        conditions = {s.name: dict(s.settings) for s in chosen if not s.reason}
        result.metadata.update(
            strategies=[s.name for s in chosen],
            skipped={s.name: s.reason for s in chosen if s.reason},
            compiled=[s.name for s in chosen if s.compiled and not s.reason],
            kv_bits=kv_bits,
        )
    try:
        _sweep(loaded, inputs, configs, result, conditions, warmup_tokens=warmup_tokens, repeat=repeat,
               max_seconds=max_seconds, progress=progress, predict=predict, ci_target=ci_target,
               auto_cap=auto_cap, profile=profile)  # fmt: skip
    except KeyboardInterrupt:
        if len(configs) == 1:  # nothing finished to return: the user asked to stop
            raise
        result.partial = True  # the interrupted configuration is dropped: only finished rows are results
    return result


def _sweep(
    loaded: LoadedModel,
    inputs: Mapping[int, BatchEncoding],
    configs: list[tuple[int, int]],
    result: BenchmarkResult,
    conditions: dict[str, dict[str, Any]],
    *,
    warmup_tokens: int,
    repeat: Repeat,
    max_seconds: float,
    progress: bool,
    predict: bool,
    ci_target: float,
    auto_cap: float,
    profile: bool,
) -> None:
    """Warm up, check the budget, then measure each configuration into ``result`` as it finishes.

    The budget's estimate counts ``-r auto`` at its minimum of pairs (``auto_cap`` bounds the rest),
    plus the hooked round of ``profile``.
    """
    first = configs[0][0]
    _warm(loaded, inputs[first], warmup_tokens, conditions, result)
    warmed = {first}
    cost = None
    rounds = (MIN_AUTO_PAIRS if repeat == "auto" else repeat) + (1 if profile else 0)
    caches = [settings["use_cache"] for settings in conditions.values()]
    plan = [True] * len(configs)
    if predict or (max_seconds and len(configs) > 1):  # a single configuration is the experiment itself: no probe
        shortest, longest = min(p for p, _ in configs), max(p + n - 1 for p, n in configs)
        cost = probe(loaded, inputs[first], shortest, longest)
        budget = {"repeat": rounds, "warmup_tokens": warmup_tokens, "caches": caches}
        estimate = estimate_seconds(cost, configs, **budget)
        result.metadata["estimated_s"] = estimate
        if predict:
            result.cost_model = cost
            result.predictions = [_prediction(loaded, cost, p, n) for p, n in configs]
            plan = plan_within_budget(cost, configs, max_seconds=max_seconds, **budget)
        else:
            check_budget(estimate, max_seconds)
    todo = [config for config, measured in zip(configs, plan) if measured]
    weights = [1.0 if cost is None else rounds * round_seconds(cost, p, n, caches) for p, n in todo]
    with _progress_bar(sum(weights), enabled=progress and len(todo) > 1) as bar:
        for index, ((prompt_length, new_length), weight) in enumerate(zip(todo, weights)):
            bar.set_description_str(f"kvbench {index + 1}/{len(todo)}: prompt {prompt_length}, new {new_length}")
            if prompt_length not in warmed:
                _warm(loaded, inputs[prompt_length], warmup_tokens, conditions, result)
                warmed.add(prompt_length)
            first_calls = _first_calls(loaded, inputs[prompt_length], new_length, conditions, result)
            measurement = measure(
                loaded,
                inputs[prompt_length],
                new_tokens=new_length,
                repeat=repeat,
                conditions=conditions,
                ci_target=ci_target,
                auto_cap=auto_cap,
                profile=profile,
            )
            measurement.compile_s = {
                name: seconds - statistics.median(measurement.times(name)) for name, seconds in first_calls.items()
            }
            result.measurements.append(measurement)
            bar.update(weight)


def _prediction(loaded: LoadedModel, cost: costmodel.CostModel, prompt_tokens: int, new_tokens: int) -> Prediction:
    model = loaded.model
    return Prediction(
        prompt_tokens=prompt_tokens,
        new_tokens=new_tokens,
        uncached_s=cost.generate_seconds(prompt_tokens, new_tokens, use_cache=False),
        cached_s=cost.generate_seconds(prompt_tokens, new_tokens, use_cache=True),
        kv_bytes=predicted_kv_nbytes(model.config, prompt_tokens + new_tokens - 1, model.dtype),
    )


def _weight_bytes(loaded: LoadedModel) -> int:
    """What the weights occupy: the memory the cache's bytes are set against."""
    return sum(p.numel() * p.element_size() for p in loaded.model.parameters())


@contextmanager
def _progress_bar(total: float, *, enabled: bool) -> Iterator[Any]:
    """tqdm's auto bar (a widget in Jupyter, text in a terminal), weighted by estimated cost when known."""
    from tqdm.auto import tqdm

    bar_format = "{desc} {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]"
    with tqdm(total=total, bar_format=bar_format, disable=not enabled, leave=False) as bar:
        yield bar


def _lengths(name: str, value: int | Sequence[int], *, flag: str) -> list[int]:
    if isinstance(value, str):
        return parse_lengths(value)
    values = [value] if isinstance(value, int) else list(value)
    if not values:
        raise KVMagicError(f"{name} ({flag}) needs at least one length")
    for item in values:
        _check_count(name, item, minimum=1, flag=flag)
    return list(dict.fromkeys(values))


def condition_config(loaded: LoadedModel, new_tokens: int, settings: Mapping[str, Any]) -> GenerationConfig:
    """The greedy config of one condition: its settings applied to a fresh copy, never to the model's."""
    config = greedy_config(loaded.model, loaded.tokenizer, new_tokens, settings.get("use_cache", True))
    for key, value in settings.items():
        setattr(config, key, copy.deepcopy(value))  # generate may consume a cache_config dict
    return config


def warm_up(
    loaded: LoadedModel, inputs: BatchEncoding, tokens: int, conditions: Mapping[str, Mapping[str, Any]] = CONDITIONS
) -> None:
    """One untimed run per condition, so first-call costs stay out of the timed runs."""
    if not tokens:
        return
    for settings in conditions.values():
        timed_generate(loaded.model, inputs, condition_config(loaded, tokens, settings), loaded.devices)


def _warm(
    loaded: LoadedModel,
    inputs: BatchEncoding,
    tokens: int,
    conditions: dict[str, dict[str, Any]],
    result: BenchmarkResult,
) -> None:
    """Warm up; with --cache, every strategy runs at least one token (a backend builds its kernels on
    first use), and one that fails here is dropped with the error as its reason instead of ending the run."""
    if conditions is CONDITIONS:
        warm_up(loaded, inputs, tokens)
        return
    for name, settings in list(conditions.items()):
        try:
            warm_up(loaded, inputs, max(tokens, 1), {name: settings})
        except Exception as error:
            if is_out_of_memory(error):
                raise
            del conditions[name]
            result.metadata["skipped"][name] = f"failed: {type(error).__name__}: {str(error).splitlines()[0][:200]}"


def _first_calls(
    loaded: LoadedModel, inputs: BatchEncoding, new_tokens: int, conditions: Mapping[str, Any], result: BenchmarkResult
) -> dict[str, float]:
    """One untimed run of each compiled strategy at this configuration's exact shape: a static cache is
    sized by the whole length, so each new length compiles anew, and that compile belongs here."""
    first_calls = {}
    for name in result.metadata.get("compiled", ()):
        if name in conditions:
            config = condition_config(loaded, new_tokens, conditions[name])
            first_calls[name] = timed_generate(loaded.model, inputs, config, loaded.devices)[1]
    return first_calls


def measure(
    loaded: LoadedModel,
    inputs: BatchEncoding,
    *,
    new_tokens: int,
    repeat: Repeat,
    conditions: Mapping[str, Mapping[str, Any]] = CONDITIONS,
    ci_target: float = 0.05,
    auto_cap: float = 60.0,
    profile: bool = True,
) -> Measurement:
    """Time ``repeat`` interleaved rounds (uncached, cached) and check every run's tokens agree.

    ``repeat="auto"`` keeps taking rounds until :func:`enough_pairs` says the speed-up is known
    well enough or ``auto_cap`` seconds have passed (checked between rounds, outside any timing).

    The headline runs are bare ``generate`` calls. After them comes one extra hooked run per
    condition (two in all, whatever ``repeat`` is) for what needs hooks: per-step times, top-2
    margins, peak memory and the returned cache. Their cost never reaches the headline times;
    ``profile=False`` skips them.
    """
    model, tokenizer, devices = loaded.model, loaded.tokenizer, loaded.devices
    prompt_tokens = inputs["input_ids"].shape[-1]
    configs = {name: condition_config(loaded, new_tokens, settings) for name, settings in conditions.items()}
    runs: list[str] = []
    seconds: list[float] = []
    generated: list[list[int]] = []
    started = perf_counter()
    pairs = 0
    while True:
        for name, config in configs.items():
            output, elapsed = timed_generate(model, inputs, config, devices)
            runs.append(name)
            seconds.append(elapsed)
            generated.append(output[0, prompt_tokens:].tolist())
        pairs += 1
        if repeat != "auto":
            if pairs == repeat:
                break
        elif pairs >= MIN_AUTO_PAIRS and (
            perf_counter() - started >= auto_cap
            or enough_pairs(times_of(runs, seconds, "uncached"), times_of(runs, seconds, "cached"), ci_target)
        ):
            break
    profiles = {}
    if profile:
        profiles = {name: _profile(loaded, inputs, config, prompt_tokens) for name, config in configs.items()}
    reference = generated[0]
    mismatch = _mismatch(tokenizer, reference, generated, range(1, len(generated)))
    if mismatch is not None and profiles:
        margin = _margin_at(profiles[runs[mismatch.run]], generated[mismatch.run], mismatch.position)
        mismatch = dataclasses.replace(mismatch, margin=margin)
    return Measurement(
        prompt_tokens=prompt_tokens,
        new_tokens=new_tokens,
        runs=tuple(runs),
        seconds=tuple(seconds),
        generated_ids=tuple(reference),
        generated_text=tokenizer.decode(reference),
        mismatch=mismatch,
        mismatches=_mismatches(tokenizer, runs, generated),
        profiles=profiles,
        # generate computes keys and values for every position but the last generated token's.
        kv_predicted_bytes=predicted_kv_nbytes(model.config, prompt_tokens + new_tokens - 1, model.dtype),
    )


def enough_pairs(uncached: list[float], cached: list[float], target: float) -> bool:
    """Whether the 95% bootstrap interval of the speed-up lies within ``target`` (a fraction) of it."""
    speedup = stats.median(uncached) / stats.median(cached)
    low, high = stats.bootstrap_ratio_ci(uncached, cached)
    return stats.relative_half_width(speedup, low, high) <= target


def _profile(loaded: LoadedModel, inputs: BatchEncoding, config: GenerationConfig, prompt_tokens: int) -> StepProfile:
    run = profiled_generate(loaded.model, inputs, config, loaded.devices)
    return StepProfile(
        step_s=tuple(run.step_seconds),
        margins=tuple(run.margins),
        generated_ids=tuple(run.output[0, prompt_tokens:].tolist()),
        peak_bytes=run.peak_bytes,
        kv_bytes=0 if run.cache is None else cache_nbytes(run.cache),
    )


def _margin_at(profile: StepProfile, ids: list[int], position: int) -> float | None:
    """The hooked run's top-2 gap at ``position``, if it took the same path as the differing run."""
    if position >= len(profile.margins) or list(profile.generated_ids[: position + 1]) != ids[: position + 1]:
        return None
    return profile.margins[position]


def _check_count(name: str, value: int, *, minimum: int, flag: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise KVMagicError(f"{name} ({flag}) must be a whole number >= {minimum}, got {value!r}")


def _check_seconds(name: str, value: float, flag: str, zero: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise KVMagicError(
            f"{name} ({flag}) must be a number of seconds >= 0{' ' + zero if zero else ''}, got {value!r}"
        )


def _check_prompt(prompt: str) -> None:
    """Text to tokenize: not blank, and no lone surrogate (from a bad copy or a broken file), which
    tokenizers reject with a TypeError."""
    if not prompt.strip():
        raise KVMagicError("the prompt is empty: write the text to generate from (in %%kvbench, the cell body)")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as error:
        character = prompt[error.start]
        raise KVMagicError(
            f"the prompt holds U+{ord(character):04X} at character {error.start}, half of a surrogate pair "
            "and not text: remove it or paste the text again"
        ) from None


def _check_positions(loaded: LoadedModel, prompt_tokens: int, new_tokens: int) -> None:
    limit = loaded.max_positions
    if limit is not None and prompt_tokens + new_tokens > limit:
        raise KVMagicError(
            f"the prompt ({_tokens(prompt_tokens)}) plus {_tokens(new_tokens, 'new ')} exceeds the "
            f"{limit} positions {loaded.name!r} supports: shorten the prompt or lower -n"
        )


def _tokens(count: int, kind: str = "") -> str:
    return f"{count} {kind}token{'' if count == 1 else 's'}"


def _mismatches(tokenizer, runs: Sequence[str], generated: list[list[int]]) -> dict[str, Mismatch]:
    """Per condition, where its runs first left the reference run's tokens (conditions that agree are absent)."""
    found = {}
    for name in dict.fromkeys(runs):
        mismatch = _mismatch(tokenizer, generated[0], generated, [i for i, r in enumerate(runs) if r == name and i])
        if mismatch is not None:
            found[name] = mismatch
    return found


def _mismatch(tokenizer, reference: list[int], generated: list[list[int]], indices: Sequence[int]) -> Mismatch | None:
    """The first difference from ``reference`` among the runs at ``indices``; ``run`` indexes ``generated``."""
    found = first_mismatch(reference, [generated[i] for i in indices])
    if found is None:
        return None
    which, position = found
    actual = generated[indices[which]]
    expected_id = reference[position] if position < len(reference) else -1
    actual_id = actual[position] if position < len(actual) else -1
    return Mismatch(
        run=indices[which],
        position=position,
        expected_id=expected_id,
        actual_id=actual_id,
        expected_token=tokenizer.decode([expected_id]) if expected_id >= 0 else "",
        actual_token=tokenizer.decode([actual_id]) if actual_id >= 0 else "",
    )
