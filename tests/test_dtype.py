"""``--dtype auto``: float16 only where the weights compute on CUDA, read from the device map."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kvmagic.errors import KVMagicError
from kvmagic.measure.capabilities import dtype_keyword
from kvmagic.model.loading import load_model, resolve_dtype


@pytest.fixture
def cuda_present(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


@pytest.mark.parametrize(
    ("device_map", "expected"),
    [
        ("auto", torch.float16),
        ("balanced", torch.float16),
        ("sequential", torch.float16),
        ("cuda", torch.float16),
        ("cuda:1", torch.float16),
        (torch.device("cuda", 0), torch.float16),
        ({"": 0}, torch.float16),
        ({"model": "cuda:0", "lm_head": "cpu"}, torch.float16),  # accelerate streams the CPU part into the GPU
        ("cpu", torch.float32),
        ("mps", torch.float32),
        (None, torch.float32),  # from_pretrained without a map loads on the CPU
        ({"": "cpu"}, torch.float32),
        ({"model": "cpu", "lm_head": "disk"}, torch.float32),
    ],
    ids=str,
)
def test_auto_follows_where_the_weights_go(cuda_present, device_map: Any, expected: torch.dtype) -> None:
    assert resolve_dtype("auto", device_map) == expected


@pytest.mark.parametrize("device_map", ["auto", "cuda", {"": 0}, None])
def test_without_cuda_auto_is_float32(monkeypatch, device_map: Any) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_dtype("auto", device_map) == torch.float32


def test_an_explicit_dtype_is_kept(cuda_present) -> None:
    assert resolve_dtype("bfloat16", "cpu") == torch.bfloat16
    assert resolve_dtype("float32", "auto") == torch.float32


def test_load_model_with_a_cpu_map_on_a_cuda_machine_loads_float32(cuda_present, monkeypatch) -> None:
    from transformers import AutoModelForCausalLM

    asked: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def record(source: Any, **kwargs: Any) -> None:
        asked.update(kwargs)
        raise Stop

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", record)
    with pytest.raises(KVMagicError):
        load_model("tiny", device_map="cpu")
    assert asked[dtype_keyword()] == torch.float32 and asked["device_map"] == "cpu"


@pytest.mark.gpu
def test_on_a_gpu_auto_is_float16_on_cuda_and_float32_on_the_cpu() -> None:
    on_gpu = load_model("tiny")
    assert on_gpu.dtype == torch.float16 and {d.type for d in on_gpu.devices} == {"cuda"}
    on_cpu = load_model("tiny", device_map="cpu")
    assert on_cpu.dtype == torch.float32 and {d.type for d in on_cpu.devices} == {"cpu"}
