"""``--frontier [check]``: after the timed runs, each strategy's longest context and largest batch in the memory
free, and with ``check`` one cached run at each predicted length that confirms it.

:mod:`~kvmagic.addons.frontier.cache_layout` holds how each strategy keeps keys and values,
:mod:`~kvmagic.addons.frontier.reach` the arithmetic and what a result keeps of it,
:mod:`~kvmagic.addons.frontier.frontier_probe` the probes, :mod:`~kvmagic.addons.frontier.frontier_run` the run
after the timed rounds, :mod:`~kvmagic.addons.frontier.frontier_table` its table and notes.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from kvmagic.addons.frontier.frontier_table import FRONTIER, NAME, frontier_notes, frontier_of
from kvmagic.addons.frontier.reach import FitCheck, Frontier, FrontierRow
from kvmagic.core.addon import AddOn, Field
from kvmagic.core.strategy import Strategy
from kvmagic.errors import KVMagicError
from kvmagic.frontends.option import Option
from kvmagic.results.stored import OLD_NAMES

if TYPE_CHECKING:
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement
    from kvmagic.runner.plan import Plan

__all__ = ["ADDON", "MODES"]

MODES = ("predict", "check")  # the flag alone predicts; ``check`` also runs at each prediction


def _mode(name: str, value: Any) -> str | None:
    """The request's field: a mode, or None for no frontier."""
    if value is not None and value not in MODES:
        raise KVMagicError(f"{{{name}}} is {' or '.join(MODES)} (or None), got {value!r}", name)
    return None if value is None else str(value)


def _word(text: str) -> str:
    """``--frontier check``: the one word it takes."""
    if text not in MODES:  # argparse reads the bare flag's "predict" through here too
        raise argparse.ArgumentTypeError(f"expected nothing or 'check', got {text!r}")
    return text


class _Frontier(AddOn):
    name = NAME
    fields = (Field("frontier", None, _mode),)
    options = (
        Option(("--frontier",), "After measuring, predict for each strategy the longest context and the largest "
               "batch that fit in the memory free on the model's device; --frontier check also runs one cached "
               "generate at the predicted length to confirm it.", "frontier", metavar="check", type=_word, nargs="?",
               const=MODES[0], words=MODES, examples=("", "check"), purpose="scale"),
    )  # fmt: skip
    tables = (
        ("## `--frontier`: `frontier_table(result)` (`FRONTIER_COLUMNS`, kvmagic/addons/frontier/frontier_table.py)",
         FRONTIER),
    )  # fmt: skip
    attributes: ClassVar[Mapping[str, Callable[[Any], Any]]] = {"frontier": frontier_of}

    def used(self, spec: BenchSpec) -> bool:
        return spec.option("frontier") is not None

    def after(self, plan: Plan, measurements: list[Measurement], before: None) -> Frontier | None:
        """The frontier around the largest configuration measured (none where none finished)."""
        from kvmagic.addons.frontier.frontier_run import memory_frontier

        return memory_frontier(plan, measurements) if measurements else None

    def notes(self, record: BenchmarkRecord) -> list[str]:
        return frontier_notes(record)

    def dump(self, data: Frontier | None) -> dict[str, Any]:
        """Each row's and check's strategy by its name."""
        if data is None:
            return {"frontier": None}
        unchecked = {str(s): seconds for s, seconds in data.unchecked.items()}
        return {"frontier": {"rows": _named(data.rows), "checks": _named(data.checks), "free_bytes": data.free_bytes,
                             "unchecked": unchecked}}  # fmt: skip

    def load(self, saved: Mapping[str, Any]) -> Frontier | None:
        found = saved.get("frontier")
        if found is None:
            return None
        bits = (saved.get("spec") or {}).get("kv_bits")  # a file names each strategy without the width it chose
        rows = [FrontierRow(**_read(row, bits)) for row in found["rows"]]
        checks = [FitCheck(**_numbers(_read(check, bits))) for check in found["checks"]]
        unchecked = {Strategy.of(name, bits): seconds for name, seconds in found["unchecked"].items()}
        return Frontier(rows, checks, found["free_bytes"], unchecked)

    def upgrade(self, saved: Mapping[str, Any]) -> dict[str, Any]:
        """Formats 1 and 2 kept the rows as a list under ``frontier`` and the checks under ``frontier_checks``, the
        memory free and the checks not run in the metadata, the plain run's strategies by their old names."""
        metadata = dict(saved.get("metadata", {}))
        free, unchecked = metadata.pop("frontier_free_bytes", math.nan), metadata.pop("frontier_unchecked", {})
        upgraded = {key: value for key, value in saved.items() if key != "frontier_checks"}
        upgraded.update(metadata=metadata, frontier=None)
        if saved.get("frontier"):
            rows, checks = _renamed(saved["frontier"]), _renamed(saved.get("frontier_checks", []))
            skipped = {OLD_NAMES.get(name, name): seconds for name, seconds in unchecked.items()}
            upgraded["frontier"] = {"rows": rows, "checks": checks, "free_bytes": free, "unchecked": skipped}
        return upgraded


def _named(records: list[FrontierRow] | list[FitCheck]) -> list[dict[str, Any]]:
    return [{**dataclasses.asdict(record), "strategy": str(record.strategy)} for record in records]


def _read(record: Mapping[str, Any], bits: int | None) -> dict[str, Any]:
    """A saved row or check, its strategy read at the width the run chose."""
    return {**record, "strategy": Strategy.of(record["strategy"], bits)}


def _renamed(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records of an older format, the plain run's strategies by their current names."""
    return [{**record, "strategy": OLD_NAMES.get(record["strategy"], record["strategy"])} for record in records]


def _numbers(data: Mapping[str, Any]) -> dict[str, Any]:
    """Numbers strict JSON kept as null, back as NaN."""
    return {k: math.nan if v is None else v for k, v in data.items()}


ADDON = _Frontier()
