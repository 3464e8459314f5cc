"""Hand-made measurements for the tests of results: the plain run's pair, or any strategy, at a configuration."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvmagic.core.config import Config
from kvmagic.core.kvbytes import KVSizes
from kvmagic.results.measurement import Measurement


def timed(config: Config | tuple[int, ...], strategy: str, seconds: Sequence[float], **fields: Any) -> Measurement:
    """``strategy``'s measurement at ``config`` with these timed runs (and any other field)."""
    return Measurement(Config(*config), strategy, tuple(seconds), **fields)


def pair(
    config: Config | tuple[int, ...],
    uncached: Sequence[float],
    cached: Sequence[float],
    *,
    off: Mapping[str, Any] | None = None,
    dynamic: Mapping[str, Any] | None = None,
) -> list[Measurement]:
    """The plain run's two measurements at ``config``: the cache off, then on."""
    return [timed(config, "off", uncached, **(off or {})), timed(config, "dynamic", cached, **(dynamic or {}))]


def rounds(config: Config | tuple[int, ...], times: Sequence[tuple[float, float]], **kwargs: Any) -> list[Measurement]:
    """The pair from its rounds, each (uncached, cached) as they ran side by side."""
    return pair(config, [u for u, _ in times], [c for _, c in times], **kwargs)


def table_row(
    m: Measurement, reference: Measurement | None = None, *, sizes: KVSizes | None = None, remark: str = ""
) -> dict[str, Any]:
    """``m``'s row of the table of a comparison that holds it (after ``reference``'s, where given), with the
    model's ``sizes`` and what a reader of ``m``'s row should know (``remark``)."""
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.records import RunFacts
    from kvmagic.results.report import rows
    from kvmagic.results.result import BenchmarkResult

    found = [*([reference] if reference is not None else []), m]
    names = [str(x.strategy) for x in found]
    result = BenchmarkResult("m", found, spec=BenchSpec(cache=tuple(names)), strategies=names,
                             remarks={names[-1]: remark} if remark else {}, facts=RunFacts(kv_sizes=sizes))  # fmt: skip
    return rows(result)[-1]
