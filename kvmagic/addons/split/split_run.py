"""The ranks of a tensor-parallel run: each rank's view of a measurement, and the views put together.

Every rank runs the same benchmark in lockstep: the same warm-ups, rounds and runs, each timed run started
together and counted as its slowest rank's. What differs between ranks is what each holds (its share of
the KV cache), how long it waited in collectives, and (should a split ever compute differently) its
tokens. After the run the views are put together on every rank alike, so that every rank ends the same
way: the KV cache is the sum of the ranks' shares, the peak memory the fullest rank's, and the tokens are
checked across ranks as each rank checked its own runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kvmagic.addons.split.split_probe import communication_run
from kvmagic.addons.split.split_records import NAME, Ranks, Split, ranks_of
from kvmagic.measure.lockstep import World, everyone, slowest

if TYPE_CHECKING:
    from transformers import BatchEncoding, GenerationConfig

    from kvmagic.core.strategy import Strategy
    from kvmagic.measure.loaded import LoadedModel
    from kvmagic.results.measurement import Measurement
    from kvmagic.results.result import BenchmarkResult
    from kvmagic.runner.rounds import TimedRuns

__all__ = ["merged", "put_together", "rank_view", "tokens_digest", "with_views"]


def tokens_digest(generated: Sequence[Sequence[Sequence[int]]]) -> str:
    """A digest of every run's generated ids (each sequence of each run's batch), to compare across ranks."""
    return hashlib.sha256(json.dumps([list(map(list, run)) for run in generated]).encode()).hexdigest()[:16]


def rank_view(
    loaded: LoadedModel,
    inputs: BatchEncoding,
    config: GenerationConfig,
    generated: Sequence[Sequence[Sequence[int]]],
    kv_bytes: int | None,
    seconds: Sequence[float],
) -> Ranks:
    """This rank's figures for one strategy, its own timed runs' ``seconds`` among them, and one extra run under
    the profiler, after its timed runs."""
    run = communication_run(loaded.model, inputs, config, loaded.devices)
    return Ranks(
        kv_bytes=(kv_bytes or 0,),
        communication_s=(run.communication_s,),
        profiled_s=slowest(run.seconds),
        collectives=run.collectives,
        tokens=(tokens_digest(generated),),
        seconds=(tuple(seconds),),
    )


def with_views(
    loaded: LoadedModel, inputs: BatchEncoding, measurements: list[Measurement], runs: Mapping[Strategy, TimedRuns]
) -> list[Measurement]:
    """Each measurement of a configuration with this rank's view of it (:func:`rank_view`)."""
    views = {m.strategy: rank_view(loaded, inputs, runs[m.strategy].config, runs[m.strategy].generated, m.kv_bytes,
                                   runs[m.strategy].own_s) for m in measurements}  # fmt: skip
    return [dataclasses.replace(m, addons={**m.addons, NAME: views[m.strategy]}) for m in measurements]


def put_together(result: BenchmarkResult, world: World) -> BenchmarkResult:
    """Every rank's ``result`` made one, on every rank: a collective, so every rank calls it."""
    rows = [{"ranks": ranks_of(m), "peak_bytes": m.peak_bytes} for m in result.measurements]
    views = everyone({"device": result.metadata.get("device"), "rows": rows})
    return merged(result, world.backend, views)


def merged(result: BenchmarkResult, backend: str, views: list[dict[str, Any]]) -> BenchmarkResult:
    """``result`` (any rank's) with every rank's ``views`` put together, in rank order."""
    measurements = []
    for index, m in enumerate(result.measurements):
        rows = [view["rows"][index] for view in views]
        parts: list[Ranks] = [row["ranks"] for row in rows]
        ranks = Ranks(
            kv_bytes=tuple(p.kv_bytes[0] for p in parts),
            communication_s=tuple(p.communication_s[0] for p in parts),
            profiled_s=parts[0].profiled_s,
            collectives=parts[0].collectives,
            tokens=tuple(p.tokens[0] for p in parts),
            seconds=tuple(p.seconds[0] for p in parts),
        )
        peaks = [row["peak_bytes"] for row in rows if row["peak_bytes"] is not None]
        kv = None if m.kv_bytes is None else sum(ranks.kv_bytes)
        peak = max(peaks) if peaks else None
        measurements.append(dataclasses.replace(m, addons={**m.addons, NAME: ranks}, kv_bytes=kv, peak_bytes=peak))
    split = Split(backend, tuple(str(view["device"]) for view in views))
    return dataclasses.replace(result, measurements=measurements, addons={**result.addons, NAME: split})
