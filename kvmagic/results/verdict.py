"""What a comparison's rounds can tell, in at most two lines a user can act on.

The first line is time: which rows are fastest at the largest configuration, ranking only rows the rounds tell
apart (the 95% interval of their per-round time ratio leaves out 1), and about how many rounds would tell the
rest (:func:`~kvmagic.core.intervals.rounds_to_tell`). Rows the rounds cannot tell from off are said to be so,
never beaten by it. The second line is memory and quality: which cache holds the least KV while keeping the full
cache's predictions, and what holds less at a loss. A recommendation ("choose ...") is named only where one row
is both: the fastest, told apart from every other row, and the least KV at no loss. The reasoning behind it
(the trade-off frontier, fits, crossovers, reach) is an add-on's, which reads the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvmagic.core.intervals import rounds_to_tell, speedup_interval
from kvmagic.core.pareto import BYTES_TIE
from kvmagic.core.strategy import FULL_CACHE, REFERENCE, Strategy
from kvmagic.results.columns import cell, interval
from kvmagic.results.measurement import MIN_REPEAT_FOR_SPREAD
from kvmagic.results.pareto_marks import MIN_STRATEGIES, largest_config, told_apart

if TYPE_CHECKING:
    from collections.abc import Iterable

    from kvmagic.core.config import Config
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement

__all__ = ["Verdict", "quality_reference", "verdict", "verdict_lines"]


@dataclass(frozen=True)
class Verdict:
    """What the rounds at ``config`` tell: the rows that cannot be told from the fastest median (``fastest``, that
    row first), the rows told apart as slower, and the caches that hold the least KV at no loss and, at a loss,
    less."""

    config: Config
    sweep: bool  # more than one configuration was measured: the lines say which one they speak of
    rows: dict[Strategy, Measurement]
    fastest: tuple[Strategy, ...]
    slower: tuple[Strategy, ...]
    one_round: bool  # no two rows have an interval to be told apart by (fewer than 3 rounds)
    least_lossless: tuple[Strategy, ...]
    least_lossy: Strategy | None
    quality_read: bool

    @property
    def choose(self) -> Strategy | None:
        """The one row that is the fastest, told apart from every other, and among the least KV at no loss."""
        alone = len(self.fastest) == 1 and self.fastest[0] != REFERENCE and not self.one_round
        return self.fastest[0] if alone and self.fastest[0] in self.least_lossless else None

    def rounds_needed(self, pairs: list[tuple[Strategy, Strategy]]) -> int | None:
        """About how many rounds would tell each of ``pairs`` apart, from this spread; None where some would need
        more than 100."""
        needed = [rounds_to_tell(self.rows[a].seconds, self.rows[b].seconds) for a, b in pairs]
        return None if None in needed else max((n for n in needed if n is not None), default=None)

    def lines(self) -> list[str]:
        return [line for line in (_time_line(self), _memory_line(self)) if line]


def verdict(result: BenchmarkRecord) -> Verdict | None:
    """The verdict of a comparison with :data:`~kvmagic.results.pareto_marks.MIN_STRATEGIES` rows or more at its largest
    configuration; None for another."""
    if not result.configs:
        return None
    config = largest_config(result)
    rows = {m.strategy: m for m in result.measurements if m.config == config}
    if len(rows) < MIN_STRATEGIES:
        return None
    first = min(rows, key=lambda s: rows[s].median_s)
    apart = {s: told_apart(rows[s], rows[first]) for s in rows if s != first}
    lossless, lossy = _least(rows)
    return Verdict(
        config=config,
        sweep=len(result.configs) > 1,
        rows=rows,
        fastest=(first, *(s for s, told in apart.items() if not told)),
        slower=tuple(s for s, told in apart.items() if told),
        one_round=all(told is None for told in apart.values()),
        least_lossless=lossless,
        least_lossy=lossy,
        quality_read=any(m.quality is not None for m in rows.values()),
    )


def verdict_lines(result: BenchmarkRecord) -> list[str]:
    """The verdict's lines, or none where the result is not a comparison of enough strategies."""
    found = verdict(result)
    return found.lines() if found is not None else []


def _least(rows: dict[Strategy, Measurement]) -> tuple[tuple[Strategy, ...], Strategy | None]:
    """The caches holding the least KV bytes (within :data:`~kvmagic.core.pareto.BYTES_TIE`) of those that kept the
    full cache's predictions (every cache, where no quality was read); and the one holding the least of those
    that lost some, where it holds less than they do."""
    counted = {s: m for s, m in rows.items() if s != REFERENCE and m.kv_bytes is not None}
    read = any(m.quality is not None for m in counted.values())
    kept = {s: m for s, m in counted.items() if not read or (m.quality is not None and m.quality.lossless)}
    lossless: tuple[Strategy, ...] = ()
    if kept:
        least = min(m.kv_bytes or 0 for m in kept.values())
        lossless = tuple(s for s, m in kept.items() if (m.kv_bytes or 0) <= least + BYTES_TIE * max(least, 1))
    lost = {s: m for s, m in counted.items() if read and m.quality is not None and not m.quality.lossless}
    if not lost:
        return lossless, None
    cheapest = min(lost, key=lambda s: lost[s].kv_bytes or 0)
    bound = min((kept[s].kv_bytes or 0 for s in lossless), default=None)
    below = bound is None or (lost[cheapest].kv_bytes or 0) < bound * (1 - BYTES_TIE)
    return lossless, cheapest if below else None


def _names(strategies: tuple[Strategy, ...] | list[Strategy]) -> str:
    names = [str(s) for s in strategies]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _against_off(found: Verdict, strategies: tuple[Strategy, ...]) -> str:
    """The rows' speed-ups over off as the table writes them: ``1.54x off`` or ``1.49x-1.54x off``."""
    off = found.rows.get(REFERENCE)
    if off is None:
        return ""
    ratios = sorted(off.median_s / found.rows[s].median_s for s in strategies)
    speedup = cell("speedup")
    if len(strategies) == 1:
        m = found.rows[strategies[0]]
        ends = speedup_interval(off.seconds, m.seconds) if len(off.seconds) == len(m.seconds) else None
        shown = f" {interval('speedup', *ends)}" if ends else ""
        return f"{speedup(ratios[0])}x off's speed{shown}"
    low, high = speedup(ratios[0]), speedup(ratios[-1])
    return f"{low}x off's speed" if low == high else f"{low}x-{high}x off's speed"


def _more(needed: int | None) -> str:
    if needed is None:
        return "their times may be the same: no -r up to 100 would tell, from this spread"
    return f"about -r {needed} would, from this spread"


def _time_line(found: Verdict) -> str:
    at = f"at {found.config}, " if found.sweep else ""
    fastest, first = found.fastest, found.fastest[0]
    if found.one_round:
        rounds = min(len(m.seconds) for m in found.rows.values())
        few = "one round" if rounds == 1 else f"{rounds} rounds"
        return f"{at}{few} cannot rank these strategies: -r {MIN_REPEAT_FOR_SPREAD} or more gives each an interval"
    slower = f"; {_names(found.slower)} slower than {first}" if found.slower else ""
    if fastest == (REFERENCE,):
        return f"{at}fastest: off; every cache strategy here was slower than no cache"
    if REFERENCE in fastest:
        off = found.rows[REFERENCE]
        untold = tuple(s for s in fastest if s != REFERENCE and not told_apart(found.rows[s], off))
        faster = tuple(s for s in fastest if s != REFERENCE and s not in untold)
        needed = found.rounds_needed([(s, REFERENCE) for s in untold])
        said = f"{at}the rounds cannot tell {_names(untold)} from off yet ({_more(needed)})"
        if faster:
            said += f"; {_names(faster)} faster than off ({_against_off(found, faster).replace(' off', '')})"
        return said + slower
    against = _against_off(found, fastest)
    if found.choose is not None:
        loss = " at no quality loss" if found.quality_read else ""
        return f"{at}choose {found.choose}: the fastest ({against}) and the least KV{loss}"
    if len(fastest) == 1:
        return f"{at}fastest: {first}" + (f" ({against})" if against else "") + slower
    needed = found.rounds_needed([(s, first) for s in fastest[1:]])
    return f"{at}fastest: {_names(fastest)} ({against}); the rounds cannot tell them apart ({_more(needed)})" + slower


def _memory_line(found: Verdict) -> str:
    """Which cache holds the least KV at no loss, and what holds less at a loss; empty where the first line already
    named the one to choose and nothing holds less."""
    if found.choose is not None and found.least_lossy is None:
        return ""
    mib = cell("kv_cache_mib")
    said = []
    if found.least_lossless:
        held = min(found.rows[s].kv_bytes or 0 for s in found.least_lossless)
        loss = " at no quality loss" if found.quality_read else ""
        said.append(f"least KV{loss}: {_names(found.least_lossless)} ({mib(held / 2**20)} MiB)")
        if not found.quality_read:
            said[-1] += "; quality not read"
    lossy = found.least_lossy
    if lossy is not None:
        m = found.rows[lossy]
        kl = cell("kl_nats")(m.quality.kl_nats) if m.quality else ""
        if found.least_lossless:
            least = min(found.rows[s].kv_bytes or 0 for s in found.least_lossless)
            ratio = least / max(m.kv_bytes or 0, 1)
            said.append(
                f"less at a loss: {lossy}, {cell('speedup')(ratio)}x less KV at KL {kl} from {_reference(found)}"
            )
        else:
            said.append(f"least KV: {lossy} ({mib((m.kv_bytes or 0) / 2**20)} MiB) at KL {kl}; no cache kept "
                        f"{_reference(found)}'s predictions")  # fmt: skip
    return "; ".join(said)


def _reference(found: Verdict) -> str:
    return quality_reference(found.rows)


def quality_reference(strategies: Iterable[Strategy]) -> str:
    """The full cache, quality's reference, as the table names it: by its row's name where that row is there."""
    return str(FULL_CACHE) if FULL_CACHE in strategies else "the full cache"
