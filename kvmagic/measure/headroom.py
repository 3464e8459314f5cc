"""Memory on the model's device: what is free, what a forward takes per token, and whether a run fitted.

The frontier (kvmagic.core.frontier) predicts how much a generate needs beyond the weights; this is
the measuring side. On CUDA memory means tensors (the allocator's counts); elsewhere the process's
resident memory, where a freed block may stay resident, so the probes first hand the C heap's free
pages back (glibc ``malloc_trim``) and count from there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kvmagic.core.frontier import Activations, FitCheck
from kvmagic.measure.accelerator import release_memory, track_peak

if TYPE_CHECKING:
    import torch

    from kvmagic.measure.strategies import Strategy
    from kvmagic.model.loading import LoadedModel

__all__ = ["check_fit", "free_bytes", "in_use", "measure_activations"]

PROBE_LENGTHS = (256, 1024)  # long enough that a per-token slope stands above the allocator's granularity


def free_bytes(devices: Iterable[torch.device], budget: float | None = None) -> float:
    """Memory a run may still take: ``budget`` if given, else what the device has free.

    CUDA: free memory of each device (the allocator's cached but unused blocks included), summed.
    Elsewhere: the system's available memory.
    """
    if budget is not None:
        return float(budget)
    import torch

    cuda = sorted({d for d in devices if d.type == "cuda"}, key=str)
    if cuda:
        return float(
            sum(
                torch.cuda.mem_get_info(d)[0] + torch.cuda.memory_reserved(d) - torch.cuda.memory_allocated(d)
                for d in cuda
            )
        )
    import psutil

    return float(psutil.virtual_memory().available)


def in_use(devices: Iterable[torch.device]) -> int:
    """Memory held now, counted as the peak trackers count it: CUDA tensors, else the process's resident set."""
    import torch

    cuda = [d for d in devices if d.type == "cuda"]
    if cuda:
        return sum(torch.cuda.memory_allocated(d) for d in cuda)
    _trim_heap()
    import psutil

    return psutil.Process().memory_info().rss


def measure_activations(
    loaded: LoadedModel, input_ids: torch.Tensor, lengths: Sequence[int] = PROBE_LENGTHS
) -> Activations:
    """Peak memory beyond weights and cache of a forward at two lengths, as fixed + per-token parts.

    The forward is uncached over L tokens (an uncached step, or a prefill); the decode step is one
    token on a dynamic cache of L - 1 positions, its peak counted above the cache it started with.
    Both ask for the last position's logits only, as ``generate`` does.
    """
    import inspect

    import torch

    short, long = lengths
    source = input_ids[:1].repeat(1, -(-long // input_ids.shape[-1]))
    model, devices = loaded.model, loaded.devices
    accepted = inspect.signature(model.forward).parameters
    extra: dict[str, Any] = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}
    cache_name = "cache" if "cache" in accepted else "past_key_values"  # transformers 5 renamed it
    forward, decode = [], []
    with torch.inference_mode():
        model(input_ids=source[:, :short], use_cache=False, **extra)  # first-call allocations are not per token
        for length in lengths:
            window = source[:, :length]
            mask = torch.ones_like(window)  # generate passes one: the model may build a causal mask from it
            whole = {"input_ids": window, "attention_mask": mask, "use_cache": False, **extra}
            forward.append(_peak_above(devices, lambda w=whole: model(**w)))
            prefix = model(input_ids=window[:, :-1], attention_mask=mask[:, :-1], use_cache=True, **extra)
            cache = getattr(prefix, cache_name)
            step = {"input_ids": window[:, -1:], "attention_mask": mask, cache_name: cache, "use_cache": True, **extra}
            decode.append(_peak_above(devices, lambda s=step: model(**s)))
            del prefix, cache, step
    release_memory()
    forward_slope = max(0.0, (forward[1] - forward[0]) / (long - short))
    decode_slope = max(0.0, (decode[1] - decode[0]) / (long - short))
    return Activations(
        forward_fixed=max(0.0, forward[0] - forward_slope * short),
        forward_per_token=forward_slope,
        decode_fixed=max(0.0, decode[0] - decode_slope * short),
        decode_per_position=decode_slope,
    )


def check_fit(
    loaded: LoadedModel, strategy: Strategy, input_ids: torch.Tensor, new_tokens: int, *,
    budget_bytes: float, predicted_bytes: float, count_tensors: bool | None = None,
) -> FitCheck:  # fmt: skip
    """Run one greedy generate at a predicted frontier and measure its peak beyond what was held before.

    A budget cannot be imposed on a CPU process's memory, so it is a number here: the check is the
    prediction beside the measured peak, and whether that peak stayed within the budget. Where the
    peak is the process's resident memory (not CUDA), ``count_tensors`` (the default there) also
    counts the live tensors' peak in the same run, to tell the prediction's error from the heap's.
    """
    from kvmagic.measure.tensors import track_tensors
    from kvmagic.measure.timing import timed_generate

    inputs = {"input_ids": input_ids, "attention_mask": input_ids.new_ones(input_ids.shape)}
    model, devices = loaded.model, loaded.devices
    timed_generate(model, inputs, _config(loaded, strategy, min(new_tokens, 2)), devices)  # first-use builds
    config = _config(loaded, strategy, new_tokens)
    if count_tensors is None:
        count_tensors = not any(d.type == "cuda" for d in devices)
    tensors = None
    if count_tensors:
        with track_tensors() as live:
            measured = _peak_above(devices, lambda: timed_generate(model, inputs, config, devices))
        tensors = float(live.peak_bytes)
    else:
        measured = _peak_above(devices, lambda: timed_generate(model, inputs, config, devices))
    release_memory()
    return FitCheck(
        strategy=strategy.name,
        prompt_tokens=input_ids.shape[-1],
        new_tokens=new_tokens,
        batch=input_ids.shape[0],
        budget_bytes=budget_bytes,
        predicted_bytes=predicted_bytes,
        measured_bytes=measured,
        tensor_bytes=tensors,
    )


def _config(loaded: LoadedModel, strategy: Strategy, new_tokens: int) -> Any:
    from kvmagic.measure.timing import greedy_config

    config = greedy_config(loaded.model, loaded.tokenizer, new_tokens, use_cache=True)
    for key, value in strategy.settings.items():
        setattr(config, key, value)
    return config


def _peak_above(devices: Sequence[torch.device], work: Any) -> float:
    """Peak memory while ``work`` runs, less what was held when it started; ``work``'s result is dropped."""
    before = in_use(devices)
    with track_peak(devices) as peak:
        work()
    return float(max(0, peak.peak_bytes - before))


@functools.cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        library = ctypes.CDLL(name) if name else None
    except OSError:
        library = None
    return library if library is not None and hasattr(library, "malloc_trim") else None


def _trim_heap() -> None:
    """Return the C heap's free pages to the system (glibc), so resident memory counts what is in use."""
    library = _libc()
    if library is not None:
        library.malloc_trim(0)
