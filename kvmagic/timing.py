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

# Sampling knobs an instruct model may ship, at the values that mean "off". Greedy decoding ignores
# them, but any other value makes transformers warn on every call, and transformers 5 fills a knob
# left at None from the model's own config, so "off" must be spelled out.
_SAMPLING_OFF = {
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
    "min_p": None,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
}


def _legacy_generate_kwargs() -> dict[str, bool]:
    """transformers 4.50-4.57 overwrite config values that equal the global defaults with the model's
    own (undoing "temperature off") unless told not to; 5.x has no such switch and needs none."""
    from importlib.metadata import version

    from packaging.version import Version

    return {} if Version(version("transformers")) >= Version("5") else {"use_model_defaults": False}


_GENERATE_KWARGS = _legacy_generate_kwargs()


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
    for key, value in _SAMPLING_OFF.items():
        setattr(config, key, value)
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
        output = model.generate(**inputs, generation_config=config, **_GENERATE_KWARGS)
        synchronize(devices)
        elapsed = perf_counter() - start
    return output, elapsed
