"""Load a causal LM and its tokenizer the way the source experiment did, with errors that say the fix.

What loading checks comes first, before anything loads: a mistake found there costs nothing, the model loaded
before included (``load_model`` runs the checks before its ``before_weights`` releases a previous model, so a
refusal leaves that model in place).
"""

from __future__ import annotations

import functools
import os
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from kvmagic.core.addon import addons
from kvmagic.errors import KVMagicError
from kvmagic.measure.capabilities import dtype_keyword, hub_reachable
from kvmagic.measure.guards import with_memory_advice
from kvmagic.measure.loaded import LoadedModel
from kvmagic.model.explain import explain
from kvmagic.model.tiny import TINY_NAME, tiny_dir

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "DEFAULT_MODEL", "DEVICE_MAP_STRATEGIES", "DTYPES", "LoadedModel", "check_attention",
    "check_device_map", "check_gguf", "load_model", "local_path", "model_source",
    "offline_source", "quiet_progress_bars", "resolve_dtype", "without_progress_bars",
]  # fmt: skip

DEFAULT_MODEL = "LGAI-EXAONE/EXAONE-4.0-1.2B"
DTYPES = ("auto", "float16", "bfloat16", "float32")
DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
WEIGHT_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack"})
P = ParamSpec("P")
T = TypeVar("T")


def resolve_dtype(dtype: str, device_map: str | dict[str, Any] | None = "auto") -> torch.dtype:
    """``auto`` is the source experiment's rule, float16 on CUDA and float32 elsewhere, read from where
    ``device_map`` puts the weights: float16 on a CPU is slow, and some CPU kernels lack it."""
    import torch

    if dtype not in DTYPES:
        raise KVMagicError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    if dtype == "auto":
        return torch.float16 if _weights_on_cuda(device_map) else torch.float32
    chosen: torch.dtype = getattr(torch, dtype)
    return chosen


def _weights_on_cuda(device_map: str | dict[str, Any] | None) -> bool:
    """Whether loading with ``device_map`` computes on CUDA: a placing strategy (auto, balanced, ...) on
    a machine with CUDA, a CUDA device, or a map with any module on CUDA (accelerate streams the
    modules it maps to the CPU into the first GPU, so they compute there too)."""
    import torch

    if device_map is None or not torch.cuda.is_available():
        return False
    if isinstance(device_map, dict):
        return any(_on_cuda(place) for place in device_map.values())
    return device_map in DEVICE_MAP_STRATEGIES or _on_cuda(device_map)


def _on_cuda(place: object) -> bool:
    """A device_map entry on CUDA: a GPU index (as accelerate reads a bare int), ``cuda:N`` or a CUDA device."""
    import torch

    if isinstance(place, bool):
        return False
    if isinstance(place, int):
        return True
    try:
        return bool(torch.device(place).type == "cuda")  # type: ignore[call-overload]
    except (RuntimeError, TypeError, ValueError):
        return False  # "disk", or a name torch does not know: not a GPU


@contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """transformers' own progress bars ("Loading weights", "Writing model shards") off for the duration, the
    user's setting back after, failed or not. Its switch turns the Hub's bars off too: a download keeps those
    as the user had them, the one wait a bar tells something of."""
    from huggingface_hub.utils import (  # type: ignore[attr-defined, unused-ignore]
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )
    from transformers.utils import logging

    if not logging.is_progress_bar_enabled():
        yield
        return
    downloads = not are_progress_bars_disabled()
    with warnings.catch_warnings():  # HF_HUB_DISABLE_PROGRESS_BARS=0 refuses the Hub's part, with a warning
        warnings.simplefilter("ignore")
        logging.disable_progress_bar()
        if downloads:
            enable_progress_bars()
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.enable_progress_bar()
            if not downloads:
                disable_progress_bars()


def without_progress_bars(load: Callable[P, T]) -> Callable[P, T]:
    """``load`` run under :func:`quiet_progress_bars`."""

    @functools.wraps(load)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        with quiet_progress_bars():
            return load(*args, **kwargs)

    return run


@without_progress_bars
def load_model(
    name: str = DEFAULT_MODEL,
    *,
    dtype: str = "auto",
    device_map: str | dict[str, Any] | None = "auto",
    revision: str | None = None,
    gguf_file: str | None = None,
    attn_implementation: str | None = None,
    trust_remote_code: bool = False,
    before_weights: Callable[[], None] | None = None,
    **options: Any,
) -> LoadedModel:
    """Load ``name`` (a hub id, a local directory, or ``"tiny"``) with its tokenizer.

    Remote code runs only with ``trust_remote_code=True``. A hub id comes from the local cache alone while the
    Hub does not answer. Loading failures become one-line :class:`KVMagicError` messages that name the cause.
    ``before_weights`` runs once the tokenizer has loaded (so the name is good) and before the weights take
    memory: the place to free a previous model. ``options`` are the add-ons' keywords (their ``load_fields``): one
    may ask an add-on to build the model its own way instead.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    given = dict(dtype=dtype, device_map=device_map, revision=revision, gguf_file=gguf_file, **_added(options),
                 attn_implementation=attn_implementation, trust_remote_code=trust_remote_code)  # fmt: skip
    torch_dtype = resolve_dtype(dtype, device_map)
    check_device_map(device_map)
    check_attention(attn_implementation)
    for addon in addons():
        built: LoadedModel | None = addon.build(name, given, before_weights)
        if built is not None:
            return built
    source = model_source(name, revision, gguf_file)
    common = {"revision": revision, "gguf_file": gguf_file, "trust_remote_code": trust_remote_code}

    def load() -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
        where = offline_source(source, revision)
        tokenizer = AutoTokenizer.from_pretrained(where, **common)
        if before_weights is not None:
            before_weights()
        model = AutoModelForCausalLM.from_pretrained(where, device_map=device_map, **{dtype_keyword(): torch_dtype},
                                                     attn_implementation=attn_implementation, **common)  # fmt: skip
        return tokenizer, model

    advice = (
        f"not enough memory to load {name!r} as {str(torch_dtype).removeprefix('torch.')}: "
        "load a smaller {dtype} (float16 or bfloat16), or use {device_map} auto to keep some layers on the CPU"
    )
    start = time.perf_counter()
    try:
        tokenizer, model = with_memory_advice(load, advice, "dtype", "device_map")
    except KVMagicError:
        raise
    except Exception as error:
        raise explain(name, revision, error) from error
    model.eval()
    return LoadedModel(model, tokenizer, name, revision, time.perf_counter() - start)


def _added(options: dict[str, Any]) -> dict[str, Any]:
    """The add-ons' keywords of :func:`load_model` (their ``load_fields``), checked, those not given at their
    defaults."""
    fields = {field.name: field for addon in addons() for field in addon.load_fields}
    if unknown := options.keys() - fields.keys():
        raise TypeError(f"load_model() got an unexpected keyword argument {min(unknown)!r}")
    return {name: field.check(name, options.get(name, field.default)) for name, field in fields.items()}


def model_source(name: str, revision: str | None, gguf_file: str | None) -> str | Path:
    """Where ``from_pretrained`` reads ``name`` from, checked before anything loads."""
    if name == TINY_NAME:
        if revision or gguf_file:
            given = "revision" if revision else "gguf_file"
            raise KVMagicError(f"tiny is built locally and has no {{{given}}}: drop it", given)
        return tiny_dir()
    where = local_path(name)
    if gguf_file:
        check_gguf(where, gguf_file)
    elif Path(where).is_dir() and not (Path(where) / "config.json").is_file():
        raise KVMagicError(
            f"{name!r} is a directory without a config.json: point to a model saved with save_pretrained"
        )
    elif Path(where).is_dir() and not any(p.suffix in WEIGHT_SUFFIXES for p in Path(where).iterdir()):
        offered = next((error for addon in addons() if (error := addon.without_weights(name)) is not None), None)
        raise offered or KVMagicError(f"{name!r} holds a config but no weights (no .safetensors or .bin file): save "
                                      "the model's weights there")  # fmt: skip
    return where


def check_device_map(device_map: str | dict[str, Any] | None) -> None:
    """Reject a device this machine lacks before any file is read; torch would fail deep inside loading."""
    if not isinstance(device_map, str) or device_map in DEVICE_MAP_STRATEGIES:
        return
    import torch

    try:
        device = torch.device(device_map)
    except RuntimeError:
        raise KVMagicError(
            f"{{device_map}} {device_map!r} is neither a device (cpu, cuda:0, mps) nor one of "
            f"{', '.join(DEVICE_MAP_STRATEGIES)}",
            "device_map",
        ) from None
    if device.type == "meta":
        raise KVMagicError(
            "{device_map} meta loads no weights, so nothing could run: use auto, cpu or an accelerator", "device_map"
        )
    if device.type == "cpu":
        return
    backend = getattr(torch, device.type, None)
    if device.type == "mps":
        available = torch.backends.mps.is_available()
    else:
        available = backend is not None and getattr(backend, "is_available", lambda: False)()
    if not available:
        raise KVMagicError(
            f"{{device_map}} {device_map!r}: torch sees no {device.type} device here; use auto or cpu", "device_map"
        )
    count = getattr(backend, "device_count", lambda: 1)()
    if device.index is not None and device.index >= count:
        raise KVMagicError(
            f"{{device_map}} {device_map!r}: there are {count} {device.type} devices, numbered from 0", "device_map"
        )


def check_gguf(name: str, gguf_file: str) -> None:
    """Check a local GGUF file up front: transformers 4.x reports a file that is not GGUF as a missing package."""
    directory = Path(name)
    if not directory.is_dir():
        return  # a hub repository: the file is checked once downloaded
    path = directory / gguf_file
    if not path.is_file():
        raise KVMagicError(f"{name!r} has no file {gguf_file!r}: check {{gguf_file}}", "gguf_file")
    with path.open("rb") as file:
        magic = file.read(4)
    if magic != b"GGUF":
        raise KVMagicError(
            f"{gguf_file!r} is not a GGUF file (it does not start with the bytes 'GGUF'): "
            "name a .gguf file, or drop {gguf_file} to load the directory's own weights",
            "gguf_file",
        )


def check_attention(attn_implementation: str | None) -> None:
    """Refuse an attention implementation the installed transformers lacks, or cannot run here; transformers
    would refuse it only once the weights are on their way. A hub kernel (``org/repo``) and a wrapped form
    (``paged|...``) are not in its registry, and are transformers' own to judge."""
    if not isinstance(attn_implementation, str) or "/" in attn_implementation or "|" in attn_implementation:
        return
    from kvmagic.measure.capabilities import attention_implementations, transformers_version

    known = attention_implementations()
    reason = known.get(attn_implementation)
    if reason == "":
        return
    runs = sorted(name for name, why in known.items() if not why)
    choices = f"{', '.join(runs[:-1])} or {runs[-1]}" if len(runs) > 1 else runs[0]
    if reason is not None:
        raise KVMagicError(
            f"{{attn_implementation}} {attn_implementation} cannot run here: it {reason}; use {choices}",
            "attn_implementation",
        )
    absent = sorted(name for name, why in known.items() if why)
    besides = f"; {', '.join(absent)} need FlashAttention installed and a CUDA GPU" if absent else ""
    raise KVMagicError(
        f"{{attn_implementation}} {attn_implementation!r} is not one transformers {transformers_version()} has: "
        f"use {choices}{besides}",
        "attn_implementation",
    )


def local_path(name: str) -> str:
    """``name`` with a leading ``~`` expanded; a name that can only be a path must be one here, or transformers
    would call it an invalid repo id. A hub id is ``model`` or ``org/model``; a name starting with ".", "/" or
    "~", or with a "/" where a hub id has none (``models/org/model``), is a path."""
    expanded = os.path.expanduser(name)
    if os.path.exists(expanded) or not _path_only(name):
        return expanded
    raise KVMagicError(f"{name!r} is not a directory here (nor a model on the Hub): check the path")


def _path_only(name: str) -> bool:
    if name.startswith((".", "/", "~")) or (os.sep != "/" and os.sep in name):
        return True
    if "/" not in name:
        return False
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id  # type: ignore[attr-defined, unused-ignore]

    try:
        validate_repo_id(name)
    except HFValidationError:
        return True
    return False


def offline_source(source: str | Path, revision: str | None) -> str | Path:
    """``source``, or for a hub id while the Hub does not answer, its snapshot in the local cache, so that
    nothing asks the Hub: asked file by file, huggingface_hub would retry each with back-off and print every
    retry, for most of a minute. Not in the cache: huggingface_hub's ``LocalEntryNotFoundError``. In offline
    mode (``HF_HUB_OFFLINE``) huggingface_hub asks nothing itself, and neither does this."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE or Path(source).exists() or hub_reachable(constants.ENDPOINT):
        return source
    from huggingface_hub import snapshot_download

    return snapshot_download(str(source), revision=revision, local_files_only=True)
