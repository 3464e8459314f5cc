"""The embedded model: same weights, tokens and outputs under every transformers line."""

from __future__ import annotations

import hashlib

import pytest
import torch

from kvmagic import run_benchmark
from kvmagic.model.tiny import EOS_ID, tiny_dir
from kvmagic.runner.prompt import encode_prompt

from .conftest import PROMPT

# Recorded once; transformers 4.55.4 and 5.x must both reproduce them exactly.
WEIGHTS_SHA256_PREFIX = "717a41dcf2baf192"
SEED_PROMPT_IDS_16 = (200, 66, 66, 66, 66, 66, 66, 66, 66, 66, 14, 162, 225, 200, 66, 66)


def test_architecture(tiny):
    config = tiny.model.config
    assert type(tiny.model).__name__ == "Exaone4ForCausalLM"
    assert config.layer_types == ["full_attention"] * config.num_hidden_layers
    assert tiny.max_positions == 2048
    assert tiny.num_parameters == 3_871_232


def test_weights_are_seeded_by_name(tiny):
    digest = hashlib.sha256()
    for name, param in sorted(tiny.model.named_parameters()):
        digest.update(name.encode())
        digest.update(param.detach().to(torch.float32).numpy().tobytes())
    assert digest.hexdigest()[:16] == WEIGHTS_SHA256_PREFIX


def test_generation_is_the_same_on_every_transformers_line(tiny):
    result = run_benchmark(tiny, PROMPT, new_tokens=16, warmup_tokens=0)
    assert result.measurement("off").generated_ids == SEED_PROMPT_IDS_16
    assert result.identical


@pytest.mark.parametrize("text", [PROMPT, "The KV cache trades memory for time.", "mixed 한국어 and English ✓\n\ttabs"])
def test_tokenizer_round_trips_korean_and_english(tiny, text):
    ids = tiny.tokenizer(text)["input_ids"]
    assert len(ids) == len(text.encode())  # one token per byte
    assert tiny.tokenizer.decode(ids) == text


def test_chat_template_is_exaone_style(tiny):
    encoded = encode_prompt(tiny, "hi", chat=True)
    text = tiny.tokenizer.decode(encoded["input_ids"][0])
    assert text == "[|user|]\nhi[|endofturn|]\n[|assistant|]\n<think>\n\n</think>\n\n"
    assert tiny.tokenizer.eos_token_id == EOS_ID == tiny.tokenizer.convert_tokens_to_ids("[|endofturn|]")


def test_built_once_and_cached(tiny):
    first = tiny_dir()
    assert (first / "model.safetensors").is_file()
    mtime = (first / "config.json").stat().st_mtime_ns
    assert tiny_dir() == first
    assert (first / "config.json").stat().st_mtime_ns == mtime


def test_cache_is_per_transformers_version():
    import transformers

    assert tiny_dir().name.endswith(f"-transformers-{transformers.__version__}")
