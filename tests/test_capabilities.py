"""Each capability against what the installed transformers really does, and an absent backend as a note."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch
import transformers
from transformers import AutoModelForCausalLM
from transformers.cache_utils import Cache
from transformers.generation import configuration_utils

from kvmagic import run_benchmark
from kvmagic.core.strategy import BACKENDS
from kvmagic.measure import capabilities
from kvmagic.measure.capabilities import static_cache_state
from kvmagic.measure.greedy import greedy_config
from kvmagic.measure.strategies import reset_static_cache_state, resolve
from kvmagic.model.tiny import tiny_dir
from kvmagic.runner.prompt import encode_prompt

from .conftest import PROMPT

COMPILE_5 = ["cuda", "xpu", "neuron", "tpu"]
# What each line's sources say, read by hand (transformers/cache_utils.py, generation/utils.py, modeling_utils.py).
FACTS = {
    "4.55.4": dict(
        quantized_backends={"quanto": "quanto", "hqq": "HQQ"}, dtype_keyword="torch_dtype",
        generate_takes_use_model_defaults=True, returned_cache_field="past_key_values", compile_devices=["cuda"],
        compile_needs_fullgraph=True, static_cache_state=["_cache"], static_cache_needs_fullgraph=True,
        dynamic_cache_windows=False, sliding_window_windows_every_layer=True, tensor_parallel_keyword="tp_plan",
    ),
    "5.17.0": dict(
        quantized_backends={"quanto": "quanto", "hqq": "hqq"}, dtype_keyword="dtype",
        generate_takes_use_model_defaults=False, returned_cache_field="past_key_values", compile_devices=COMPILE_5,
        compile_needs_fullgraph=False, static_cache_state=["_previous_max_cache_length"],
        static_cache_needs_fullgraph=False, dynamic_cache_windows=True, sliding_window_windows_every_layer=False,
    ),
    "5.24.0": dict(
        quantized_backends={"quanto": "quanto", "hqq": "hqq", "fp8": "fp8"}, dtype_keyword="dtype",
        generate_takes_use_model_defaults=False, returned_cache_field="cache", compile_devices=COMPILE_5,
        compile_needs_fullgraph=False, static_cache_state=["_previous_max_cache_length"],
        static_cache_needs_fullgraph=False, dynamic_cache_windows=True, sliding_window_windows_every_layer=False,
        tensor_parallel_keyword="distributed_config",
    ),
    "5.25.0": dict(  # compiles on mps too; FlashAttention falls back to a hub kernel (kernels is a dependency)
        quantized_backends={"quanto": "quanto", "hqq": "hqq", "fp8": "fp8"}, dtype_keyword="dtype",
        generate_takes_use_model_defaults=False, returned_cache_field="cache",
        compile_devices=["cuda", "xpu", "mps", "neuron", "tpu"], compile_needs_fullgraph=False,
        static_cache_state=["_previous_max_cache_length"], static_cache_needs_fullgraph=False,
        dynamic_cache_windows=True, sliding_window_windows_every_layer=False, tensor_parallel_keyword="distributed_config",
    ),
}  # fmt: skip


def _generate(tiny, **settings: object) -> object:
    config = greedy_config(tiny.model, tiny.tokenizer, 2, True)
    for key, value in settings.items():
        setattr(config, key, value)
    inputs = encode_prompt(tiny, PROMPT)
    with torch.inference_mode():
        return tiny.model.generate(**inputs, generation_config=config)


def test_the_answers_are_what_each_lines_sources_say() -> None:
    version = transformers.__version__
    if version not in FACTS:
        pytest.skip(f"no facts read by hand for transformers {version}; the behaviour tests below still run")
    found = capabilities.summary()
    assert {key: found[key] for key in FACTS[version]} == FACTS[version]


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_a_backend_is_accepted_exactly_when_generate_takes_it(tiny, backend: str) -> None:
    accepted = capabilities.quantized_backends()
    spelling = accepted.get(backend, BACKENDS[backend].spellings[0])
    settings = dict(cache_implementation="quantized", cache_config={"backend": spelling})
    if backend not in accepted:
        with pytest.raises((ValueError, KeyError)):  # 5.x: an unknown backend; 4.55: not in its mapping
            _generate(tiny, **settings)
        return
    with contextlib.suppress(ImportError):  # a known backend whose package this environment lacks (hqq)
        _generate(tiny, **settings)


def test_loading_takes_the_dtype_keyword_found() -> None:
    keyword = capabilities.dtype_keyword()
    model = AutoModelForCausalLM.from_pretrained(tiny_dir(), **{keyword: torch.float16})
    assert model.dtype == torch.float16
    if keyword == "torch_dtype":
        with pytest.raises(TypeError):
            AutoModelForCausalLM.from_pretrained(tiny_dir(), dtype=torch.float16)


def test_use_model_defaults_is_passed_only_where_generate_takes_it(tiny) -> None:
    config = greedy_config(tiny.model, tiny.tokenizer, 2, True)
    inputs = encode_prompt(tiny, PROMPT)
    with torch.inference_mode():
        if capabilities.generate_takes_use_model_defaults():
            tiny.model.generate(**inputs, generation_config=config, use_model_defaults=False)
        else:
            with pytest.raises(ValueError, match="use_model_defaults"):
                tiny.model.generate(**inputs, generation_config=config, use_model_defaults=False)


def test_the_returned_cache_is_in_the_field_found(tiny) -> None:
    output = _generate(tiny, return_dict_in_generate=True)
    assert isinstance(getattr(output, capabilities.returned_cache_field()), Cache)


def test_the_static_state_names_are_what_a_static_run_leaves_on_the_model(tiny) -> None:
    reset_static_cache_state(tiny.model)  # from an earlier test's static run on the shared model
    before = set(vars(tiny.model))
    _generate(tiny, cache_implementation="static")
    try:
        left = {name for name in set(vars(tiny.model)) - before if "cache" in name}
        assert left == set(static_cache_state())
    finally:
        reset_static_cache_state(tiny.model)
    assert not set(static_cache_state()) & set(vars(tiny.model))


def test_every_cache_implementation_found_is_one_the_config_accepts() -> None:
    for implementation in capabilities.cache_implementations():
        transformers.GenerationConfig(cache_implementation=implementation).validate()
    with pytest.raises(ValueError):
        transformers.GenerationConfig(cache_implementation="no_such_cache").validate()


def test_the_accelerator_functions_found_are_there() -> None:
    assert all(callable(getattr(torch.accelerator, name)) for name in capabilities.accelerator_functions())


class _FiveSeventeen:
    """transformers 5.17's QuantizedCache as far as a backend goes: quanto and hqq, nothing else."""

    def __init__(self, backend: str, config: object, **kwargs: object) -> None:
        if backend not in ("quanto", "hqq"):
            raise ValueError(f"Unknown quantization backend `{backend}`")


@pytest.fixture
def without_fp8(monkeypatch) -> Iterator[None]:
    monkeypatch.delattr(configuration_utils, "QUANT_BACKEND_CLASSES_MAPPING", raising=False)
    monkeypatch.setattr(transformers.cache_utils, "QuantizedCache", _FiveSeventeen)
    capabilities.quantized_backends.cache_clear()
    yield
    capabilities.quantized_backends.cache_clear()


def test_an_absent_backend_is_a_row_note_that_says_why(tiny, without_fp8) -> None:
    reason = f"transformers {transformers.__version__}'s quantized cache takes quanto, hqq: fp8 is not among them"
    assert capabilities.quantized_backend_reason("fp8") == reason
    assert resolve(tiny, "quantized:fp8").reason == reason
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, cache="dynamic,quantized:fp8")
    rows = {row["strategy"]: row for row in result.to_dataframe().to_dict("records")}
    assert rows["quantized:fp8"]["note"] == reason
    assert rows["dynamic"]["note"] == "" and rows["dynamic"]["identical"]


@pytest.mark.parametrize("name", list(capabilities.attention_implementations()))
def test_an_attention_loads_exactly_when_it_is_found_to_run(name: str) -> None:
    """Each implementation of the registry (and eager) against transformers loading tiny with it."""
    reason = capabilities.attention_implementations()[name]
    if reason:
        with pytest.raises((ImportError, ValueError)):
            AutoModelForCausalLM.from_pretrained(tiny_dir(), attn_implementation=name)
        return
    model = AutoModelForCausalLM.from_pretrained(tiny_dir(), attn_implementation=name)
    assert model.config._attn_implementation == name


@pytest.mark.parametrize(
    ("gpu", "cached", "answers", "runs"),
    [(False, True, True, False), (True, True, False, True), (True, False, True, True), (True, False, False, False)],
)
def test_a_hub_kernel_stands_in_for_flash_attention_only_on_a_gpu_where_it_can_be_had(
    monkeypatch, gpu: bool, cached: bool, answers: bool, runs: bool
) -> None:
    """transformers 5.25 asks for kernels-community/flash-attn2 where FlashAttention 2 is missing; on a CPU, or
    with the kernel neither cached nor downloadable, loading fails, so the registry must say it cannot run."""
    import huggingface_hub
    from transformers import modeling_flash_attention_utils as flash
    from transformers.utils import import_utils

    def snapshot(repo: str, local_files_only: bool) -> str:
        assert repo == "org/flash" and local_files_only
        if not cached:
            raise FileNotFoundError(repo)
        return "/cached"

    monkeypatch.setattr(flash, "FLASH_ATTN_KERNEL_FALLBACK", {"flash_attention_2": "org/flash"}, raising=False)
    monkeypatch.setattr(import_utils, "is_kernels_available", lambda: True)
    monkeypatch.setattr(import_utils, "is_flash_attn_2_available", lambda: False)
    monkeypatch.setattr(import_utils, "is_torch_npu_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(capabilities, "hub_reachable", lambda endpoint: answers)
    capabilities.attention_implementations.cache_clear()
    try:
        assert (capabilities.attention_implementations()["flash_attention_2"] == "") is runs
    finally:
        capabilities.attention_implementations.cache_clear()


def test_the_attention_registry_is_read_not_assumed() -> None:
    found = capabilities.attention_implementations()
    assert {"eager", "sdpa", "flash_attention_2"} <= set(found) and found["eager"] == found["sdpa"] == ""
    paged = {"4.55.4": "sdpa_paged", "5.24.0": "paged|eager", "5.25.0": "paged|eager"}.get(transformers.__version__)
    assert paged is None or paged in found
