"""What a split run keeps: each measurement's view from every rank (:class:`Ranks`), the run's ranks
(:class:`Split`), and both as a saved file holds them, older files' spellings included."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvmagic.results.serialize import floats_back

if TYPE_CHECKING:
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement

__all__ = [
    "NAME", "OLD_KEYS", "Ranks", "Split", "ranks_from_file", "ranks_of", "ranks_to_file", "split_from_file", "split_of",
    "split_to_file",
]  # fmt: skip

NAME = "split"  # the add-on's name: its key in a result's and a measurement's add-on data
OLD_KEYS = ("world_size", "backend", "rank_devices")  # where format 3 first kept a split run's ranks: its metadata


@dataclass(frozen=True)
class Ranks:
    """One measurement on every rank of a tensor-parallel run, in rank order (a rank's own view holds one).

    ``communication_s`` is each rank's time in collectives over one extra, profiled run of the strategy,
    which took ``profiled_s`` (the slowest rank's); ``collectives`` is how many its backend ran on rank 0.
    ``tokens`` is a digest of every timed run's generated ids; ``seconds`` each rank's own timed runs, of which
    the measurement keeps, run by run, the slowest rank's.
    """

    kv_bytes: tuple[int, ...]
    communication_s: tuple[float, ...]
    profiled_s: float
    collectives: int
    tokens: tuple[str, ...]
    seconds: tuple[tuple[float, ...], ...] = ()

    @property
    def agree(self) -> bool:
        """Every rank generated rank 0's tokens, in every run."""
        return len(set(self.tokens)) == 1

    @property
    def communication_share(self) -> float:
        """The slowest rank's time in collectives, as a share of the profiled run."""
        return max(self.communication_s) / self.profiled_s if self.profiled_s > 0 else math.nan


@dataclass(frozen=True)
class Split:
    """How a model was split over the ranks of a tensor-parallel run: how they talked, where each computed."""

    backend: str  # gloo, nccl
    devices: tuple[str, ...]  # each rank's, in rank order, as the environment names it: "cpu (model)", "cuda:1 (H100)"

    @property
    def size(self) -> int:
        return len(self.devices)

    def __str__(self) -> str:
        kinds = ", ".join(dict.fromkeys(device.split(" (")[0] for device in self.devices))
        return f"{self.size} ranks by tensor parallelism ({self.backend}, {kinds})"


def split_of(result: BenchmarkRecord) -> Split | None:
    """The ranks a result's model was split over; None where it ran unsplit."""
    found: Split | None = result.addons.get(NAME)
    return found


def ranks_of(m: Measurement | None) -> Ranks | None:
    """What each rank's runs left of a measurement; None where it ran unsplit (or did not run)."""
    found: Ranks | None = None if m is None else m.addons.get(NAME)
    return found


def ranks_to_file(ranks: Ranks | None) -> dict[str, Any] | None:
    """A measurement's ranks as a file keeps them (JSON's types)."""
    return None if ranks is None else dataclasses.asdict(ranks)


def ranks_from_file(saved: Mapping[str, Any] | None) -> Ranks | None:
    """A measurement's ranks as written; an older file's ``identical`` (each rank's own check, which the tokens'
    digests already tell) is dropped, and it kept no rank's own times."""
    if saved is None:
        return None
    values = {k: floats_back(v) for k, v in saved.items() if k != "identical"}
    values["seconds"] = tuple(floats_back(runs) for runs in values.get("seconds", ()))
    return Ranks(**values)


def split_to_file(split: Split | None) -> dict[str, Any] | None:
    """A result's ranks as a file keeps them (JSON's types)."""
    return None if split is None else dataclasses.asdict(split)


def split_from_file(saved: Mapping[str, Any]) -> Split | None:
    """A saved result's ranks: its own record, or where a file of format 3 first kept them, its metadata."""
    found, metadata = saved.get("split"), saved.get("metadata") or {}
    if found is None and "rank_devices" in metadata:
        found = {"backend": metadata["backend"], "devices": metadata["rank_devices"]}
    return None if found is None else Split(found["backend"], tuple(found["devices"]))
