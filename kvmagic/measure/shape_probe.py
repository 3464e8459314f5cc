"""A loaded model's sizes, as arithmetic of its speed and memory needs them: from its config and its weights."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvmagic.core.shape import ModelShape
from kvmagic.measure.memory import sliding_keep

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

__all__ = ["model_shape", "weight_nbytes"]

_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def model_shape(model: PreTrainedModel) -> ModelShape:
    """The config's dimensions and the weights' bytes as loaded (tied or quantized weights counted as held)."""
    text = model.config.get_text_config()
    layers = text.num_hidden_layers
    heads = text.num_attention_heads
    hidden = text.hidden_size
    window = getattr(text, "sliding_window", None)
    layer_types = getattr(text, "layer_types", None) or ["full_attention"] * layers
    intermediate = getattr(text, "intermediate_size", None) or 4 * hidden
    positions = next((v for k in _POSITION_KEYS if isinstance(v := getattr(text, k, None), int) and v > 0), None)
    return ModelShape(
        layers=layers,
        hidden=hidden,
        intermediate=intermediate,
        heads=heads,
        kv_heads=getattr(text, "num_key_value_heads", None) or heads,
        head_dim=getattr(text, "head_dim", None) or hidden // heads,
        vocab=text.vocab_size,
        dtype_bytes=_element_size(model.dtype),
        weight_bytes=weight_nbytes(model),
        tied_embeddings=_tied(model),
        windows=tuple(window if kind == "sliding_attention" and window else None for kind in layer_types[:layers]),
        mlp_matrices=_mlp_matrices(model, hidden, intermediate),
        max_positions=positions,
        cache_windows=sliding_keep().windowed,
    )


def weight_nbytes(model: PreTrainedModel) -> int:
    """Bytes of the parameters, each storage once (a tied embedding is one matrix)."""
    seen: dict[tuple[str, int], int] = {}
    for parameter in model.parameters():
        key = (str(parameter.device), parameter.data_ptr())
        seen[key] = max(seen.get(key, 0), parameter.numel() * parameter.element_size())
    return sum(seen.values())


def _element_size(dtype: torch.dtype) -> int:
    import torch

    return torch.empty((), dtype=dtype).element_size()


def _tied(model: PreTrainedModel) -> bool:
    """Whether the output head shares the input embedding's storage (counted once in the weights)."""
    found: Any = model  # torch types a Module's attributes as Tensor | Module
    output, embedding = found.get_output_embeddings(), found.get_input_embeddings()
    return output is not None and output.weight.data_ptr() == embedding.weight.data_ptr()


def _mlp_matrices(model: PreTrainedModel, hidden: int, intermediate: int) -> int:
    """Matrices of hidden x intermediate in the first layer's MLP: 3 for a gated MLP, 2 for a plain one."""
    import torch

    for name, module in model.named_modules():
        if name.endswith(".mlp"):
            size = sum(m.weight.numel() for m in module.modules() if isinstance(m, torch.nn.Linear))
            return max(1, round(size / (hidden * intermediate)))
    return 3
