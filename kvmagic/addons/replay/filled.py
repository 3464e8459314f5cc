"""A front end's parsed request filled in from the run ``--replay FILE`` names: the file's request where the user
typed nothing, the strategies that cannot run here left out, in the command the file's model and how it was loaded,
and the prompt it ran; then the new run is compared with the file's as ``--compare FILE`` compares."""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable
from typing import Any

from kvmagic.addons.replay.here import device_kind, here_device, model_here, runnable
from kvmagic.addons.replay.saved_file import read_saved
from kvmagic.core.addon import SavedRequest
from kvmagic.core.strategy import REFERENCE, Strategy
from kvmagic.errors import KVMagicError

__all__ = ["fill"]

_LOADED = ("revision", "attn_implementation", "random_weights")  # how the file's model loaded, beside its dtype


def fill(args: argparse.Namespace, typed: frozenset[str], host: str, prompt: Callable[[], str | None]) -> SavedRequest:
    """``args`` filled in from the file ``args.replay`` names, in place, and the run to compare with."""
    _refuse(args, host)
    saved, unread = read_saved(args.replay)
    request, said = saved.spec.to_dict(), []
    if "cache" not in typed and (request["cache"] or unread):
        kept, dropped = runnable(request["cache"] or [], unread)
        if dropped:
            said.append("not replayed here: " + ", ".join(f"{name} ({why})" for name, why in dropped.items()))
        if request["cache"] and not [name for name in kept if name != str(REFERENCE)]:
            raise KVMagicError("{replay}: none of the saved strategies can run here: name some with {cache} LIST",
                               "replay", "cache")  # fmt: skip
        request["cache"] = kept or None
        if not any(Strategy.of(name).quantized for name in kept):
            request["kv_bits"] = None
    if (args.repeat if "repeat" in typed else request["repeat"]) != "auto":  # a target of -r auto alone
        request.pop("ci_target"), request.pop("auto_cap")
    device, here = str(saved.metadata.get("device") or ""), here_device()
    moved = bool(device) and device_kind(device) != here
    if moved:
        said.append(f"saved on {device}, replayed on {here}")
    if host == "cli" and "model" not in typed:
        _load_as_saved(args, typed, saved.model, saved.metadata, moved)
    fields = {}
    for name, value in request.items():
        if name in typed:
            continue
        if name == "quality_text" or name not in vars(args):  # a text its flag would read from a file
            fields[name] = value
        else:
            setattr(args, name, value)
    if "quality_text" in vars(args) and "quality_text" not in typed:
        args.quality_text = None
    args.compare = args.replay  # the comparison as --compare makes it: its verdict names the file, --fail-on gates it
    text = _prompt(prompt(), saved.facts.prompt, saved.facts.prompt_sha256, args.replay)
    return SavedRequest(text, saved, args.replay, fields, ("; ".join(said),) if said else ())


def _refuse(args: argparse.Namespace, host: str) -> None:
    """What a rerun of one saved run cannot go with, each said before the file is read."""
    from kvmagic.addons.models.models_request import model_names

    if getattr(args, "compare", None):
        raise KVMagicError("{replay} compares with the run it reruns: drop {compare}", "replay", "compare")
    if getattr(args, "tp", None) not in (None, False):
        raise KVMagicError("{replay} reruns a run on one process: drop {tp}", "replay", "tp")
    models = "model" if host == "cli" else "models"
    if len(model_names(getattr(args, models, None))) > 1:
        raise KVMagicError(f"{{replay}} reruns one model's run: name one model with {{{models}}}", "replay", models)


def _load_as_saved(
    args: argparse.Namespace, typed: frozenset[str], model: str, metadata: dict[str, Any], moved: bool
) -> None:
    """The command's load options as the file's model was loaded (its dtype only on the same kind of device), where
    none is typed; refused where that model cannot load here, saying to name another."""
    args.model = model
    for name in _LOADED:
        if name not in typed and metadata.get(name) is not None:
            setattr(args, name, metadata[name])
    if not moved and "dtype" not in typed and isinstance(metadata.get("dtype"), str):
        args.dtype = metadata["dtype"]
    if not args.random_weights and not model_here(model, args.revision):
        raise KVMagicError(f"{{replay}}: the saved run's model {model!r} is not here (not in the local cache, and the "
                           "Hub does not answer): pass {model} MODEL to replay it on another, e.g. {model} tiny",
                           "replay", "model")  # fmt: skip


def _prompt(given: str | None, kept: str | None, sha256: str, path: str) -> str:
    """The saved prompt; one given beside it only where it is that prompt (a file saved before kvmagic kept prompts
    holds only its SHA-256, and needs it given)."""
    if given is not None and given.strip():
        if sha256 and sha256 not in {_sha256(given), _sha256(given.strip())}:
            raise KVMagicError("{replay} reruns the prompt it saved, and the one given differs: drop it (to run "
                               "another prompt, compare with {compare} instead)", "replay", "compare")  # fmt: skip
        return given.strip()
    if kept is None:
        raise KVMagicError(f"{{replay}} {path!r} was saved before kvmagic kept prompts: give the prompt it ran "
                           "(checked against its SHA-256)", "replay")  # fmt: skip
    return kept


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
