"""Memory on the model's device: what is free, what a forward takes per token, and whether a run fitted.

The frontier (:mod:`~kvmagic.addons.frontier.reach`) predicts how much a generate needs beyond the weights; this
is the measuring side. Its probes count tensors: CUDA's allocator counts them, elsewhere a dispatch
mode does (kvmagic.measure.tensors), so a prediction means the same on every device. A CPU
process's resident memory holds more than its tensors (the C heap keeps freed blocks that a
growing cache or growing forwards cannot reuse), so the fit check measures that too, counted from
a heap whose free pages were handed back first (glibc ``malloc_trim``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kvmagic.addons.frontier.reach import Activations, FitCheck
from kvmagic.measure.accelerator import release_memory, track_peak
from kvmagic.measure.strategies import reset_static_cache_state

if TYPE_CHECKING:
    import torch

    from kvmagic.measure.loaded import LoadedModel
    from kvmagic.measure.strategies import Setup

__all__ = ["check_fit", "free_bytes", "in_use", "measure_activations"]

PROBE_LENGTHS = (256, 1024)  # far apart, so the per-token slope stands above a fixed part's noise


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

    return int(psutil.Process().memory_info().rss)


def measure_activations(
    loaded: LoadedModel, input_ids: torch.Tensor, lengths: Sequence[int] = PROBE_LENGTHS
) -> Activations:
    """Peak memory beyond weights and cache of a forward at two lengths, as fixed + per-token parts.

    The forward is uncached over L tokens (an uncached step, or a prefill); the decode step is one
    token on a dynamic cache of L - 1 positions, its peak counted above the cache it started with.
    Both ask for the last position's logits only, as ``generate`` does. The longer length stays
    within the model's positions.
    """
    import inspect

    import torch

    limit = loaded.max_positions or lengths[1]
    long = min(lengths[1], limit)
    short = min(lengths[0], long // 4)
    source = input_ids[:1].repeat(1, -(-long // input_ids.shape[-1]))
    model, devices = loaded.model, loaded.devices
    accepted = inspect.signature(model.forward).parameters
    extra: dict[str, Any] = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}
    cache_name = "cache" if "cache" in accepted else "past_key_values"  # transformers 5 renamed it
    forward: list[float] = []
    decode: list[float] = []
    with torch.inference_mode():
        model(input_ids=source[:, :short], use_cache=False, **extra)  # first-call allocations are not per token
        for length in (short, long):
            window = source[:, :length]
            mask = torch.ones_like(window)  # generate passes one: the model may build a causal mask from it
            whole = {"input_ids": window, "attention_mask": mask, "use_cache": False, **extra}
            forward.append(_tensor_peak(devices, lambda w=whole: model(**w)))
            prefix = model(input_ids=window[:, :-1], attention_mask=mask[:, :-1], use_cache=True, **extra)
            cache = getattr(prefix, cache_name)
            step = {"input_ids": window[:, -1:], "attention_mask": mask, cache_name: cache, "use_cache": True, **extra}
            decode.append(_tensor_peak(devices, lambda s=step: model(**s), existing=_cache_tensors(cache)))
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
    loaded: LoadedModel, strategy: Setup, input_ids: torch.Tensor, new_tokens: int, *,
    budget_bytes: float, predicted_bytes: float,
) -> FitCheck:  # fmt: skip
    """Run one greedy generate at a predicted frontier: its tensors' peak and the device's, beside the prediction.

    A budget cannot be imposed on a CPU process's memory, so it is a number here: the check says
    whether the peak stayed within it. On CUDA both peaks are the allocator's; elsewhere the
    device's is the process's resident memory, and the tensors are counted in the same run.
    """
    from kvmagic.measure.tensors import track_tensors
    from kvmagic.measure.timing import timed_generate

    inputs = {"input_ids": input_ids, "attention_mask": input_ids.new_ones(input_ids.shape)}
    model, devices = loaded.model, loaded.devices
    with strategy.around(model):
        timed_generate(model, inputs, _config(loaded, strategy, min(new_tokens, 2)), devices)  # first-use builds
    config = _config(loaded, strategy, new_tokens)
    reset_static_cache_state(model)  # a static cache sized by the first-use run, or an earlier one, would stay
    with strategy.around(model):
        if _on_cuda(devices):
            measured = tensors = _peak_above(devices, lambda: timed_generate(model, inputs, config, devices))
        else:
            with track_tensors() as live:
                measured = _peak_above(devices, lambda: timed_generate(model, inputs, config, devices))
            tensors = float(live.peak_bytes)
    release_memory()
    return FitCheck(
        strategy=strategy.strategy,
        prompt_tokens=input_ids.shape[-1],
        new_tokens=new_tokens,
        batch=input_ids.shape[0],
        budget_bytes=budget_bytes,
        predicted_bytes=predicted_bytes,
        measured_bytes=measured,
        tensor_bytes=tensors,
    )


def _config(loaded: LoadedModel, strategy: Setup, new_tokens: int) -> Any:
    from kvmagic.measure.greedy import greedy_config

    config = greedy_config(loaded.model, loaded.tokenizer, new_tokens, use_cache=True)
    for key, value in strategy.settings.items():
        setattr(config, key, value)
    return config


def _on_cuda(devices: Iterable[torch.device]) -> bool:
    return any(d.type == "cuda" for d in devices)


def _tensor_peak(devices: Sequence[torch.device], work: Any, existing: Iterable[torch.Tensor] = ()) -> float:
    """Most bytes of tensors alive at once while ``work`` runs, above those alive before; off CUDA,
    ``existing`` names the ones ``work`` may free (a cache it replaces), so that their release counts."""
    if _on_cuda(devices):
        return _peak_above(devices, work)
    from kvmagic.measure.tensors import LiveTensors

    live = LiveTensors(existing)
    del existing  # no reference here may keep alive a tensor that the work frees
    with live:
        work()
    return float(live.peak_bytes)


def _cache_tensors(cache: Any) -> list[torch.Tensor]:
    """The keys and values a dynamic cache holds, per layer (``layers[i].keys`` in transformers 4.55 and 5)."""
    import torch

    held = [getattr(layer, name, None) for layer in getattr(cache, "layers", ()) for name in ("keys", "values")]
    return [tensor for tensor in held if isinstance(tensor, torch.Tensor)]


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
