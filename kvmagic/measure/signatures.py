"""How the installed transformers spells what it takes and returns, asked of its own signatures and fields.

Keywords and fields move between releases that share a major version (``dtype`` replaced ``torch_dtype``
in 4.56; the cache ``generate`` returns moved from ``past_key_values`` to ``cache`` within 5.x), so each
answer comes from the installed code, never from a version number; what it can *do* is asked in
:mod:`kvmagic.measure.capabilities`. Each is worked out once per process (``functools.cache``).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

__all__ = [
    "cache_keyword",
    "dtype_keyword",
    "generate_takes_use_model_defaults",
    "returned_cache_field",
    "tensor_parallel_keyword",
]


@functools.cache
def dtype_keyword() -> str:
    """``dtype`` where loading takes it (transformers 4.56 on), else ``torch_dtype``: asked of a one-weight model."""
    import torch
    from transformers import PretrainedConfig, PreTrainedModel

    class _OneWeight(PreTrainedModel):
        config_class = PretrainedConfig

        def __init__(self, config: PretrainedConfig) -> None:
            super().__init__(config)
            self.weight = torch.nn.Parameter(torch.zeros(1))

    try:
        built = _OneWeight._from_config(PretrainedConfig(), dtype=torch.float16)  # type: ignore[no-untyped-call, unused-ignore]
    except TypeError:  # the keyword reached the model's own __init__: loading does not know it
        return "torch_dtype"
    return "dtype" if built.weight.dtype == torch.float16 else "torch_dtype"


@functools.cache
def generate_takes_use_model_defaults() -> bool:
    """Whether ``generate`` has the switch that stops it overwriting default-valued settings (4.50-4.57)."""
    from transformers import GenerationMixin

    return "use_model_defaults" in inspect.signature(GenerationMixin.generate).parameters


@functools.cache
def returned_cache_field() -> str:
    """Where ``generate(..., return_dict_in_generate=True)`` puts the cache: ``cache`` or ``past_key_values``."""
    import dataclasses

    from transformers.generation.utils import GenerateDecoderOnlyOutput

    fields = {f.name for f in dataclasses.fields(GenerateDecoderOnlyOutput)}
    return "cache" if "cache" in fields else "past_key_values"


def cache_keyword(model: Any) -> str:
    """How ``generate`` takes a cache to start from: ``cache`` where the model's forward is written for it
    (transformers 5.24 warns on the old name), else ``past_key_values``."""
    return "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"


@functools.cache
def tensor_parallel_keyword() -> str:
    """How ``from_pretrained`` is asked for the model's own tensor-parallel plan: ``distributed_config`` (a
    ``DistributedConfig`` that takes ``tp_plan``, where passing ``tp_plan`` itself is deprecated) or ``tp_plan``."""
    import transformers

    config = getattr(transformers, "DistributedConfig", None)
    if config is not None and "tp_plan" in inspect.signature(config).parameters:
        return "distributed_config"
    return "tp_plan"
