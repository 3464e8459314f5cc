"""A loaded model, its tokenizer and where they came from: what every layer below the front ends measures.

:mod:`kvmagic.model.loading` builds one; the measurement and the runner read it. It lives here, with the
measurement, so that no layer reaches up for the type it is handed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvmagic.core.addon import answered

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from kvmagic.measure.lockstep import World

__all__ = ["LoadedModel"]


@dataclass(eq=False)
class LoadedModel:
    """A model, its tokenizer and where they came from; what ``run_benchmark`` measures."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    name: str
    revision: str | None = None
    load_seconds: float = 0.0
    world: World | None = None  # one of several ranks a launcher started, in lockstep: this rank's place among them
    placement: str = ""  # how a launcher placed it beyond its devices, as the summary says it (over ranks, say)
    built: str = ""  # how an add-on built it where it did, as the summary says it in place of "loaded"
    addons: dict[str, Any] = field(default_factory=dict)  # what that add-on keeps of how, under its name

    if not TYPE_CHECKING:  # what an add-on says of how it built it (``loaded.random_weights``)

        def __getattr__(self, name: str) -> Any:
            return answered(self, name, "loaded_attributes")

    @property
    def dtype(self) -> torch.dtype:
        return self.model.dtype

    @property
    def device(self) -> torch.device:
        """Where inputs go: the device of the first layer."""
        return self.model.device

    @property
    def devices(self) -> tuple[torch.device, ...]:
        """Every device holding a parameter or buffer (several under a multi-GPU ``device_map``)."""
        held = {t.device for t in self.model.parameters()} | {t.device for t in self.model.buffers()}
        return tuple(sorted(held, key=str))

    @property
    def num_parameters(self) -> int:
        """Each parameter once: an output layer tied to the input embedding counts once, also where a loader gave
        it a share of its own, still the embedding's values (marked ``kvmagic_tied_share``)."""
        head = self.model.get_output_embeddings()
        copy = head.weight.numel() if getattr(head, "kvmagic_tied_share", False) else 0
        return int(self.model.num_parameters()) - copy

    @property
    def max_positions(self) -> int | None:
        """The longest sequence (prompt plus generated tokens) the model accepts, if it says."""
        config = self.model.config.get_text_config()
        for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
            value = getattr(config, key, None)
            if isinstance(value, int) and value > 0:
                return value
        return None

    def summary(self) -> str:
        devices = ", ".join(str(d) for d in self.devices)
        dtype = str(self.dtype).removeprefix("torch.")
        revision = f"@{self.revision}" if self.revision else ""
        built = self.built or "loaded"
        placed = f" {self.placement}," if self.placement else ""
        return (
            f"{self.name}{revision}: {type(self.model).__name__}, {_count(self.num_parameters)} parameters, "
            f"{dtype} on {devices},{placed} {built} in {self.load_seconds:.2f} s"
        )

    def __repr__(self) -> str:
        return f"<LoadedModel {self.summary()}>"


def _count(n: int) -> str:
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.2f} {suffix}"
    return str(n)
