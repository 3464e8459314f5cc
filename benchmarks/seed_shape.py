"""The source experiment's model, EXAONE-4.0-1.2B, at its real shape with random weights.

Its hub weights are not needed to time it: the cost of a forward depends on the shape, not on the
numbers. Built directly on the device (no CPU copy of 2.6 GB first), with kvmagic's ``tiny``
tokenizer, whose ids all lie inside the real vocabulary. ``toy=True`` keeps the architecture and
vocabulary but shrinks the layers, for a dry run on a CPU.
"""

from __future__ import annotations

import torch
import transformers

from kvmagic.model.loading import LoadedModel

__all__ = ["seed_shape"]

NAME = "EXAONE-4.0-1.2B shape, random weights"


def seed_shape(tokenizer: object, device: str, dtype: torch.dtype, *, toy: bool = False) -> LoadedModel:
    """EXAONE-4.0-1.2B's config (from a re-saved copy of the real one) and seeded random weights."""
    from transformers import AutoModelForCausalLM, Exaone4Config

    layers = 2 if toy else 30
    config = Exaone4Config(
        vocab_size=102400, hidden_size=128 if toy else 2048, intermediate_size=256 if toy else 4096,
        num_hidden_layers=layers, num_attention_heads=4 if toy else 32, num_key_value_heads=2 if toy else 8,
        head_dim=32 if toy else 64, max_position_embeddings=65536, rope_theta=1e6, tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 16.0, "original_max_position_embeddings": 8192,
                      "low_freq_factor": 1.0, "high_freq_factor": 4.0},
        sliding_window=None, layer_types=["full_attention"] * layers, bos_token_id=1, eos_token_id=361, pad_token_id=0,
    )  # fmt: skip
    keyword = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, **{keyword: dtype}).eval()
    return LoadedModel(model, tokenizer, NAME + (" (toy size)" if toy else ""))  # type: ignore[arg-type]
