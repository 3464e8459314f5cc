"""The benchmark: one prompt, a warm-up, then interleaved timed runs with the KV cache off and on."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import TYPE_CHECKING

from .environment import environment
from .errors import KVMagicError
from .memory import cache_nbytes, predicted_kv_nbytes
from .results import BenchmarkResult, Measurement, Mismatch, StepProfile, first_mismatch
from .timing import greedy_config, profiled_generate, timed_generate

if TYPE_CHECKING:
    from transformers import BatchEncoding, GenerationConfig

    from .loading import LoadedModel

__all__ = ["CONDITIONS", "encode_prompt", "measure", "run_benchmark", "warm_up"]

CONDITIONS = {"uncached": False, "cached": True}  # name -> use_cache


def encode_prompt(loaded: LoadedModel, prompt: str, *, chat: bool = False) -> BatchEncoding:
    """Tokenize once, on the model's input device; every run reuses these tensors."""
    if not prompt.strip():
        raise KVMagicError("the prompt is empty: write the text to generate from (in %%kvbench, the cell body)")
    tokenizer = loaded.tokenizer
    if chat:
        if not getattr(tokenizer, "chat_template", None):
            raise KVMagicError(f"the tokenizer of {loaded.name!r} has no chat template: drop --chat to use the text as it is")
        messages = [{"role": "user", "content": prompt}]
        encoded = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_dict=True, return_tensors="pt"
        )
    else:
        encoded = tokenizer(prompt, return_tensors="pt", return_token_type_ids=False)
    return encoded.to(loaded.device)


def run_benchmark(
    loaded: LoadedModel,
    prompt: str,
    *,
    new_tokens: int = 64,
    warmup_tokens: int = 4,
    repeat: int = 1,
    chat: bool = False,
) -> BenchmarkResult:
    """Time greedy generation of ``new_tokens`` tokens with the KV cache off and on.

    The protocol: tokenize once; warm up each condition with ``warmup_tokens`` untimed tokens;
    then ``repeat`` rounds of one uncached and one cached timed run, interleaved so drift hits
    both alike. Times are medians; the speed-up is a ratio of medians.
    """
    _check_count("new_tokens", new_tokens, minimum=1, flag="-n")
    _check_count("warmup_tokens", warmup_tokens, minimum=0, flag="-w")
    _check_count("repeat", repeat, minimum=1, flag="-r")
    inputs = encode_prompt(loaded, prompt, chat=chat)
    prompt_tokens = inputs["input_ids"].shape[-1]
    _check_positions(loaded, prompt_tokens, new_tokens)

    warm_up(loaded, inputs, warmup_tokens)
    measurement = measure(loaded, inputs, new_tokens=new_tokens, repeat=repeat)
    return BenchmarkResult(
        model=loaded.name,
        measurements=[measurement],
        metadata={
            **environment(loaded),
            "prompt_sha256": hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest(),
            "chat": chat,
            "warmup_tokens": warmup_tokens,
            "repeat": repeat,
        },
    )


def warm_up(loaded: LoadedModel, inputs: BatchEncoding, tokens: int) -> None:
    """One untimed run per condition, so first-call costs stay out of the timed runs."""
    if not tokens:
        return
    for use_cache in CONDITIONS.values():
        config = greedy_config(loaded.model, loaded.tokenizer, tokens, use_cache)
        timed_generate(loaded.model, inputs, config, loaded.devices)


def measure(loaded: LoadedModel, inputs: BatchEncoding, *, new_tokens: int, repeat: int) -> Measurement:
    """Time ``repeat`` interleaved rounds (uncached, cached) and check every run's tokens agree.

    The headline runs are bare ``generate`` calls. After them comes one extra hooked run per
    condition (two in all, whatever ``repeat`` is) for what needs hooks: per-step times, top-2
    margins, peak memory and the returned cache. Their cost never reaches the headline times.
    """
    model, tokenizer, devices = loaded.model, loaded.tokenizer, loaded.devices
    prompt_tokens = inputs["input_ids"].shape[-1]
    configs = {name: greedy_config(model, tokenizer, new_tokens, use_cache) for name, use_cache in CONDITIONS.items()}
    runs: list[str] = []
    seconds: list[float] = []
    generated: list[list[int]] = []
    for _ in range(repeat):
        for name, config in configs.items():
            output, elapsed = timed_generate(model, inputs, config, devices)
            runs.append(name)
            seconds.append(elapsed)
            generated.append(output[0, prompt_tokens:].tolist())
    profiles = {name: _profile(loaded, inputs, config, prompt_tokens) for name, config in configs.items()}
    reference = generated[0]
    mismatch = _mismatch(tokenizer, reference, generated[1:])
    if mismatch is not None:
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


def _margin_at(profile: StepProfile, ids: list[int], position: int) -> float | None:
    """The hooked run's top-2 gap at ``position``, if it took the same path as the differing run."""
    if position >= len(profile.margins) or list(profile.generated_ids[: position + 1]) != ids[: position + 1]:
        return None
    return profile.margins[position]


def _check_count(name: str, value: int, *, minimum: int, flag: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise KVMagicError(f"{name} ({flag}) must be a whole number >= {minimum}, got {value!r}")


def _check_positions(loaded: LoadedModel, prompt_tokens: int, new_tokens: int) -> None:
    limit = loaded.max_positions
    if limit is not None and prompt_tokens + new_tokens > limit:
        raise KVMagicError(
            f"the prompt ({prompt_tokens} tokens) plus {new_tokens} new tokens exceeds the "
            f"{limit} positions {loaded.name!r} supports: shorten the prompt or lower -n"
        )


def _mismatch(tokenizer, reference: list[int], others: list[list[int]]) -> Mismatch | None:
    found = first_mismatch(reference, others)
    if found is None:
        return None
    which, position = found
    actual = others[which]
    expected_id = reference[position] if position < len(reference) else -1
    actual_id = actual[position] if position < len(actual) else -1
    return Mismatch(
        run=which + 1,
        position=position,
        expected_id=expected_id,
        actual_id=actual_id,
        expected_token=tokenizer.decode([expected_id]) if expected_id >= 0 else "",
        actual_token=tokenizer.decode([actual_id]) if actual_id >= 0 else "",
    )
