"""Probes of the cost model on a device: F(L), D(L), and generate's own work G and C.

The machine that runs the probes may speed up or slow down while they run (other work, clock
changes). So the probes go in rounds, each visiting every length and the hooked ``generate``, and
each point is the median of its rounds: a slow stretch then costs every point alike, and the
curves keep their proportions, which is all a speed-up depends on. The curves are fitted by the
pure :mod:`kvmagic.core.costmodel`.
"""

from __future__ import annotations

import dataclasses
import inspect
import statistics
from time import perf_counter
from typing import TYPE_CHECKING, Any

from kvmagic.core.costmodel import (
    DECODE_STEPS,
    OVERHEAD_TOKENS,
    PROBE_REPEAT,
    CostModel,
    fit_polynomial,
    generate_overhead,
    probe_lengths,
)  # fmt: skip

if TYPE_CHECKING:
    from transformers import BatchEncoding

    from kvmagic.model.loading import LoadedModel

__all__ = ["probe"]


def probe(
    loaded: LoadedModel, inputs: BatchEncoding, shortest: int, longest: int, *, repeat: int = PROBE_REPEAT
) -> CostModel:
    """Time F(L) and D(L) over lengths from ``shortest`` to ``longest`` and fit both curves.

    F(L) is one forward with ``use_cache=False``; D(L) one forward of a single token on a cache
    that a prefill of L tokens built, then one more at L + 1 on the cache that step grew (each a
    decode step a cached generate takes). Each probe is timed between device synchronizations
    under ``torch.inference_mode``; the model computes only the last position's logits, as
    ``generate`` asks it to. ``repeat`` rounds visit every length; a point is the median of its
    rounds, a typical step as a whole generation sums them.
    """
    import torch

    from kvmagic.measure.accelerator import synchronize
    from kvmagic.measure.timing import greedy_config

    model, devices = loaded.model, loaded.devices
    ids = inputs["input_ids"]
    source = ids.repeat(1, -(-(longest + DECODE_STEPS) // ids.shape[-1]))
    accepted = inspect.signature(model.forward).parameters
    extra: dict[str, Any] = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}
    cache_name = "cache" if "cache" in accepted else "past_key_values"  # transformers 5 renamed it

    def timed(**kwargs: Any) -> tuple[Any, float]:
        synchronize(devices)
        start = perf_counter()
        output = model(**kwargs, **extra)
        synchronize(devices)
        return output, perf_counter() - start

    started = perf_counter()
    lengths = probe_lengths(shortest, longest)
    prefill: dict[int, list[float]] = {length: [] for length in lengths}
    decode: dict[int, list[float]] = {length: [] for length in lengths}
    short_ids = source[:, :shortest]
    short_inputs = {"input_ids": short_ids, "attention_mask": torch.ones_like(short_ids)}
    config = greedy_config(model, loaded.tokenizer, OVERHEAD_TOKENS, use_cache=True)
    overheads: list[tuple[float, float]] = []
    for _ in range(repeat):
        with torch.inference_mode():
            for length in lengths:
                window = source[:, :length]
                mask = torch.ones_like(window)
                prefill[length].append(timed(input_ids=window, attention_mask=mask, use_cache=False)[1])
                cache = getattr(model(input_ids=window, attention_mask=mask, use_cache=True, **extra), cache_name)
                for position in range(length, length + DECODE_STEPS):
                    token = source[:, position : position + 1]
                    kwargs: dict[str, Any] = {"input_ids": token, cache_name: cache, "use_cache": True,
                                              "attention_mask": torch.ones_like(source[:, : position + 1])}  # fmt: skip
                    if "cache_position" in accepted:
                        kwargs["cache_position"] = torch.tensor([position], device=token.device)
                    output, seconds = timed(**kwargs)
                    cache = getattr(output, cache_name)
                    decode[length].append(seconds)
                del cache
        overheads.append(_hooked_overhead(loaded, short_inputs, config))  # in the same rounds: the same machine
    middle = (DECODE_STEPS - 1) / 2
    forwards = CostModel(
        fit_polynomial([(length, statistics.median(times)) for length, times in prefill.items()]),
        fit_polynomial([(length + middle, statistics.median(times)) for length, times in decode.items()]),
    )
    step = statistics.median(step for step, _ in overheads)
    call = statistics.median(call for _, call in overheads)
    return dataclasses.replace(forwards, step_overhead_s=step, call_overhead_s=call, probe_s=perf_counter() - started)


def _hooked_overhead(loaded: LoadedModel, inputs: dict[str, Any], config: Any) -> tuple[float, float]:
    """G and C of one cached generate, from hooks that stamp where each forward starts and ends."""
    from kvmagic.measure.accelerator import synchronize
    from kvmagic.measure.timing import timed_generate

    stamps: list[float] = []
    devices = loaded.devices  # once: it walks every parameter, which a hook would repeat in each stamp

    def stamp(*_: Any) -> None:
        synchronize(devices)
        stamps.append(perf_counter())

    hooks = [loaded.model.register_forward_pre_hook(stamp), loaded.model.register_forward_hook(stamp)]
    try:
        taken = timed_generate(loaded.model, inputs, config, devices)[1]
    finally:
        for hook in hooks:
            hook.remove()
    return generate_overhead(taken, stamps)
