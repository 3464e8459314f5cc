"""What the installed transformers and torch can do, and how they spell what they take and return, found by
asking them, never by reading version numbers.

Features move between releases that share a major version: the fp8 quantized cache is in transformers 5.24 and
not in 5.17. Keywords and fields move too: ``dtype`` replaced ``torch_dtype`` in 4.56, and the cache ``generate``
returns moved from ``past_key_values`` to ``cache`` within 5.x. So each answer here comes from the installed
code itself: a class that accepts or refuses an argument, a decision function asked about a made-up model, a
signature or a field. Each is worked out once per process (``functools.cache``); a test that fakes a library
clears the one it fakes (``quantized_backends.cache_clear()``).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import inspect
import os
import re
import threading
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kvmagic.core.strategy import BACKENDS
from kvmagic.errors import clipped
from kvmagic.measure.memory import sliding_keep

__all__ = [
    "CompileCriteria", "accelerator_functions", "attention_implementations",
    "cache_implementations", "cache_keyword", "compile_criteria",
    "device_available", "dtype_keyword", "dynamic_cache_windows", "generate_takes_use_model_defaults", "hub_reachable",
    "press_reason",
    "quantized_backend_reason", "quantized_backends", "returned_cache_field",
    "sliding_window_windows_every_layer", "static_cache_needs_fullgraph", "static_cache_state", "summary",
    "tensor_parallel_keyword", "transformers_version",
]  # fmt: skip

PROBE_SECONDS = 2.0  # a Hub that answers takes well under a second; an unreachable one costs this, once
_DEVICE_KINDS = ("cuda", "xpu", "mps", "npu", "hpu", "neuron", "tpu", "cpu")
_STATE_PATTERN = re.compile(r"self\.(_\w*cache\w*)\s*[:=][^=]")  # an attribute generate keeps on the model


@dataclass(frozen=True)
class CompileCriteria:
    """What transformers' own ``_valid_auto_compile_criteria`` asks before it compiles ``generate``."""

    devices: tuple[str, ...]  # the device types it compiles on by itself
    needs_fullgraph: bool  # whether the model must also declare ``_can_compile_fullgraph``


def transformers_version() -> str:
    """For messages only: no answer here is decided by it."""
    return importlib.metadata.version("transformers")


@functools.cache
def quantized_backends() -> Mapping[str, str]:
    """Each backend the installed quantized cache accepts, as users write it -> as transformers spells it.

    transformers 4.x looks the backend up in a mapping beside the generation config; 5.x hands it to
    ``QuantizedCache``, which refuses an unknown one before it builds anything (a known backend whose
    package is missing gets past that check and fails on the import instead).
    """
    from transformers.generation import configuration_utils

    mapping = getattr(configuration_utils, "QUANT_BACKEND_CLASSES_MAPPING", None)
    accepted = (lambda spelling: spelling in mapping) if mapping else _quantized_cache_accepts
    found = {}
    for backend in BACKENDS.values():
        spelling = next((s for s in backend.spellings if accepted(s)), None)
        if spelling is not None:
            found[backend.name] = spelling
    return types.MappingProxyType(found)


def _quantized_cache_accepts(backend: str) -> bool:
    from transformers.cache_utils import QuantizedCache

    try:
        QuantizedCache(backend=backend, config=_probe_config())
    except ValueError as error:
        return "unknown" not in str(error).lower()
    except ImportError:
        return True
    return True


def quantized_backend_reason(backend: str) -> str:
    """Why ``backend`` cannot run under the installed transformers; empty when it can."""
    accepted = quantized_backends()
    if backend in accepted:
        return ""
    takes = ", ".join(accepted) or "no backend"
    return f"transformers {transformers_version()}'s quantized cache takes {takes}: {backend} is not among them"


@functools.cache
def accelerator_functions() -> frozenset[str]:
    """Which of the device-neutral memory functions ``torch.accelerator`` has (torch 2.6 has the module, not all)."""
    import torch

    accelerator = getattr(torch, "accelerator", None)
    wanted = ("current_accelerator", "is_available", "reset_peak_memory_stats", "max_memory_allocated", "empty_cache")
    return frozenset(name for name in wanted if hasattr(accelerator, name))


@functools.cache
def cache_implementations() -> tuple[str, ...]:
    """Every ``cache_implementation`` the installed generation config accepts."""
    from transformers.generation.configuration_utils import ALL_CACHE_IMPLEMENTATIONS

    return tuple(ALL_CACHE_IMPLEMENTATIONS)


@functools.cache
def attention_implementations() -> Mapping[str, str]:
    """Each attention implementation the installed transformers has -> why it cannot run here, empty when it can.

    They are eager and its registry's, whose names move between releases (4.55 has ``sdpa_paged``, 5.x
    ``paged|eager`` and ``flash_attention_4``). FlashAttention N runs where transformers' own
    ``is_flash_attn_N_available`` says so, on an Ascend NPU, or where a hub kernel stands in for it.
    """
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.utils import import_utils as utils

    found = {"eager": ""}
    for name in ALL_ATTENTION_FUNCTIONS.valid_keys():
        flash = re.search(r"(?:^|\|)(flash_attention_(\d+))$", name)  # alone, or wrapped: paged|flash_attention_2
        if flash is None:
            found[name] = ""
            continue
        available = getattr(utils, f"is_flash_attn_{flash[2]}_available", None)
        runs = available is None or available() or utils.is_torch_npu_available() or _flash_kernel_fallback(flash[1])
        found[name] = "" if runs else f"needs FlashAttention {flash[2]} installed and a CUDA GPU"
    return types.MappingProxyType(found)


def _flash_kernel_fallback(name: str) -> bool:
    """Whether transformers runs FlashAttention ``name`` from a hub kernel where the package is missing: 5.x keeps
    a table of them, used once the kernels package is installed (a dependency from 5.25 on); 4.55 has none. The
    kernel is built for GPUs and fetched from the Hub, so it runs only on a GPU torch sees, and only where its
    files are in the local cache or the Hub answers."""
    from transformers import modeling_flash_attention_utils as flash
    from transformers.utils import import_utils

    repo = (getattr(flash, "FLASH_ATTN_KERNEL_FALLBACK", None) or {}).get(name)
    if repo is None or not import_utils.is_kernels_available() or not any(map(device_available, ("cuda", "xpu"))):
        return False
    from huggingface_hub import constants, snapshot_download

    try:
        snapshot_download(repo, local_files_only=True)
    except Exception:
        return not constants.HF_HUB_OFFLINE and hub_reachable(constants.ENDPOINT)
    return True


def device_available(kind: str) -> bool:
    """Whether torch has a device of ``kind`` (cuda, xpu, mps...) here."""
    import torch

    if kind == "mps":
        return torch.backends.mps.is_available()
    backend = getattr(torch, kind, None)
    return bool(backend is not None and getattr(backend, "is_available", lambda: False)())


def hub_reachable(endpoint: str) -> bool:
    """Whether the Hub at ``endpoint`` (``HF_ENDPOINT``, else huggingface.co) answers an HTTP request within
    :data:`PROBE_SECONDS`, whatever it answers. A name that does not resolve or a server that never replies
    costs at most that long: the probe runs aside, and is left behind if late."""
    answered: list[bool] = []
    probe = threading.Thread(target=_ask, args=(endpoint, answered), daemon=True)
    probe.start()
    probe.join(PROBE_SECONDS)
    return answered == [True]


def _ask(endpoint: str, answered: list[bool]) -> None:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(endpoint, method="HEAD")
    try:
        urllib.request.urlopen(request, timeout=PROBE_SECONDS).close()
    except urllib.error.HTTPError:
        pass  # a status, even an error's, is an answer
    except (OSError, ValueError):
        return
    answered.append(True)


@functools.cache
def compile_criteria() -> CompileCriteria:
    """transformers' compile decision asked about a made-up model on each device type, with a compileable cache."""
    from transformers import GenerationConfig, GenerationMixin
    from transformers.cache_utils import Cache

    class _Compileable(Cache):
        is_compileable = True

    cache = _Compileable.__new__(_Compileable)
    config = GenerationConfig()
    config.disable_compile = False
    kept = os.environ.get("TOKENIZERS_PARALLELISM")  # transformers sets it when it decides to compile
    probed = _probe_config(attn_implementation="sdpa")  # 5.2 asks whether the model's attention is flash

    def decides(kind: str, fullgraph: bool = True) -> bool:
        model = types.SimpleNamespace(
            device=types.SimpleNamespace(type=kind), _can_compile_fullgraph=fullgraph, config=probed
        )
        kwargs = {"cache": cache, "past_key_values": cache}  # 5.24 reads the first, 4.55 and 5.17 the second
        return bool(GenerationMixin._valid_auto_compile_criteria(model, kwargs, config))  # type: ignore[arg-type]

    try:
        devices = tuple(kind for kind in _DEVICE_KINDS if decides(kind))
        needs_fullgraph = bool(devices) and not decides(devices[0], fullgraph=False)
    finally:
        if kept is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = kept
    return CompileCriteria(devices, needs_fullgraph)


@functools.cache
def static_cache_state() -> tuple[str, ...]:
    """The attributes ``generate`` keeps on the model between calls about its static cache, read from its source.

    4.55 keeps the cache itself (``_cache``) and reuses it for any later call it fits that asks for its class or
    a parent of it; 5.x keeps the longest length so far (``_previous_max_cache_length``) and sizes every later
    static cache to at least that. Forgotten by :func:`~kvmagic.measure.strategies.reset_static_cache_state`.
    """
    from transformers.generation import utils

    return tuple(sorted(set(_STATE_PATTERN.findall(inspect.getsource(utils)))))


@functools.cache
def static_cache_needs_fullgraph() -> bool:
    """Whether ``generate`` refuses a static cache for a model that does not declare ``_can_compile_fullgraph``."""
    from transformers import GenerationMixin

    return "_can_compile_fullgraph" in inspect.getsource(GenerationMixin._prepare_cache_for_generation)


def dynamic_cache_windows() -> bool:
    """Whether the dynamic cache ``generate`` builds from a model's config keeps only the window of a
    sliding-attention layer (4.55's keeps every position); how it keeps it, in ``memory.sliding_keep``."""
    return sliding_keep().windowed


@functools.cache
def sliding_window_windows_every_layer() -> bool:
    """Whether ``cache_implementation="sliding_window"`` windows full-attention layers too (4.55's
    ``SlidingWindowCache`` does; 5.x builds a static cache from each layer's own type)."""
    import torch
    from transformers import StaticCache
    from transformers.generation import configuration_utils

    built = getattr(configuration_utils, "NEED_SETUP_CACHE_CLASSES_MAPPING", None) or {}
    kind = built.get("sliding_window", StaticCache)
    config = _probe_config(layer_types=["full_attention"], sliding_window=2)
    try:
        cache = kind(config=config, max_cache_len=8, max_batch_size=1)
    except TypeError:  # 5.x takes no batch size: it sizes the cache on first write
        cache = kind(config=config, max_cache_len=8)
    state = torch.zeros(1, 1, 1, 8)
    cache.update(state, state, 0, {"cache_position": torch.tensor([0])})
    return _held(cache) < 8


@functools.cache
def press_reason() -> str:
    """Why kvpress cannot compress a cache here; empty when it can. Asked by running a press: kvpress 0.5.5
    imports under transformers 5.24 and then fails on a renamed argument, so only a run tells. It halves the
    cache of a made-up Llama's prompt, or this kvpress does not work with the installed transformers."""
    if importlib.util.find_spec("kvpress") is None:
        return "needs kvpress: pip install 'kvmagic[press]'"
    try:
        held: int | str = _pressed_positions()
    except Exception as error:  # whatever it raised, it tells the user one thing: not with this transformers
        held = f"{type(error).__name__}: {clipped((str(error).splitlines() or [''])[0], 120)}"
    if held == 2:
        return ""
    failure = held if isinstance(held, str) else f"it kept {held} of 4 positions where it should keep 2"
    asked = [r for r in importlib.metadata.requires("kvpress") or [] if re.match(r"transformers\b", r)]
    return (
        f"kvpress {importlib.metadata.version('kvpress')} does not work with transformers {transformers_version()} "
        f"({failure}); it asks for {', '.join(asked) or 'another transformers'}: pip install 'kvmagic[press]'"
    )


def _pressed_positions() -> int:
    """Positions a four-token prompt leaves in the cache of a one-layer Llama under kvpress's Knorm at 0.5."""
    import torch
    from kvpress import KnormPress
    from transformers import DynamicCache, LlamaForCausalLM

    model = LlamaForCausalLM(_probe_config()).eval()
    cache = DynamicCache()
    with torch.inference_mode(), KnormPress(compression_ratio=0.5)(model):
        model(input_ids=torch.zeros(1, 4, dtype=torch.long), use_cache=True, **{cache_keyword(model): cache})
    return _held(cache)


@functools.cache
def dtype_keyword() -> str:
    """``dtype`` where loading takes it (transformers 4.56 on), else ``torch_dtype``: asked of a one-weight model."""
    import torch
    from transformers import PretrainedConfig, PreTrainedModel

    class _OneWeight(PreTrainedModel):
        config_class = PretrainedConfig

        def __init__(self, config: PretrainedConfig) -> None:
            super().__init__(config)
            self.weight = torch.nn.Parameter(torch.zeros(1))

    try:
        built = _OneWeight._from_config(PretrainedConfig(), dtype=torch.float16)  # type: ignore[no-untyped-call, unused-ignore]
    except TypeError:  # the keyword reached the model's own __init__: loading does not know it
        return "torch_dtype"
    return "dtype" if built.weight.dtype == torch.float16 else "torch_dtype"


@functools.cache
def generate_takes_use_model_defaults() -> bool:
    """Whether ``generate`` has the switch that stops it overwriting default-valued settings (4.50-4.57)."""
    from transformers import GenerationMixin

    return "use_model_defaults" in inspect.signature(GenerationMixin.generate).parameters


@functools.cache
def returned_cache_field() -> str:
    """Where ``generate(..., return_dict_in_generate=True)`` puts the cache: ``cache`` or ``past_key_values``."""
    import dataclasses

    from transformers.generation.utils import GenerateDecoderOnlyOutput

    fields = {f.name for f in dataclasses.fields(GenerateDecoderOnlyOutput)}
    return "cache" if "cache" in fields else "past_key_values"


def cache_keyword(model: Any) -> str:
    """How ``generate`` takes a cache to start from: ``cache`` where the model's forward is written for it
    (transformers 5.24 warns on the old name), else ``past_key_values``."""
    return "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"


@functools.cache
def tensor_parallel_keyword() -> str:
    """How ``from_pretrained`` is asked for the model's own tensor-parallel plan: ``distributed_config`` (a
    ``DistributedConfig`` that takes ``tp_plan``, where passing ``tp_plan`` itself is deprecated) or ``tp_plan``."""
    import transformers

    config = getattr(transformers, "DistributedConfig", None)
    if config is not None and "tp_plan" in inspect.signature(config).parameters:
        return "distributed_config"
    return "tp_plan"


def summary() -> dict[str, Any]:
    """Every answer, for a report of the environment."""
    criteria = compile_criteria()
    return {
        "quantized_backends": dict(quantized_backends()),
        "dtype_keyword": dtype_keyword(),
        "generate_takes_use_model_defaults": generate_takes_use_model_defaults(),
        "returned_cache_field": returned_cache_field(),
        "tensor_parallel_keyword": tensor_parallel_keyword(),
        "accelerator_functions": sorted(accelerator_functions()),
        "cache_implementations": list(cache_implementations()),
        "attention_implementations": dict(attention_implementations()),
        "compile_devices": list(criteria.devices),
        "compile_needs_fullgraph": criteria.needs_fullgraph,
        "static_cache_state": list(static_cache_state()),
        "static_cache_needs_fullgraph": static_cache_needs_fullgraph(),
        "dynamic_cache_windows": dynamic_cache_windows(),
        "sliding_window_windows_every_layer": sliding_window_windows_every_layer(),
    }


def _held(cache: Any) -> int:
    """How many positions the first layer of ``cache`` holds room for."""
    return int(cache.layers[0].keys.shape[-2])


def _probe_config(**extra: Any) -> Any:
    """A one-layer Llama config, eight wide: enough for a cache or a decision to be built from."""
    from transformers import LlamaConfig

    sizes: dict[str, Any] = dict(vocab_size=4, hidden_size=8, intermediate_size=8, num_hidden_layers=1)
    return LlamaConfig(**sizes, num_attention_heads=1, num_key_value_heads=1, head_dim=8, **extra)
