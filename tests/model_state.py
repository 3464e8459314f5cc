"""What a failed or interrupted run must leave exactly as it found it, captured in one comparable value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["ModelState", "snapshot"]


@dataclass(frozen=True)
class ModelState:
    training: bool
    generation_config: dict[str, Any]
    parameters: tuple[tuple[str, bool, torch.dtype, torch.device], ...]
    weights_sum: float
    grad_enabled: bool
    inference_mode: bool


def snapshot(model: torch.nn.Module) -> ModelState:
    """The model's mode, generation settings, every parameter's flags and a checksum of its weights,
    plus torch's global autograd mode (an interrupted ``inference_mode`` block must not leak out)."""
    with torch.no_grad():
        weights_sum = float(sum(p.double().abs().sum() for p in model.parameters()))
    return ModelState(
        training=model.training,
        generation_config=model.generation_config.to_dict(),
        parameters=tuple((n, p.requires_grad, p.dtype, p.device) for n, p in model.named_parameters()),
        weights_sum=weights_sum,
        grad_enabled=torch.is_grad_enabled(),
        inference_mode=torch.is_inference_mode_enabled(),
    )
