"""The timed region: synchronize every accelerator, time one greedy ``generate``, synchronize again."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from time import perf_counter
from typing import TYPE_CHECKING, Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from kvmagic.measure.accelerator import synchronize, track_peak

if TYPE_CHECKING:
    from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["ProfiledRun", "StepTimer", "TopTwo", "greedy_config", "profiled_generate", "timed_generate"]

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
        output = model.generate(**inputs, generation_config=config, **_GENERATE_KWARGS)  # type: ignore[operator]  # torch types Module attributes as Tensor | Module
        synchronize(devices)
        elapsed = perf_counter() - start
    return output, elapsed


class StepTimer(StoppingCriteria):
    """Stamps the moment each new token exists (``generate`` asks once per token); never stops anything.

    It synchronizes the accelerators first, so a stamp marks finished work, not queued work.
    """

    def __init__(self, devices: Iterable[torch.device]) -> None:
        self.devices = tuple(devices)
        self.stamps: list[float] = []
        self._never: torch.Tensor | None = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor | None, **kwargs: object) -> torch.Tensor:
        synchronize(self.devices)
        self.stamps.append(perf_counter())
        if self._never is None or self._never.shape[0] != input_ids.shape[0]:
            self._never = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        return self._never


class TopTwo(LogitsProcessor):
    """Keeps the two highest scores of each step (first sequence): a small gap explains a flipped token.

    It sits after generate's own processors, so it sees the scores greedy search picks from.
    """

    def __init__(self) -> None:
        self.tops: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.tops.append(scores[0].topk(2).values)
        return scores

    def margins(self) -> list[float]:
        if not self.tops:
            return []
        tops = torch.stack(self.tops).float()
        return (tops[:, 0] - tops[:, 1]).tolist()


@dataclasses.dataclass
class ProfiledRun:
    """One ``generate`` with per-step stamps, top-2 margins, peak memory and the cache it returned."""

    output: torch.Tensor
    start: float
    stamps: list[float]
    margins: list[float]
    peak_bytes: int
    cache: Any

    @property
    def step_seconds(self) -> list[float]:
        """Time to each token from the one before it; the first is time to first token."""
        edges = [self.start, *self.stamps]
        return [after - before for before, after in itertools.pairwise(edges)]


def profiled_generate(
    model: PreTrainedModel,
    inputs: Mapping[str, torch.Tensor],
    config: GenerationConfig,
    devices: Iterable[torch.device],
) -> ProfiledRun:
    """Run ``generate`` once with hooks: per-step stamps, top-2 margins, peak memory, the returned cache.

    The hooks cost time, so the headline times never come from here (see :func:`timed_generate`).
    """
    devices = tuple(devices)
    config = copy.deepcopy(config)
    config.return_dict_in_generate = True
    timer, tops = StepTimer(devices), TopTwo()
    with torch.inference_mode(), track_peak(devices) as peak:
        synchronize(devices)
        start = perf_counter()
        output = model.generate(  # type: ignore[operator]  # as above
            **inputs,
            generation_config=config,
            stopping_criteria=StoppingCriteriaList([timer]),
            logits_processor=LogitsProcessorList([tops]),
            **_GENERATE_KWARGS,
        )
        synchronize(devices)
    # transformers 5 returns the cache as ``cache``; 4.x as ``past_key_values`` (deprecated in 5).
    fields = {f.name for f in dataclasses.fields(output)}
    cache = output.cache if "cache" in fields else output.past_key_values
    return ProfiledRun(output["sequences"], start, timer.stamps, tops.margins(), peak.peak_bytes, cache)
