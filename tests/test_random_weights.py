"""--random-weights: published shapes built offline from shipped, cached or local configs, with seeded weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kvmagic import load_model, run_benchmark
from kvmagic.addons.random_weights.random_build import SHIPPED, build, config_from_dict, seed_parameters, shipped_config
from kvmagic.errors import KVMagicError
from kvmagic.measure.capabilities import dtype_keyword
from kvmagic.measure.threads import torch_threads

from .conftest import said

ROOT = Path(__file__).resolve().parent.parent
SMOL = "HuggingFaceTB/SmolLM2-135M"
GEMMA = "google/gemma-3-270m"


def _shallow(name: str, layers: int) -> dict:
    """The shipped config with only its depth cut: every width, the vocabulary and RoPE stay as published."""
    data = shipped_config(name)
    assert data is not None
    data["num_hidden_layers"] = layers
    if "layer_types" in data:
        data["layer_types"] = data["layer_types"][:layers]
    return data


def _build(data: dict) -> torch.nn.Module:
    return build(config_from_dict(data), torch.device("cpu"), {dtype_keyword(): torch.float32})


@pytest.mark.parametrize("name", list(SHIPPED))
def test_each_shipped_config_builds_and_generates(name):
    data = _shallow(name, 2)
    model = _build(data)
    embeddings = model.get_input_embeddings().weight
    assert tuple(embeddings.shape) == (data["vocab_size"], data["hidden_size"])
    assert len(model.model.layers) == 2 and model.config.intermediate_size == data["intermediate_size"]
    tied = model.get_output_embeddings().weight.data_ptr() == embeddings.data_ptr()
    assert tied == data.get("tie_word_embeddings", True)  # Qwen1.5-0.5B alone unties them
    assert torch.isfinite(embeddings).all() and embeddings.std() > 0
    ids = torch.tensor([[1, 5, 9, 200, 7, 42]])
    settings = {"max_new_tokens": 3, "min_new_tokens": 3, "do_sample": False, "pad_token_id": 0}
    with torch.inference_mode():
        cached = model.generate(ids, use_cache=True, **settings)
        uncached = model.generate(ids, use_cache=False, **settings)
    assert cached.shape == (1, 9) and torch.equal(cached, uncached)
    del model


def test_published_shapes_as_shipped():
    exaone = shipped_config("LGAI-EXAONE/EXAONE-4.0-1.2B")
    assert exaone is not None
    published = {"hidden_size": 2048, "intermediate_size": 4096, "num_hidden_layers": 30, "head_dim": 64,
                 "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 102400,
                 "max_position_embeddings": 65536}  # fmt: skip
    assert {key: exaone[key] for key in published} == published
    assert exaone["layer_types"] == ["full_attention"] * 30 and exaone["tie_word_embeddings"] is True
    assert (exaone["bos_token_id"], exaone["eos_token_id"], exaone["pad_token_id"]) == (1, 361, 0)
    assert exaone["rope_theta"] == 1e6 and exaone["rope_scaling"]["rope_type"] == "llama3"
    rope = config_from_dict(exaone)
    theta = getattr(rope, "rope_theta", None) or rope.rope_parameters["rope_theta"]
    assert theta == 1e6  # read the same way by transformers 4.55 (rope_theta) and 5 (rope_parameters)


def test_the_contrasting_shapes_as_shipped():
    """Gemma 3 270M: five sliding-window layers to one full, one KV head; Qwen1.5-0.5B: a KV head per query head."""
    gemma, qwen = shipped_config(GEMMA), shipped_config("Qwen/Qwen1.5-0.5B")
    assert gemma is not None and qwen is not None
    published = {"hidden_size": 640, "intermediate_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 4,
                 "num_key_value_heads": 1, "head_dim": 256, "sliding_window": 512, "vocab_size": 262144,
                 "max_position_embeddings": 32768, "query_pre_attn_scalar": 256}  # fmt: skip
    assert {key: gemma[key] for key in published} == published
    assert gemma["layer_types"] == (["sliding_attention"] * 5 + ["full_attention"]) * 3
    config = config_from_dict(gemma)
    rope = getattr(config, "rope_parameters", None)  # 5.x: one per layer type; 4.55: two fields
    thetas = (rope["full_attention"]["rope_theta"], rope["sliding_attention"]["rope_theta"]) if rope else (
        config.rope_theta, config.rope_local_base_freq)  # fmt: skip
    assert thetas == (1e6, 1e4)
    assert (qwen["num_attention_heads"], qwen["num_key_value_heads"], qwen["hidden_size"]) == (16, 16, 1024)
    assert (qwen["num_hidden_layers"], qwen["intermediate_size"], qwen["vocab_size"]) == (24, 2816, 151936)


def test_a_sliding_window_shape_counts_its_cache_as_predicted(tmp_path):
    """Gemma 3 270M cut to one period of its layers (5 sliding, 1 full), its window to 16 and its vocabulary to
    512, so that 32 + 8 and 128 + 8 tokens pass the window on a CPU; 1 KV head of 256, float32: 2048 B a
    position and layer. transformers 5 keeps each sliding layer to its window (16 positions of storage after a
    step, and the window as an 8-byte tensor), 4.55 keeps every position."""
    from kvmagic import BenchmarkResult
    from kvmagic.measure.memory import sliding_keep

    from .test_cli import kvbench

    (tmp_path / "config.json").write_text(json.dumps({**_shallow(GEMMA, 6), "sliding_window": 16, "vocab_size": 512}))
    saved = tmp_path / "run.json"
    run = kvbench("-m", str(tmp_path), "--random-weights", "--device-map", "cpu", "-n", "8", "-p", "32,128",
                  "-w", "0", "-r", "1", "--wide", "--save", str(saved), "The KV cache")  # fmt: skip
    assert run.returncode == 0, run.stderr
    frame = BenchmarkResult.read_json(saved).to_dataframe()
    assert frame["identical"].tolist() == [True, True]
    counted = (frame["kv_cache_mib"] * 2**20).tolist()
    assert counted == (frame["kv_predicted_mib"] * 2**20).tolist()
    if sliding_keep().windowed:
        assert counted == [(5 * 16 + 39) * 2048 + 5 * 8, (5 * 16 + 135) * 2048 + 5 * 8]  # 243,752 and 440,360 B
    else:
        assert counted == [6 * 39 * 2048, 6 * 135 * 2048]  # 479,232 and 1,658,880 B
    assert "True" in run.stdout.splitlines()[1] and "True" in run.stdout.splitlines()[2]


def test_weights_are_seeded_by_name_whatever_the_thread_count():
    data = _shallow(SMOL, 1)
    with torch_threads(1):
        one = _build(data).state_dict()
    with torch_threads(2):
        two = _build(data)
    assert all(torch.equal(one[k], v) for k, v in two.state_dict().items())
    norms = [p for n, p in two.named_parameters() if p.dim() == 1]
    assert norms and all(torch.equal(p, torch.ones_like(p)) for p in norms)
    seed_parameters(two, seed=1)
    assert not torch.equal(two.get_input_embeddings().weight, one["model.embed_tokens.weight"])


def test_a_shipped_model_loads_offline_and_says_its_weights_are_random():
    loaded = load_model(SMOL, random_weights=True, device_map="cpu")
    assert loaded.random_weights and loaded.stand_in_tokenizer == "tiny"
    assert loaded.num_parameters == 134_515_008  # SmolLM2-135M's published size
    summary = loaded.summary()
    assert summary.startswith(f"{SMOL}: LlamaForCausalLM, 134.52 M parameters, float32 on cpu, RANDOM weights (real ")
    assert "tiny's tokenizer, built in " in summary
    result = run_benchmark(loaded, "hello", new_tokens=2, warmup_tokens=0)
    assert result.metadata["random_weights"] is True and result.metadata["model"] == SMOL
    assert result.identical and result.config.prompt_tokens == 5


def test_a_directory_gives_its_config_and_its_tokenizer(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(_shallow(SMOL, 1)))
    from transformers import AutoTokenizer

    from kvmagic.model.tiny import tiny_dir

    AutoTokenizer.from_pretrained(tiny_dir()).save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path), random_weights=True, device_map="cpu")
    assert len(loaded.model.model.layers) == 1 and loaded.stand_in_tokenizer is None
    assert "tokenizer" not in loaded.summary()


def test_a_name_with_no_config_at_hand_says_how_to_get_one():
    with pytest.raises(KVMagicError) as raised:
        load_model("no-such-org/no-such-model", random_weights=True)
    assert str(raised.value) == (
        "no config for 'no-such-org/no-such-model' in the local cache, and kvmagic ships configs only for "
        f"{', '.join(SHIPPED)}: download its config once (`hf download no-such-org/no-such-model config.json`), "
        "or pass a directory that holds its config.json"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "tiny"}, "tiny already has seeded random weights: drop random_weights"),
        ({"name": SMOL, "gguf_file": "model.gguf"},
         "random_weights builds from a config, not from gguf_file: drop one of them"),
        ({"name": SMOL, "device_map": "balanced"},
         "random weights are built on one device, not spread by device_map 'balanced': use auto, cpu or cuda:0"),
    ],
)  # fmt: skip
def test_misuse_is_one_line(kwargs, message):
    with pytest.raises(KVMagicError) as raised:
        load_model(random_weights=True, **kwargs)
    assert str(raised.value) == message


def test_a_config_in_the_hub_cache_wins_over_the_shipped_one(tmp_path):
    snapshot = tmp_path / "models--HuggingFaceTB--SmolLM2-135M" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(_shallow(SMOL, 1)))
    (tmp_path / "models--HuggingFaceTB--SmolLM2-135M" / "refs").mkdir()
    (tmp_path / "models--HuggingFaceTB--SmolLM2-135M" / "refs" / "main").write_text("0" * 40)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    code = "import kvmagic; m = kvmagic.load_model(%r, random_weights=True); print(m.model.config.num_hidden_layers)"
    run = subprocess.run([sys.executable, "-c", code % SMOL], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1"]


def test_the_magic_takes_the_flag(shell, capsys):
    shell.run_line_magic("kvload", f"{SMOL} --random-weights --device-map cpu")
    out = capsys.readouterr().out
    assert out.startswith(f"{SMOL}: LlamaForCausalLM, 134.52 M parameters, float32 on cpu, RANDOM")
    # The summary of about 170 characters, wrapped at word boundaries: a terminal broke it mid-word at 100 columns.
    summary = shell.magics_manager.registry["KVMagics"].loaded.summary()
    assert len(summary) > 100 and said(out.strip()) == summary
    assert all(len(line) <= 100 for line in out.splitlines()) and out.count("\n  ") == len(out.splitlines()) - 1


def test_the_command_wraps_the_summary_too():
    from .test_cli import kvbench

    run = kvbench("-m", SMOL, "--random-weights", "--device-map", "cpu", "-n", "1", "-w", "0", "hi")
    assert run.returncode == 0, run.stderr
    assert f"{SMOL}: LlamaForCausalLM, 134.52 M parameters, float32 on cpu, RANDOM" in run.stderr
    assert all(len(line) <= 100 for line in run.stderr.splitlines()), run.stderr


def test_a_config_alone_gets_tinys_tokenizer_not_one_built_from_the_config(tmp_path):
    """transformers 5 builds Gemma 3's tokenizer from its config alone: 5 special tokens, every prompt unknown.
    Where that is all there is, tiny's byte-level tokenizer stands in, as where no tokenizer builds at all."""
    from kvmagic.addons.random_weights.random_build import LEAST_VOCABULARY, find_tokenizer

    (tmp_path / "config.json").write_text(json.dumps(_shallow(GEMMA, 6)))
    tokenizer, stand_in = find_tokenizer(str(tmp_path), config_from_dict(_shallow(GEMMA, 6)))
    assert stand_in == "tiny" and len(tokenizer) >= LEAST_VOCABULARY
    assert len(tokenizer("The KV cache")["input_ids"]) > 3  # bytes, not one unknown token
