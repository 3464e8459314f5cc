"""Real model shapes without their weights: a published architecture built from its config, seeded at random.

What the KV cache buys depends on a model's shape (layers, widths, heads, vocabulary), not on what
its weights learnt, so a model built from its ``config.json`` times like the real one while needing
no download. kvmagic ships the configs of a few models people benchmark, so those build with no
network at all; any other model builds once its config is in the local Hugging Face cache or in a
directory. Weights are drawn per parameter from a generator seeded by the parameter's name (as for
``tiny``), directly on the target device and in the target dtype, split into chunks drawn in parallel.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

from kvmagic.errors import KVMagicError
from kvmagic.measure.capabilities import dtype_keyword
from kvmagic.measure.loaded import LoadedModel
from kvmagic.model.explain import explain
from kvmagic.model.loading import local_path, resolve_dtype
from kvmagic.model.tiny import SEED, TINY_NAME, tiny_dir

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "NAME", "SHIPPED", "build", "build_device", "build_loaded", "build_random", "check_random", "config_from_dict",
    "find_config", "find_tokenizer", "marked", "seed_parameters", "shipped_config",
]  # fmt: skip

NAME = "random_weights"  # the add-on's name, and its keyword of load_model
SHIPPED = {  # hub id -> its published config.json, under kvmagic/addons/random_weights/configs/
    "LGAI-EXAONE/EXAONE-4.0-1.2B": "exaone-4.0-1.2b.json",
    "meta-llama/Llama-3.2-1B": "llama-3.2-1b.json",
    "Qwen/Qwen2.5-0.5B": "qwen2.5-0.5b.json",
    "HuggingFaceTB/SmolLM2-135M": "smollm2-135m.json",
    "google/gemma-3-270m": "gemma-3-270m.json",  # 5 sliding-window layers to 1 full
    "Qwen/Qwen1.5-0.5B": "qwen1.5-0.5b.json",  # as many KV heads as query heads
}
_CHUNK = 1 << 24  # elements per independently seeded draw: small enough to spread over threads


def shipped_config(name: str) -> dict[str, Any] | None:
    """The published config of ``name`` as kvmagic ships it, or None when it ships none."""
    filename = SHIPPED.get(name)
    if filename is None:
        return None
    configs = resources.files("kvmagic.addons.random_weights").joinpath("configs")
    text = configs.joinpath(filename).read_text(encoding="utf-8")
    config: dict[str, Any] = json.loads(text)
    return config


def config_from_dict(data: dict[str, Any]) -> PretrainedConfig:
    """A config object from a config.json's contents, as ``from_pretrained`` would read them."""
    from transformers import CONFIG_MAPPING

    config: PretrainedConfig = CONFIG_MAPPING[data["model_type"]].from_dict(data)
    return config


def find_config(name: str, *, revision: str | None = None, trust_remote_code: bool = False) -> PretrainedConfig:
    """``name``'s config from a directory or the local hub cache, else the one kvmagic ships; never the network."""
    from transformers import AutoConfig

    try:
        found: PretrainedConfig = AutoConfig.from_pretrained(
            name, revision=revision, trust_remote_code=trust_remote_code, local_files_only=True
        )
        return found
    except OSError:
        pass
    shipped = shipped_config(name)
    if shipped is not None and revision is None:
        return config_from_dict(shipped)
    at = f" at revision {revision!r}" if revision else ""
    raise KVMagicError(
        f"no config for {name!r}{at} in the local cache, and kvmagic ships configs only for "
        f"{', '.join(SHIPPED)}: download its config once (`hf download {name} config.json`), "
        "or pass a directory that holds its config.json"
    )


# Fewer tokens than bytes is no model's tokenizer: transformers 5 builds one of a few special tokens from a config
# alone (Gemma 3's: 5), which would turn every prompt into unknown tokens.
LEAST_VOCABULARY = 256


def find_tokenizer(
    name: str, config: PretrainedConfig, *, revision: str | None = None, trust_remote_code: bool = False
) -> tuple[PreTrainedTokenizerBase, str | None]:
    """The model's own tokenizer if it is at hand locally, else tiny's byte-level one (and the name ``tiny``)."""
    from transformers import AutoTokenizer

    try:
        own = AutoTokenizer.from_pretrained(
            name, revision=revision, trust_remote_code=trust_remote_code, local_files_only=True
        )
        if len(own) >= LEAST_VOCABULARY:
            return own, None
    except Exception:  # no tokenizer files at hand: how that fails differs by model and version
        pass
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir())
    vocab_size = config.get_text_config().vocab_size
    if len(tokenizer) > vocab_size:
        raise KVMagicError(
            f"{name!r} has a vocabulary of {vocab_size} tokens, fewer than the {len(tokenizer)} of tiny's tokenizer "
            "that stands in for its own: put its tokenizer files beside its config"
        )
    return tokenizer, TINY_NAME


def build_device(device_map: str | dict[str, Any] | None) -> torch.device:
    """The one device a random model is built on: the first accelerator for ``auto``, else the device named."""
    import torch

    if device_map in (None, "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda", 0)
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if isinstance(device_map, str):
        try:
            return torch.device(device_map)
        except RuntimeError:
            pass
    raise KVMagicError(
        f"random weights are built on one device, not spread by {{device_map}} {device_map!r}: use auto, cpu or cuda:0",
        "device_map",
    )


def check_random(name: str, gguf_file: str | None) -> None:
    """Refuse random weights where there is no config to build them from: a GGUF file, or tiny (random already)."""
    if gguf_file:
        raise KVMagicError("{random_weights} builds from a config, not from {gguf_file}: drop one of them",
                           "random_weights", "gguf_file")  # fmt: skip
    if name == TINY_NAME:
        raise KVMagicError("tiny already has seeded random weights: drop {random_weights}", "random_weights")


def marked(stand_in: str | None) -> dict[str, Any]:
    """What a :class:`~kvmagic.measure.loaded.LoadedModel` built with random weights keeps of it: the summary's words
    in place of "loaded", and under the add-on's name the model whose tokenizer stands in for its own (or None)."""
    tokenizer = f", {stand_in}'s tokenizer" if stand_in else ""
    return {"built": f"RANDOM weights (real shape and timings, meaningless text){tokenizer}, built",
            "addons": {NAME: stand_in}}  # fmt: skip


def build_loaded(name: str, load: Mapping[str, Any], before_weights: Callable[[], None] | None) -> LoadedModel:
    """``name``'s architecture from its config (cached, a directory's, or shipped) with seeded random weights;
    ``load`` holds ``load_model``'s keywords."""
    check_random(name, load["gguf_file"])
    dtype = {dtype_keyword(): resolve_dtype(load["dtype"], load["device_map"])}
    options = {key: load[key] for key in ("revision", "attn_implementation", "trust_remote_code")}
    start = time.perf_counter()
    try:
        model, tokenizer, stand_in = build_random(local_path(name), dtype, load["device_map"], options, before_weights)
    except KVMagicError:
        raise
    except Exception as error:
        raise explain(name, load["revision"], error) from error
    return LoadedModel(model, tokenizer, name, load["revision"], time.perf_counter() - start, **marked(stand_in))


def build_random(
    name: str,
    dtype: dict[str, torch.dtype],
    device_map: str | dict[str, Any] | None,
    options: dict[str, Any],
    before_weights: Callable[[], None] | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, str | None]:
    """Model, tokenizer and the name of a stand-in tokenizer (or None); ``dtype`` is ``{keyword: dtype}``.

    ``options`` holds revision, trust_remote_code and attn_implementation; ``before_weights`` runs once
    the config and tokenizer are found and before any weight takes memory.
    """
    from kvmagic.measure.guards import with_memory_advice

    found = {key: options[key] for key in ("revision", "trust_remote_code")}
    config = find_config(name, **found)
    tokenizer, stand_in = find_tokenizer(name, config, **found)
    device = build_device(device_map)
    if before_weights is not None:
        before_weights()
    kwargs = {**dtype, "trust_remote_code": options["trust_remote_code"]}
    if options.get("attn_implementation"):
        kwargs["attn_implementation"] = options["attn_implementation"]
    (torch_dtype,) = dtype.values()
    advice = (
        f"not enough memory to build {name!r} as {str(torch_dtype).removeprefix('torch.')} on {device}: "
        "choose a smaller {dtype} (bfloat16 or float16)"
    )
    return with_memory_advice(lambda: build(config, device, kwargs), advice, "dtype"), tokenizer, stand_in


def build(config: PretrainedConfig, device: torch.device, model_kwargs: dict[str, Any]) -> PreTrainedModel:
    """The model of ``config`` on ``device`` with seeded weights; ``model_kwargs`` go to ``from_config`` (dtype...)."""
    import torch
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM

    with init_empty_weights(include_buffers=False):  # parameters on meta, buffers (RoPE tables) computed for real
        model = AutoModelForCausalLM.from_config(config, **model_kwargs)
    buffers = {name: buffer.detach().clone() for name, buffer in model.named_buffers()}
    model.to_empty(device=device)
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            buffer.copy_(buffers[name])
    model.tie_weights()  # to_empty gave each side of a tied pair its own storage
    seed_parameters(model)
    built: PreTrainedModel = model.eval()
    return built


def seed_parameters(model: torch.nn.Module, seed: int = SEED) -> None:
    """Norm gains 1, biases 0, every matrix uniform with std 1/sqrt(fan-in), from generators seeded by name.

    Each chunk of a parameter has its own generator, so the values do not depend on how many threads draw them.
    """
    from concurrent.futures import ThreadPoolExecutor

    import torch

    draws = []
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() == 1:
                param.fill_(0.0 if name.endswith(".bias") else 1.0)
                continue
            bound = 3**0.5 * param.shape[-1] ** -0.5  # uniform(-b, b) has std b/sqrt(3)
            flat = param.view(-1)
            for index, start in enumerate(range(0, flat.numel(), _CHUNK)):
                chunk_seed = (seed ^ zlib.crc32(name.encode())) + index
                draws.append((flat[start : start + _CHUNK], chunk_seed, bound))

        def draw(job: tuple[torch.Tensor, int, float]) -> None:
            chunk, chunk_seed, bound = job
            generator = torch.Generator(device=chunk.device).manual_seed(chunk_seed)
            with torch.no_grad():
                chunk.uniform_(-bound, bound, generator=generator)

        workers = torch.get_num_threads() if all(j[0].device.type == "cpu" for j in draws) else 1
        with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
            list(pool.map(draw, draws))
