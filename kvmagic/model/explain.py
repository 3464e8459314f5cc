"""A loading failure as one line that names the cause and the way out."""

from __future__ import annotations

from pathlib import Path

from kvmagic.errors import KVMagicError, clipped

__all__ = ["explain"]

_OFFLINE_HINT = "the built-in model 'tiny' works offline"


def explain(name: str, revision: str | None, error: BaseException) -> KVMagicError:
    """Turn a loading failure into one line that names the cause and the way out."""
    causes: list[BaseException] = []
    link: BaseException | None = error
    while link is not None and len(causes) < 10:
        causes.append(link)
        link = link.__cause__ or link.__context__
    kinds = {type(cause).__name__ for cause in causes}
    text = " ".join(str(cause) for cause in causes)
    if "trust_remote_code" in text:
        return KVMagicError(
            f"{name!r} ships its own model code; pass {{trust_remote_code}} if you trust it", "trust_remote_code"
        )
    if "GatedRepoError" in kinds or "trying to access a gated repo" in text.lower():
        return KVMagicError(f"{name!r} is gated: accept its licence on the Hub, then log in with `hf auth login`")
    if "RevisionNotFoundError" in kinds or "not a valid git identifier" in text:
        return KVMagicError(f"revision {revision!r} does not exist for {name!r}: check {{revision}}", "revision")
    if "UnpicklingError" in kinds or "weights only load failed" in text.lower():
        return KVMagicError(
            f"{name!r} keeps its weights in a pickle that holds more than tensors, and torch will not run "
            "the code such a file can carry: load a copy saved as safetensors"
        )
    if Path(name).expanduser().is_dir():
        return KVMagicError(f"{name!r} holds no loadable model: {_first_line(error)}")
    if Path(name).expanduser().is_file():
        return KVMagicError(f"{name!r} is a file: give the directory that holds its config.json and weights")
    if "RepositoryNotFoundError" in kinds or "is not a valid model identifier" in text:
        return KVMagicError(
            f"{name!r} is neither a local directory nor a model on the Hugging Face Hub: "
            f"check the name ({_OFFLINE_HINT})"
        )
    if kinds & {"LocalEntryNotFoundError", "OfflineModeIsEnabled", "ConnectionError", "ConnectTimeout"} or (
        "couldn't connect" in text.lower() or "offline" in text.lower()
    ):
        return KVMagicError(
            f"cannot download {name!r}: the Hugging Face Hub is unreachable (offline, or no network) "
            f"and it is not in the local cache; {_OFFLINE_HINT}"
        )
    return KVMagicError(f"cannot load {name!r}: {_first_line(error)}")


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return clipped(lines[0]) if lines else type(error).__name__
