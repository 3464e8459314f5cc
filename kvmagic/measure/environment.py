"""Where a benchmark ran: versions, device, dtype and model, so a number can be traced and compared."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from kvmagic.model.loading import LoadedModel

__all__ = ["device_name", "environment"]


def environment(loaded: LoadedModel) -> dict[str, Any]:
    """Versions of kvmagic, torch and transformers, the device, dtype, attention and model."""
    import torch
    import transformers

    from kvmagic.version import __version__

    config = loaded.model.config
    return {
        "kvmagic": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": ", ".join(device_name(device) for device in loaded.devices),
        "dtype": str(loaded.dtype).removeprefix("torch."),
        "attn_implementation": getattr(config, "_attn_implementation", None),
        "model": loaded.name,
        "revision": loaded.revision,
        "model_commit": getattr(config, "_commit_hash", None),
    }


def device_name(device: torch.device) -> str:
    """A human name for ``device``: the GPU's model, or the CPU's."""
    import torch

    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    if device.type == "cpu":
        return f"cpu ({_cpu_model()})"
    return str(device)


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()
