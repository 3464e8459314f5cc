"""KV bytes counted from the cache object against bytes predicted from the config; peak memory."""

from __future__ import annotations

import mmap
import time

import pytest
import torch
import transformers

from kvmagic.core.kvbytes import SlidingKeep
from kvmagic.measure import capabilities
from kvmagic.measure.accelerator import PeakMemory, track_peak
from kvmagic.measure.greedy import greedy_config
from kvmagic.measure.memory import cache_nbytes, kv_sizes, sliding_keep
from kvmagic.measure.timing import profiled_generate
from kvmagic.results.rows import MIB
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
    assert kv_sizes(tiny.model.config, torch.float32).after(prompt_tokens, 6) == hand
    assert cache_nbytes(run.cache) == hand


def test_static_cache_counts_its_preallocated_length(tiny) -> None:
    _, run = _cached_run(tiny, 3, cache_implementation="static")
    length = run.cache.layers[0].max_cache_len
    predicted = kv_sizes(tiny.model.config, torch.float32).held_bytes(length)
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
    assert visible < counted < kv_sizes(tiny.model.config, torch.float32).after(prompt_tokens, 40)


def test_views_count_their_storage_once() -> None:
    class Holder:
        __slots__ = ("extra", "pair")

        def __init__(self, base: torch.Tensor) -> None:
            self.pair = [base, base[:, :2]]  # a view: same storage
            self.extra = {"module": torch.nn.Linear(64, 64), "twin": base}

    base = torch.zeros(4, 8)
    assert cache_nbytes(Holder(base)) == 4 * 8 * 4
    assert cache_nbytes([base[1:3]]) == 4 * 8 * 4  # the whole storage stays allocated


def test_the_sizes_read_each_layers_window_and_what_this_line_keeps() -> None:
    config = transformers.Exaone4Config(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=4,
        sliding_window=16, layer_types=["sliding_attention"] * 3 + ["full_attention"],
    )  # fmt: skip
    sizes = kv_sizes(config, torch.float16)
    assert (sizes.position_bytes, sizes.windows, sizes.keep) == (2 * 2 * 16 * 2, (16, 16, 16, None), sliding_keep())
    full = kv_sizes(transformers.Exaone4Config(num_hidden_layers=2, layer_types=["full_attention"] * 2), torch.float16)
    assert full.windows == (None, None) and full.keep == SlidingKeep()  # nothing slides: nothing to probe


def test_the_probe_finds_what_each_line_keeps_of_a_sliding_layer() -> None:
    """Read from each line's cache_utils.py: 5.x's DynamicSlidingWindowLayer keeps the last w - 1 positions as
    a slice of the concatenation it attended over, and its window as an int64 tensor; 4.55 keeps everything."""
    found = sliding_keep()
    if "DynamicSlidingWindowLayer" in dir(transformers.cache_utils):
        assert found == SlidingKeep(windowed=True, kept=-1, view=True, fixed_bytes=8)
    else:
        assert found == SlidingKeep()


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


def _sliding_run(config, prompt_tokens: int, new_tokens: int):
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    ids = torch.randint(10, config.vocab_size, (1, prompt_tokens))
    settings = dict(do_sample=False, min_new_tokens=new_tokens, max_new_tokens=new_tokens, pad_token_id=0)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    cached = profiled_generate(model, inputs, transformers.GenerationConfig(use_cache=True, **settings), [])
    uncached = profiled_generate(model, inputs, transformers.GenerationConfig(use_cache=False, **settings), [])
    return cached, uncached


@pytest.mark.parametrize("new_tokens", [1, 2, 8])
def test_a_hybrid_models_cache_is_predicted_exactly_on_each_line(new_tokens: int) -> None:
    """Gemma 3's layout cut down: 5 sliding layers of window 16, then 1 full, 1 KV head of 16 wide, float32."""
    config = transformers.Gemma3TextConfig(
        vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=6, num_attention_heads=4,
        num_key_value_heads=1, head_dim=16, sliding_window=16,
        layer_types=["sliding_attention"] * 5 + ["full_attention"],
    )  # fmt: skip
    cached, uncached = _sliding_run(config, 64, new_tokens)
    assert torch.equal(cached.output, uncached.output)
    counted = cache_nbytes(cached.cache)
    assert counted == kv_sizes(config, torch.float32).after(64, new_tokens)
    position, end = 2 * 16 * 4, 64 + new_tokens - 1
    if not sliding_keep().windowed:  # 4.55: every layer whole
        assert counted == 6 * end * position  # 54,528 B at 64 + 8
    elif new_tokens == 1:  # 5.x after the prefill alone: the window is a slice of the whole prompt's keys
        assert counted == 6 * 64 * position + 5 * 8
    else:  # 5.x: the 15 kept, a slice of the 16 the last step attended over, and the window as an int64
        assert counted == (5 * 16 + end) * position + 5 * 8  # 19,368 B at 64 + 8
