"""What loading checks before anything loads: a mistake found here costs nothing, the model loaded before included.

``load_model`` runs these before its ``before_weights`` releases a previous model, so a refusal here
leaves that model in place.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from kvmagic.errors import KVMagicError

__all__ = [
    "DEVICE_MAP_STRATEGIES", "PROBE_SECONDS", "check_attention", "check_device_map", "check_gguf", "hub_reachable",
    "local_path", "offline_source",
]  # fmt: skip

DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
PROBE_SECONDS = 2.0  # a Hub that answers takes well under a second; an unreachable one costs this, once


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
