"""The timed region and the generation settings, without needing an accelerator."""

from __future__ import annotations

import copy
import gc
import weakref

import pytest
import torch

from kvmagic.measure import timing
from kvmagic.measure.accelerator import synchronize
from kvmagic.measure.greedy import greedy_config
from kvmagic.measure.timing import timed_generate


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def __call__(self, kind: str):
        return lambda device=None: self.calls.append((kind, device))


@pytest.fixture
def fake_accelerators(monkeypatch):
    record = Recorder()
    monkeypatch.setattr(torch.cuda, "synchronize", record("cuda"))
    monkeypatch.setattr(torch.mps, "synchronize", record("mps"))
    if hasattr(torch, "xpu"):
        monkeypatch.setattr(torch.xpu, "synchronize", record("xpu"))
    return record


def test_synchronize_waits_on_every_accelerator_and_skips_the_cpu(fake_accelerators):
    devices = [torch.device("cpu"), torch.device("cuda", 0), torch.device("cuda", 1), torch.device("mps")]
    synchronize(devices)
    assert fake_accelerators.calls == [
        ("cuda", torch.device("cuda", 0)),
        ("cuda", torch.device("cuda", 1)),
        ("mps", None),
    ]


def test_timed_region_is_bounded_by_synchronizations(fake_accelerators, monkeypatch):
    events: list[str] = []
    clock = iter([10.0, 12.5])
    monkeypatch.setattr(timing, "perf_counter", lambda: events.append("clock") or next(clock))
    monkeypatch.setattr(timing, "synchronize", lambda devices: events.append(f"sync {list(devices)}"))

    class Model:
        def generate(self, **kwargs):
            events.append("generate")
            assert torch.is_inference_mode_enabled()
            assert kwargs["input_ids"] == "ids" and kwargs["generation_config"] == "config"
            return "output"

    devices = [torch.device("cuda", 0), torch.device("cuda", 1)]
    output, seconds = timed_generate(Model(), {"input_ids": "ids"}, "config", devices)
    assert (output, seconds) == ("output", 2.5)
    assert events == [f"sync {devices}", "clock", "generate", f"sync {devices}", "clock"]


def test_greedy_config_is_a_copy_without_sampling_settings(tiny):
    model_config = tiny.model.generation_config
    saved = copy.deepcopy(model_config.to_dict())
    model_config.temperature, model_config.top_p, model_config.do_sample = 0.6, 0.95, True
    try:
        config = greedy_config(tiny.model, tiny.tokenizer, 7, use_cache=False)
        assert (config.do_sample, config.num_beams, config.use_cache) == (False, 1, False)
        assert config.min_new_tokens == config.max_new_tokens == 7
        assert (config.temperature, config.top_p, config.top_k) == (1.0, 1.0, 50)
        assert config.pad_token_id == tiny.tokenizer.pad_token_id
        assert (model_config.temperature, model_config.top_p, model_config.do_sample) == (0.6, 0.95, True)
    finally:
        for key, value in saved.items():
            setattr(model_config, key, value)


def test_instruct_sampling_settings_do_not_leak_as_warnings(tiny, recwarn, caplog):
    from kvmagic import run_benchmark

    model_config = tiny.model.generation_config
    saved = copy.deepcopy(model_config.to_dict())
    model_config.temperature, model_config.top_p = 0.6, 0.95
    try:
        result = run_benchmark(tiny, "hi", new_tokens=2, warmup_tokens=0)
    finally:
        for key, value in saved.items():
            setattr(model_config, key, value)
    assert result.identical
    assert not [w for w in recwarn if "temperature" in str(w.message) or "top_p" in str(w.message)]
    assert "temperature" not in caplog.text and "top_p" not in caplog.text


class _Recorder:
    """A model whose generate notes whether the garbage collector was on, and may fail."""

    def __init__(self, error: BaseException | None = None, check=lambda: None) -> None:
        self.collector_on: list[bool] = []
        self.checked: list[object] = []
        self.error, self.check = error, check

    def generate(self, **kwargs):
        self.collector_on.append(gc.isenabled())
        self.checked.append(self.check())
        if self.error is not None:
            raise self.error
        return "output"


@pytest.fixture
def collector():
    """The collector's state is the test's to set; the session gets its own back afterwards."""
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_off_in_the_timed_region_and_restored_after(collector, enabled: bool) -> None:
    class Cycle:
        pass

    gc.disable()
    garbage = Cycle()
    garbage.me = garbage
    alive = weakref.ref(garbage)
    del garbage  # unreachable, and only a collection frees a cycle
    (gc.enable if enabled else gc.disable)()
    model = _Recorder(check=lambda: alive() is None)
    timed_generate(model, {"input_ids": "ids"}, "config", [])
    assert model.collector_on == [False]
    assert model.checked == [True]  # collected just before the region
    assert gc.isenabled() is enabled


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_comes_back_after_a_failed_run(collector, enabled: bool) -> None:
    (gc.enable if enabled else gc.disable)()
    model = _Recorder(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        timed_generate(model, {"input_ids": "ids"}, "config", [])
    assert model.collector_on == [False] and gc.isenabled() is enabled


def test_the_probe_hooks_find_the_devices_once(tiny, monkeypatch) -> None:
    """Walking every parameter for the device set in each hook would inflate generate's own cost G."""
    from kvmagic.addons.predict import costmodel_probe
    from kvmagic.addons.predict.costmodel import OVERHEAD_TOKENS
    from kvmagic.model.loading import LoadedModel
    from kvmagic.runner.prompt import encode_prompt

    walks: list[int] = []
    real = LoadedModel.devices

    def counted(self):
        walks.append(1)
        return real.fget(self)

    monkeypatch.setattr(LoadedModel, "devices", property(counted))
    config = greedy_config(tiny.model, tiny.tokenizer, OVERHEAD_TOKENS, use_cache=True)
    costmodel_probe._hooked_overhead(tiny, dict(encode_prompt(tiny, "hello")), config)
    assert len(walks) == 1
