"""The measuring side of the limits and the frontier, on the tiny model: shape, probes, counted tensors, a fit check."""

from __future__ import annotations

import pytest
import torch

from kvmagic.addons.frontier.cache_layout import kv_bytes, layout
from kvmagic.addons.frontier.frontier_probe import check_fit, free_bytes, measure_activations
from kvmagic.addons.limits import limits_probe
from kvmagic.measure.greedy import greedy_config
from kvmagic.measure.memory import cache_nbytes, kv_sizes
from kvmagic.measure.shape_probe import model_shape
from kvmagic.measure.strategies import reset_static_cache_state, resolve
from kvmagic.measure.tensors import LiveTensors, track_tensors


def test_the_shape_of_tiny_from_its_config_and_weights(tiny) -> None:
    shape = model_shape(tiny.model)
    assert (shape.layers, shape.hidden, shape.intermediate, shape.heads, shape.kv_heads, shape.head_dim) == (
        4, 256, 1024, 8, 2, 32,
    )  # fmt: skip
    assert (shape.vocab, shape.dtype_bytes, shape.mlp_matrices, shape.max_positions) == (264, 4, 3, 2048)
    assert shape.tied_embeddings and shape.weight_bytes == 4 * tiny.num_parameters
    assert shape.windows == (None,) * 4
    for positions in (1, 97, 2048):
        assert shape.kv_bytes_per_position * shape.positions(positions) == kv_sizes(
            tiny.model.config, tiny.dtype
        ).held_bytes(positions)


@pytest.mark.parametrize("name", ["dynamic", "static", "quantized:quanto"])
def test_predicted_cache_bytes_match_the_cache_generate_returns(tiny, name: str) -> None:
    if name == "quantized:quanto":
        pytest.importorskip("optimum.quanto")
    shape, prompt, new = model_shape(tiny.model), 40, 30  # 29 decoded tokens: all still in the quantized residual
    config = greedy_config(tiny.model, tiny.tokenizer, new, use_cache=True)
    for key, value in resolve(tiny, name).settings.items():
        setattr(config, key, value)
    config.return_dict_in_generate = True
    ids = torch.arange(3, 3 + prompt).unsqueeze(0)
    reset_static_cache_state(tiny.model)  # an earlier test's longer static run must not size this one
    with torch.inference_mode():
        output = tiny.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config)
    counted = cache_nbytes(getattr(output, "cache", None) or output.past_key_values)
    predicted = kv_bytes(shape, layout(name), prompt + new - 1, prompt_tokens=prompt)
    assert 0 <= counted - predicted <= 64  # transformers 5's static cache keeps a few bytes of position counters


def test_live_tensors_count_each_storage_until_its_last_view_goes() -> None:
    with track_tensors() as live:
        whole = torch.empty(1000, dtype=torch.float32)
        view = whole[:10]
        assert live.live_bytes == 4000
        del whole
        assert live.live_bytes == 4000  # the view keeps the storage
        del view
        assert live.live_bytes == 0
        torch.empty(250, dtype=torch.float64)  # created and dropped at once
    assert live.peak_bytes == 4000 and live.live_bytes == 0
    held = torch.empty(100, dtype=torch.float32)
    live = LiveTensors([held])
    with live:
        grown = torch.cat([held, torch.empty(25)])  # a cache grown by concatenation: 400 + 100 + 500 at most
        del held  # the shorter one released
        assert live.live_bytes == 500
    assert live.peak_bytes == 100 + 500 and grown.numel() == 125


def test_the_hardware_probe_measures_once_per_device_and_dtype(monkeypatch) -> None:
    monkeypatch.setitem(limits_probe.COPY_BYTES, "cpu", 16 << 20)
    monkeypatch.setattr(limits_probe, "_bandwidths", {})
    monkeypatch.setattr(limits_probe, "_throughputs", {})
    first = limits_probe.measure_hardware(torch.device("cpu"), torch.float32, 64)
    assert first.bandwidth_bytes_s > 0 and first.flops_s > 0 and (first.device, first.dtype) == ("cpu", "float32")

    def refuse(*_: object) -> float:
        raise AssertionError("probed twice")

    monkeypatch.setattr(limits_probe, "copy_bandwidth", refuse)
    monkeypatch.setattr(limits_probe, "matmul_throughput", refuse)
    again = limits_probe.measure_hardware(torch.device("cpu"), torch.float32, 64)
    assert (again.bandwidth_bytes_s, again.flops_s) == (first.bandwidth_bytes_s, first.flops_s)


def test_free_memory_is_the_budget_when_one_is_imposed(tiny) -> None:
    assert free_bytes(tiny.devices, budget=123) == 123.0
    assert free_bytes(tiny.devices) > 0


def test_activations_and_a_fit_check_on_tiny(tiny) -> None:
    ids = torch.arange(3, 67).unsqueeze(0)
    activations = measure_activations(tiny, ids, lengths=(32, 128))
    assert min(vars(activations).values()) >= 0
    shape, cache = model_shape(tiny.model), layout("dynamic")
    check = check_fit(tiny, resolve(tiny, "dynamic"), ids[:, :16], 16, budget_bytes=1e9, predicted_bytes=1.0)
    assert (check.prompt_tokens, check.new_tokens, check.batch, check.fitted) == (16, 16, 1, True)
    assert check.tensor_bytes >= kv_bytes(shape, cache, 31)  # the cache at least
