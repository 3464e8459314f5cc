"""Where a benchmark ran: versions, device, dtype, model and the settings that change timings.

Everything here is recorded with each result so a number can be traced, and so a comparison with a
saved run names what differed: the CPU threads, the CUDA build and driver, and TF32 settings move
timings as much as a new library version does.
"""

from __future__ import annotations

import platform
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvmagic.core.addon import addons

if TYPE_CHECKING:
    import torch

    from kvmagic.measure.loaded import LoadedModel

__all__ = ["cuda_driver", "device_name", "environment", "precision_settings"]

_NVIDIA_PROC = Path("/proc/driver/nvidia/version")


def environment(loaded: LoadedModel) -> dict[str, Any]:
    """Versions, device, dtype, attention, model (and what each add-on records of it), and the thread and precision
    settings in force now."""
    import torch
    import transformers

    from kvmagic.version import __version__

    config = loaded.model.config
    return {
        "kvmagic": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": ", ".join(device_name(device) for device in loaded.devices),
        "cpu": _cpu_model(),
        "threads": torch.get_num_threads(),
        "cuda": torch.version.cuda,
        "cuda_driver": cuda_driver(),
        **precision_settings(),
        "dtype": str(loaded.dtype).removeprefix("torch."),
        "attn_implementation": getattr(config, "_attn_implementation", None),
        "model": loaded.name,
        "revision": loaded.revision,
        "model_commit": getattr(config, "_commit_hash", None),
        **{key: value for addon in addons() for key, value in addon.environment(loaded).items()},
    }


def precision_settings() -> dict[str, Any]:
    """TF32 and float32 matmul precision: on an Ampere or newer GPU they trade float32 accuracy for speed."""
    import torch

    with warnings.catch_warnings():  # newer torch steers towards fp32_precision; reading the old flags is fine
        warnings.simplefilter("ignore")
        return {
            "allow_tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "allow_tf32_cudnn": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
        }


def cuda_driver() -> str | None:
    """The NVIDIA driver's version, from NVML if installed, else the kernel module; None without CUDA."""
    import torch

    if torch.version.cuda is None or not torch.cuda.is_available():
        return None
    version = _nvml_driver()
    if version is None and _NVIDIA_PROC.is_file():
        version = driver_from_proc(_NVIDIA_PROC.read_text(errors="replace"))
    return version


def driver_from_proc(text: str) -> str | None:
    """The version in ``/proc/driver/nvidia/version`` (proprietary or open kernel module)."""
    match = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
    return match.group(1) if match else None


def _nvml_driver() -> str | None:
    try:
        with warnings.catch_warnings():  # the old pynvml package warns that it is deprecated
            warnings.simplefilter("ignore")
            import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVML present but unusable (no driver, a container without it): fall back
        return None
    return version.decode() if isinstance(version, bytes) else str(version)


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
