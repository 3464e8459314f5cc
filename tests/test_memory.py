"""KV bytes counted from the cache object against bytes predicted from the config; peak memory."""

from __future__ import annotations

import mmap
import time

import pytest
import torch
import transformers

from kvmagic.measure import capabilities
from kvmagic.measure.accelerator import PeakMemory, track_peak
from kvmagic.measure.capabilities import dynamic_cache_windows
from kvmagic.measure.greedy import greedy_config
from kvmagic.measure.memory import cache_nbytes, predicted_kv_nbytes
from kvmagic.measure.timing import profiled_generate
from kvmagic.results.report import MIB
from kvmagic.runner.prompt import encode_prompt

from .conftest import PROMPT


def _cached_run(tiny, new_tokens: int, **config: object):
    inputs = encode_prompt(tiny, PROMPT)
    generation_config = greedy_config(tiny.model, tiny.tokenizer, new_tokens, True)
    for key, value in config.items():
        setattr(generation_config, key, value)
    return inputs["input_ids"].shape[-1], profiled_generate(tiny.model, inputs, generation_config, tiny.devices)


def test_dynamic_cache_bytes_equal_the_prediction_exactly(tiny) -> None:
    prompt_tokens, run = _cached_run(tiny, 6)
    # tiny: 4 layers x (keys + values) x 2 KV heads x head_dim 32 x 4 bytes, for every position but the last.
    hand = 4 * 2 * 2 * 32 * 4 * (prompt_tokens + 6 - 1)
    assert predicted_kv_nbytes(tiny.model.config, prompt_tokens + 6 - 1, torch.float32) == hand
    assert cache_nbytes(run.cache) == hand


def test_static_cache_counts_its_preallocated_length(tiny) -> None:
    _, run = _cached_run(tiny, 3, cache_implementation="static")
    length = run.cache.layers[0].max_cache_len
    predicted = predicted_kv_nbytes(tiny.model.config, length, torch.float32)
    # transformers 5 keeps one small position counter per layer beside the preallocated tensors.
    assert 0 <= cache_nbytes(run.cache) - predicted <= 8 * len(run.cache.layers)


@pytest.mark.skipif(
    "fp8" not in capabilities.quantized_backends(),
    reason="this transformers' quantized cache has no fp8 backend (quanto's count is tested in test_strategies)",
)
def test_quantized_cache_is_counted_where_it_keeps_its_data(tiny) -> None:
    prompt_tokens, run = _cached_run(tiny, 40, cache_implementation="quantized", cache_config={"backend": "fp8"})
    visible = sum(t.nbytes for layer in run.cache.layers for t in (layer.keys, layer.values))
    counted = cache_nbytes(run.cache)
    assert visible < counted < predicted_kv_nbytes(tiny.model.config, prompt_tokens + 39, torch.float32)


def test_views_count_their_storage_once() -> None:
    class Holder:
        __slots__ = ("extra", "pair")

        def __init__(self, base: torch.Tensor) -> None:
            self.pair = [base, base[:, :2]]  # a view: same storage
            self.extra = {"module": torch.nn.Linear(64, 64), "twin": base}

    base = torch.zeros(4, 8)
    assert cache_nbytes(Holder(base)) == 4 * 8 * 4
    assert cache_nbytes([base[1:3]]) == 4 * 8 * 4  # the whole storage stays allocated


def test_prediction_counts_sliding_layers_at_their_window() -> None:
    config = transformers.Exaone4Config(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=4,
        sliding_window=16, layer_types=["sliding_attention"] * 3 + ["full_attention"],
    )  # fmt: skip
    head_dim = 64 // 4
    assert predicted_kv_nbytes(config, 100, torch.float16) == 2 * 2 * head_dim * 2 * (3 * 16 + 100)
    assert predicted_kv_nbytes(config, 10, torch.float16) == 2 * 2 * head_dim * 2 * (4 * 10)


def _hold_until_seen(tracker: PeakMemory, size: int, baseline: int) -> None:
    # A fresh anonymous mapping, every page written: new resident memory whatever the allocator
    # already holds (torch.ones could reuse freed, still-resident heap pages and add nothing).
    block = mmap.mmap(-1, size)
    for offset in range(0, size, mmap.PAGESIZE):
        block[offset] = 1
    deadline = time.monotonic() + 10
    while tracker.sample and tracker.rss_peak_bytes < baseline + size * 7 // 8 and time.monotonic() < deadline:
        time.sleep(0.005)
    block.close()


@pytest.mark.parametrize("sample", [True, False], ids=["sampled", "kernel"])
def test_peak_memory_sees_a_short_lived_allocation(sample: bool) -> None:
    import psutil

    if not sample and PeakMemory([]).sample:
        pytest.skip("this kernel does not let a process reset its peak RSS")
    baseline = psutil.Process().memory_info().rss
    with track_peak([torch.device("cpu")], sample=sample) as peak:
        _hold_until_seen(peak, 64 * MIB, baseline)
    assert peak.peak_bytes >= baseline + 56 * MIB  # other threads may free a little meanwhile
    assert psutil.Process().memory_info().rss < peak.peak_bytes


@pytest.mark.gpu
def test_cuda_peak_is_the_allocator_peak() -> None:
    device = torch.device("cuda")
    before = torch.cuda.memory_allocated(device)
    with track_peak([device]) as peak:
        block = torch.empty(64 * MIB, dtype=torch.uint8, device=device)
        del block
    assert peak.peak_bytes >= before + 64 * MIB
    assert peak.source == "cuda allocator"


def test_sliding_layers_against_what_each_transformers_line_keeps() -> None:
    from transformers import Exaone4Config, Exaone4ForCausalLM, GenerationConfig

    config = Exaone4Config(
        vocab_size=300, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
        num_hidden_layers=4, sliding_window=8, layer_types=["sliding_attention"] * 3 + ["full_attention"],
        pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Exaone4ForCausalLM(config).eval()
    ids = torch.randint(10, 300, (1, 20))
    generation_config = GenerationConfig(
        do_sample=False, min_new_tokens=10, max_new_tokens=10, use_cache=True, pad_token_id=0, eos_token_id=2
    )
    run = profiled_generate(model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, generation_config, [])
    counted, positions = cache_nbytes(run.cache), 20 + 10 - 1
    if dynamic_cache_windows():  # sliding layers keep their window (plus one position counter each)
        predicted = predicted_kv_nbytes(config, positions, torch.float32)
        assert 0 <= counted - predicted <= 8 * 3
    else:  # 4.55's dynamic cache keeps every layer whole
        assert counted == 4 * 2 * 2 * 16 * 4 * positions
