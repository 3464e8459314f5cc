"""The timed region: synchronize every accelerator, time one greedy ``generate``, synchronize again."""

from __future__ import annotations

import copy
import dataclasses
import gc
import itertools
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from time import perf_counter
from typing import TYPE_CHECKING, Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from kvmagic.measure.accelerator import PeakMemory, synchronize, track_peak
from kvmagic.measure.capabilities import generate_takes_use_model_defaults, returned_cache_field
from kvmagic.measure.lockstep import barrier, slowest, slowest_each

if TYPE_CHECKING:
    from transformers import GenerationConfig, PreTrainedModel

__all__ = [
    "ProfiledRun",
    "StepTimer",
    "TopTwo",
    "generate_kwargs",
    "generate_once",
    "model_defaults",
    "profiled_generate",
    "returned_cache",
    "timed_generate",
]


def generate_kwargs() -> dict[str, bool]:
    """transformers 4.50-4.57 overwrite config values that equal the global defaults with the model's
    own (undoing "temperature off") unless told not to; 5.x has no such switch (see :func:`model_defaults`)."""
    return {"use_model_defaults": False} if generate_takes_use_model_defaults() else {}


@contextmanager
def model_defaults(model: Any, config: GenerationConfig) -> Iterator[None]:
    """Make ``config`` the model's defaults for one call, then put the model's own back.

    transformers 5 fills every setting the passed config leaves at None from the model's own
    ``generation_config``, and None is the only "off" of many (banned, forced and suppressed
    tokens, a watermark, a guidance scale): with the model's defaults swapped for the config
    itself, nothing of the checkpoint's leaks in. The model's config object is never touched.
    """
    if not hasattr(model, "generation_config"):
        yield
        return
    own = model.generation_config
    model.generation_config = config
    try:
        yield
    finally:
        model.generation_config = own


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Collect now, then keep the garbage collector out of the timed region (as ``timeit`` does);
    its previous state comes back afterwards, whatever happens inside.

    The collection covers the young generations: what the previous run left was allocated with
    the collector off, so it is still young. A full collection would also walk the long-lived
    objects of torch and transformers, 0.2-0.4 s per run on a busy machine with tiny loaded,
    longer than tiny's own runs.
    """
    gc.collect(1)
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def timed_generate(
    model: PreTrainedModel,
    inputs: Mapping[str, Any],
    config: GenerationConfig,
    devices: Iterable[torch.device],
    *,
    peak: PeakMemory | None = None,
    own: bool = False,
) -> tuple[Any, float]:
    """Run ``generate`` once and return its output and wall-clock seconds.

    Only the ``generate`` call and the synchronizations that bound it lie inside the timed region;
    the garbage collector runs just before it and stays off during it. ``peak``, if given, is reset
    before the region and read after it (the output is a ``GenerateOutput`` when the config asks
    for ``return_dict_in_generate``, with the cache it built). Across ranks in lockstep
    (:mod:`kvmagic.measure.lockstep`), every rank starts together (a barrier before the region) and the run
    counts as long as its slowest rank's, reduced after the region (``own``: this rank's seconds, for a caller
    that keeps both).
    """
    devices, extra = tuple(devices), generate_kwargs()  # worked out before the timed region
    with torch.inference_mode(), model_defaults(model, config), _collector_paused():
        barrier()
        if peak is not None:
            peak.start()
        synchronize(devices)
        start = perf_counter()
        output = model.generate(**inputs, generation_config=config, **extra)  # type: ignore[operator]  # torch types Module attributes as Tensor | Module
        synchronize(devices)
        elapsed = perf_counter() - start
        if peak is not None:
            peak.stop()
    return output, elapsed if own else slowest(elapsed)


def generate_once(model: PreTrainedModel, inputs: Mapping[str, torch.Tensor], config: GenerationConfig) -> Any:
    """One ``generate`` as a timed run makes it (the config as the model's defaults, the collector quiet),
    for a caller that watches it some other way."""
    with torch.inference_mode(), model_defaults(model, config), _collector_paused():
        return model.generate(**inputs, generation_config=config, **generate_kwargs())  # type: ignore[operator]  # as above


def returned_cache(output: Any) -> Any:
    """The cache a ``generate`` with ``return_dict_in_generate`` returned: ``cache`` in transformers 5,
    ``past_key_values`` in 4.x (deprecated in 5)."""
    return getattr(output, returned_cache_field())


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
    peak_source: str = ""  # where peak_bytes comes from (see PeakMemory.source)

    @property
    def step_seconds(self) -> list[float]:
        """Time to each token from the one before it; the first is time to first token."""
        edges = [self.start, *self.stamps]
        return [after - before for before, after in itertools.pairwise(edges)]


def profiled_generate(
    model: PreTrainedModel,
    inputs: Mapping[str, Any],
    config: GenerationConfig,
    devices: Iterable[torch.device],
) -> ProfiledRun:
    """Run ``generate`` once with hooks: per-step stamps, top-2 margins, peak memory, the returned cache.

    The hooks cost time, so the headline times never come from here (see :func:`timed_generate`).
    """
    devices, extra = tuple(devices), generate_kwargs()
    config = copy.deepcopy(config)
    config.return_dict_in_generate = True
    timer, tops = StepTimer(devices), TopTwo()
    with torch.inference_mode(), model_defaults(model, config), _collector_paused(), track_peak(devices) as peak:
        barrier()
        synchronize(devices)
        start = perf_counter()
        output = model.generate(  # type: ignore[operator]  # as above
            **inputs,
            generation_config=config,
            stopping_criteria=StoppingCriteriaList([timer]),
            logits_processor=LogitsProcessorList([tops]),
            **extra,
        )
        synchronize(devices)
    cache = returned_cache(output)
    stamps = [start + s for s in slowest_each([stamp - start for stamp in timer.stamps])]  # the slowest rank's steps
    return ProfiledRun(output["sequences"], start, stamps, tops.margins(), peak.peak_bytes, cache, peak.source)
