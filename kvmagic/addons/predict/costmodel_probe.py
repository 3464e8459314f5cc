"""Probes of the cost model on a device: F(L), D(L), and generate's own work G and C.

The machine that runs the probes may speed up or slow down while they run (other work, clock
changes). So the probes go in rounds, each visiting every length and the hooked ``generate``, and
every round's timings are kept, and its wall time (:class:`kvmagic.addons.predict.costmodel.Probes`): a
slow stretch then costs every point alike, each point's median round fits the curves of a typical run,
and the fastest whole round scales them to what a load cannot inflate, both by the pure
:mod:`kvmagic.addons.predict.costmodel`. Only ``--predict`` probes: the budget is held from the runs a cell makes
(:mod:`kvmagic.core.deadline`).
"""

from __future__ import annotations

import inspect
from time import perf_counter
from typing import TYPE_CHECKING, Any

from kvmagic.addons.predict.costmodel import (
    DECODE_STEPS,
    OVERHEAD_TOKENS,
    PROBE_REPEAT,
    Probes,
    generate_overhead,
    probe_lengths,
)  # fmt: skip

if TYPE_CHECKING:
    from transformers import BatchEncoding

    from kvmagic.measure.loaded import LoadedModel

__all__ = ["probe"]


def probe(
    loaded: LoadedModel, inputs: BatchEncoding, shortest: int, longest: int, *, repeat: int = PROBE_REPEAT
) -> Probes:
    """Time F(L), D(L), G and C in ``repeat`` rounds over lengths from ``shortest`` to ``longest``.

    F(L) is one forward with ``use_cache=False``; D(L) one forward of a single token on a cache
    that a prefill of L tokens built, then one more at L + 1 on the cache that step grew (each a
    decode step a cached generate takes). Each probe is timed between device synchronizations
    under ``torch.inference_mode``; the model computes only the last position's logits, as
    ``generate`` asks it to. Each round visits every length and runs the hooked generate; every
    timing is kept, and each round's wall time, for :class:`Probes` to fit.
    """
    import torch

    from kvmagic.measure.greedy import greedy_config

    started = perf_counter()
    forwards = _Forwards(loaded, inputs["input_ids"], longest + DECODE_STEPS)
    lengths = probe_lengths(shortest, longest)
    prefill: dict[int, list[float]] = {length: [] for length in lengths}
    decode: dict[int, list[float]] = {length: [] for length in lengths}
    short_ids = forwards.source[:, :shortest]
    short_inputs = {"input_ids": short_ids, "attention_mask": torch.ones_like(short_ids)}
    config = greedy_config(loaded.model, loaded.tokenizer, OVERHEAD_TOKENS, use_cache=True)
    overheads: list[tuple[float, float]] = []
    rounds: list[float] = []
    for _ in range(repeat):
        round_started = perf_counter()
        with torch.inference_mode():
            for length in lengths:
                prefill[length].append(forwards.prefill(length))
                decode[length].extend(forwards.decode(length))
        overheads.append(_hooked_overhead(loaded, short_inputs, config))  # in the same rounds: the same machine
        rounds.append(perf_counter() - round_started)
    middle = (DECODE_STEPS - 1) / 2
    return Probes(
        prefill, {length + middle: times for length, times in decode.items()}, tuple(overheads), tuple(rounds),
        probe_s=perf_counter() - started,
    )  # fmt: skip


class _Forwards:
    """Single forwards of the model over a window of ``source`` ids, timed between synchronizations."""

    def __init__(self, loaded: LoadedModel, ids: Any, length: int) -> None:
        self.model, self.devices = loaded.model, loaded.devices
        self.source = ids.repeat(1, -(-length // ids.shape[-1]))
        self.accepted = inspect.signature(self.model.forward).parameters
        self.extra: dict[str, Any] = {"logits_to_keep": 1} if "logits_to_keep" in self.accepted else {}
        self.cache_name = "cache" if "cache" in self.accepted else "past_key_values"  # transformers 5 renamed it

    def timed(self, **kwargs: Any) -> tuple[Any, float]:
        from kvmagic.measure.accelerator import synchronize

        synchronize(self.devices)
        start = perf_counter()
        output = self.model(**kwargs, **self.extra)
        synchronize(self.devices)
        return output, perf_counter() - start

    def prefill(self, length: int) -> float:
        """F(length): one forward over ``length`` tokens without a cache."""
        import torch

        window = self.source[:, :length]
        return self.timed(input_ids=window, attention_mask=torch.ones_like(window), use_cache=False)[1]

    def decode(self, length: int) -> list[float]:
        """D at ``length``, ``length + 1``, ...: single-token steps on the cache a prefill of ``length`` built."""
        import torch

        window = self.source[:, :length]
        output = self.model(input_ids=window, attention_mask=torch.ones_like(window), use_cache=True, **self.extra)
        cache, times = getattr(output, self.cache_name), []
        for position in range(length, length + DECODE_STEPS):
            token = self.source[:, position : position + 1]
            kwargs: dict[str, Any] = {"input_ids": token, self.cache_name: cache, "use_cache": True}
            kwargs["attention_mask"] = torch.ones_like(self.source[:, : position + 1])
            if "cache_position" in self.accepted:
                kwargs["cache_position"] = torch.tensor([position], device=token.device)
            output, seconds = self.timed(**kwargs)
            cache = getattr(output, self.cache_name)
            times.append(seconds)
        return times


def _hooked_overhead(loaded: LoadedModel, inputs: dict[str, Any], config: Any) -> tuple[float, float]:
    """G and C of one cached generate, from hooks that stamp where each forward starts and ends."""
    from kvmagic.measure.accelerator import synchronize
    from kvmagic.measure.timing import timed_generate

    stamps: list[float] = []
    devices = loaded.devices  # once: reading it walks every parameter, which the gaps must not include

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
