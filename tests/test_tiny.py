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


def test_building_and_loading_print_no_progress_bar(shell, tmp_path, monkeypatch, capfd):
    """transformers drew "Writing model shards" when tiny was built and "Loading weights" on every load."""
    monkeypatch.setenv("KVMAGIC_CACHE", str(tmp_path))
    shell.run_line_magic("kvload", "tiny")
    assert tiny_dir().parent == tmp_path  # built here, then loaded
    shell.run_line_magic("kvload", "tiny")
    out, err = capfd.readouterr()
    assert out.count("tiny: Exaone4ForCausalLM") == 2
    assert "Writing" not in err and "Loading" not in err and "it/s]" not in err and "%|" not in err, err


@pytest.mark.parametrize(("bars", "downloads"), [(True, True), (True, False), (False, True), (False, False)])
def test_the_users_progress_bar_settings_come_back(bars, downloads):
    """Off while kvmagic loads, as the user had them after, failed or not; the Hub's download bars untouched."""
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging

    from kvmagic import KVMagicError, load_model

    kept = (logging.is_progress_bar_enabled(), not are_progress_bars_disabled())
    seen = []

    def look(fail: bool = False) -> None:
        seen.append((logging.is_progress_bar_enabled(), not are_progress_bars_disabled()))
        if fail:
            raise RuntimeError("the disk is full")

    try:
        (logging.enable_progress_bar if bars else logging.disable_progress_bar)()
        (enable_progress_bars if downloads else disable_progress_bars)()
        load_model("tiny", before_weights=look)
        with pytest.raises(KVMagicError, match="the disk is full"):
            load_model("tiny", before_weights=lambda: look(fail=True))
        assert (logging.is_progress_bar_enabled(), not are_progress_bars_disabled()) == (bars, downloads)
    finally:
        (logging.enable_progress_bar if kept[0] else logging.disable_progress_bar)()
        (enable_progress_bars if kept[1] else disable_progress_bars)()
    assert seen == [(False, downloads)] * 2
