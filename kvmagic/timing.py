"""The timed region: synchronize every accelerator, time one greedy ``generate``, synchronize again."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from time import perf_counter
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["greedy_config", "synchronize", "timed_generate"]

# Sampling knobs an instruct model may ship; greedy decoding ignores them, and leaving them set
# makes transformers warn on every call.
_SAMPLING_ONLY = ("temperature", "top_p", "top_k", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff")


def _synchronizers() -> dict[str, Callable[[torch.device], None]]:
    return {
        "cuda": torch.cuda.synchronize,
        "xpu": lambda device: torch.xpu.synchronize(device),
        "mps": lambda device: torch.mps.synchronize(),
    }


def synchronize(devices: Iterable[torch.device]) -> None:
    """Wait for queued work on every accelerator in ``devices``; CPU work is already done."""
    synchronizers = _synchronizers()
    for device in devices:
        wait = synchronizers.get(device.type)
        if wait is not None:
            wait(device)


def greedy_config(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, new_tokens: int, use_cache: bool
) -> GenerationConfig:
    """A copy of the model's generation config for exactly ``new_tokens`` greedy tokens.

    The model's own config is never touched, so a loaded model behaves afterwards as before.
    """
    config = copy.deepcopy(model.generation_config)
    for key in _SAMPLING_ONLY:
        setattr(config, key, None)
    config.do_sample = False
    config.num_beams = 1
    config.min_new_tokens = new_tokens
    config.max_new_tokens = new_tokens
    config.use_cache = use_cache
    if config.pad_token_id is None:
        config.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return config


def timed_generate(
    model: PreTrainedModel,
    inputs: Mapping[str, torch.Tensor],
    config: GenerationConfig,
    devices: Iterable[torch.device],
) -> tuple[torch.Tensor, float]:
    """Run ``generate`` once and return its output ids and wall-clock seconds.

    Only the ``generate`` call and the synchronizations that bound it lie inside the timed region.
    """
    devices = tuple(devices)
    with torch.inference_mode():
        synchronize(devices)
        start = perf_counter()
        output = model.generate(**inputs, generation_config=config)
        synchronize(devices)
        elapsed = perf_counter() - start
    return output, elapsed
