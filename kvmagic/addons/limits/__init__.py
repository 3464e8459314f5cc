"""``--limits``: each row beside the fastest the device allows, from its probed copy bandwidth and matrix
throughput, and which of the two governs (:mod:`~kvmagic.addons.limits.bounds` holds the arithmetic,
:mod:`~kvmagic.addons.limits.limits_probe` the probes, :mod:`~kvmagic.addons.limits.limits_table` what a result
keeps and shows)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from kvmagic.addons.limits.bounds import Hardware, Limits, StrategyLimit, limits_for
from kvmagic.addons.limits.limits_table import LIMITS_PAIR, LIMITS_ROWS, NAME, Bounds, bounds, limits_notes
from kvmagic.core.addon import AddOn, Field
from kvmagic.core.spec import BenchSpec, flag
from kvmagic.frontends.option import Option

if TYPE_CHECKING:
    from kvmagic.core.shape import ModelShape
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement
    from kvmagic.runner.plan import Plan

__all__ = ["ADDON"]


class _Limits(AddOn):
    name = NAME
    fields = (Field("limits", False, flag),)
    options = (
        Option(("--limits",), "Probe the device's copy bandwidth and matrix throughput first (once per session) and "
               "add each strategy's limit (the most tok/s the device allows), the share of it measured, the speed-up "
               "with both at their limits, and which of the two governs.", "limits", action="store_true",
               examples=("",), purpose="scale"),
    )  # fmt: skip
    row_columns, pair_columns = LIMITS_ROWS, LIMITS_PAIR
    attributes: ClassVar[Mapping[str, Callable[[Any], Any]]] = {
        "hardware": lambda record: None if (kept := bounds(record)) is None else kept.hardware,
        "limits": lambda record: [] if (kept := bounds(record)) is None else list(kept.limits),
    }

    def used(self, spec: BenchSpec) -> bool:
        return bool(spec.option("limits"))

    def before(self, plan: Plan) -> tuple[ModelShape, Hardware]:
        """The model's shape and what its device reaches, probed before any run (once per process per device and
        dtype)."""
        from kvmagic.addons.limits.limits_probe import measure_hardware
        from kvmagic.measure.shape_probe import model_shape

        loaded = plan.loaded
        shape = model_shape(loaded.model)
        return shape, measure_hardware(loaded.device, loaded.model.dtype, shape.hidden)

    def after(self, plan: Plan, measurements: list[Measurement], before: tuple[ModelShape, Hardware]) -> Bounds | None:
        """Each configuration measured against its bound (none where no configuration finished)."""
        shape, hardware = before
        configs = dict.fromkeys(m.config for m in measurements)
        return Bounds(hardware, tuple(limits_for(shape, hardware, *c) for c in configs)) if configs else None

    def notes(self, record: BenchmarkRecord) -> list[str]:
        return limits_notes(record)

    def dump(self, data: Bounds | None) -> dict[str, Any]:
        hardware = None if data is None or data.hardware is None else dataclasses.asdict(data.hardware)
        return {"hardware": hardware, "limits": [] if data is None else [dataclasses.asdict(x) for x in data.limits]}

    def load(self, saved: Mapping[str, Any]) -> Bounds | None:
        hardware, limits = saved.get("hardware"), saved.get("limits") or []
        if hardware is None and not limits:
            return None
        return Bounds(None if hardware is None else Hardware(**_numbers(hardware)), tuple(map(_limits, limits)))


def _numbers(data: Mapping[str, Any]) -> dict[str, Any]:
    """Numbers strict JSON kept as null, back as NaN."""
    return {k: math.nan if v is None else v for k, v in data.items()}


def _limits(data: Mapping[str, Any]) -> Limits:
    values = dict(data)
    for side in ("uncached", "cached"):
        values[side] = StrategyLimit(**_numbers(values[side]))
    if values.get("weights_share") is None:
        values["weights_share"] = math.nan
    return Limits(**values)


ADDON = _Limits()
