"""Load a causal LM and its tokenizer the way the source experiment did, with errors that say the fix."""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from kvmagic.errors import KVMagicError
from kvmagic.measure.guards import with_memory_advice
from kvmagic.measure.loaded import LoadedModel
from kvmagic.measure.signatures import dtype_keyword
from kvmagic.model.checks import (
    DEVICE_MAP_STRATEGIES,
    check_attention,
    check_device_map,
    check_gguf,
    local_path,
    offline_source,
)
from kvmagic.model.explain import explain
from kvmagic.model.tiny import TINY_NAME, tiny_dir

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "DEFAULT_MODEL", "DTYPES", "LoadedModel", "load_model", "quiet_progress_bars", "resolve_dtype",
    "without_progress_bars",
]  # fmt: skip

DEFAULT_MODEL = "LGAI-EXAONE/EXAONE-4.0-1.2B"
DTYPES = ("auto", "float16", "bfloat16", "float32")
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
    random_weights: bool = False,
    before_weights: Callable[[], None] | None = None,
) -> LoadedModel:
    """Load ``name`` (a hub id, a local directory, or ``"tiny"``) with its tokenizer.

    Remote code runs only with ``trust_remote_code=True``. A hub id comes from the local cache alone while the
    Hub does not answer. Loading failures become one-line :class:`KVMagicError` messages that name the cause.
    ``before_weights`` runs once the tokenizer has loaded (so the name is good) and before the weights take
    memory: the place to free a previous model. ``random_weights`` builds the model from its config instead
    (:mod:`kvmagic.model.random_weights`), with no download. Split over the ranks torchrun started:
    :func:`kvmagic.model.split_loading.load_split_model`.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = resolve_dtype(dtype, device_map)
    check_device_map(device_map)
    check_attention(attn_implementation)
    if random_weights:
        options = dict(revision=revision, attn_implementation=attn_implementation, trust_remote_code=trust_remote_code)
        return _build_random(name, gguf_file, {dtype_keyword(): torch_dtype}, device_map, options, before_weights)
    source = _source(name, revision, gguf_file)
    common = {"revision": revision, "gguf_file": gguf_file, "trust_remote_code": trust_remote_code}

    def load() -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
        where = offline_source(source, revision)
        tokenizer = AutoTokenizer.from_pretrained(where, **common)
        if before_weights is not None:
            before_weights()
        model = AutoModelForCausalLM.from_pretrained(
            where,
            device_map=device_map,
            attn_implementation=attn_implementation,
            **{dtype_keyword(): torch_dtype},
            **common,
        )
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


def _source(name: str, revision: str | None, gguf_file: str | None) -> str | Path:
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
    return where


def _build_random(
    name: str,
    gguf_file: str | None,
    dtype: dict[str, torch.dtype],
    device_map: str | dict[str, Any] | None,
    options: dict[str, Any],
    before_weights: Callable[[], None] | None,
) -> LoadedModel:
    """``name``'s architecture from its config (cached, a directory's, or shipped) with seeded random weights."""
    from kvmagic.model.random_weights import build_random

    if gguf_file:
        raise KVMagicError("{random_weights} builds from a config, not from {gguf_file}: drop one of them",
                           "random_weights", "gguf_file")  # fmt: skip
    if name == TINY_NAME:
        raise KVMagicError("tiny already has seeded random weights: drop {random_weights}", "random_weights")
    start = time.perf_counter()
    try:
        model, tokenizer, stand_in = build_random(local_path(name), dtype, device_map, options, before_weights)
    except KVMagicError:
        raise
    except Exception as error:
        raise explain(name, options["revision"], error) from error
    seconds = time.perf_counter() - start
    return LoadedModel(model, tokenizer, name, options["revision"], seconds, random_weights=True,
                       stand_in_tokenizer=stand_in)  # fmt: skip
