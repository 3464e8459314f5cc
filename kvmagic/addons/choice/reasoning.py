"""Which strategy to choose, from a comparison's own rows: the trade-off frontier at the largest configuration,
where one strategy overtakes another as the context grows (:mod:`~kvmagic.addons.choice.crossovers`), how long a
context each holds, and a paragraph that says it in words.

The reach is the memory frontier's (``--frontier``): this is the one add-on that reads another's data, through
the frontier add-on's own type and accessor (:mod:`kvmagic.addons.frontier.reach`,
:func:`kvmagic.addons.frontier.frontier_table.frontier_of`). Which rows are on the trade-off frontier and which are
within noise of each other is the centre's (:mod:`kvmagic.results.pareto_marks`), as the table marks them.
"""

from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvmagic.addons.choice.crossovers import Crossover, Fit, crossovers, fits
from kvmagic.addons.frontier.frontier_table import frontier_of
from kvmagic.core.pareto import Point, beats, better
from kvmagic.core.strategy import REFERENCE, ByStrategy, Strategy
from kvmagic.errors import KVMagicError
from kvmagic.results.columns import WIDTH, cell
from kvmagic.results.pareto_marks import (
    MIN_STRATEGIES,
    Close,
    largest_config,
    marked,
    point,
    undecided,
    within_noise,
)

if TYPE_CHECKING:
    from kvmagic.addons.frontier.reach import Frontier
    from kvmagic.core.config import Config
    from kvmagic.results.benchmark_record import BenchmarkRecord

__all__ = ["Choice", "choice", "paragraph"]

# Each figure of a Point, in order, in the words for a row that lost on it, tied on it, or whose figure is unknown.
_FIGURES = (("slower", "speed", ""), ("more KV bytes", "KV bytes", "KV bytes not counted"),
            ("lower quality", "quality", "quality not read"))  # fmt: skip


@dataclass(frozen=True)
class Choice:
    """Which strategy to choose at ``config``, the largest configuration measured: its rows' figures, which are on
    the trade-off frontier and what beat the others, the fits and crossovers along the sweep through it, and the
    memory frontier's reach where ``--frontier`` predicted one. ``str()`` says it in a paragraph."""

    config: Config
    points: dict[Strategy, Point]  # every strategy measured at config, in the order asked for
    beaten_by: dict[Strategy, Strategy]  # a row off the frontier -> the first row that beats it
    fits: list[Fit]
    crossovers: list[Crossover]
    searched: tuple[int, int] | None  # the contexts searched for crossovers
    unfitted: str  # why there are no fits, or which strategy has none; empty where every one has
    reach: Frontier | None
    falling: tuple[Strategy, ...] = ()  # whose fit falls to no time or less where it was searched: no crossover
    close: Close = frozenset()  # pairs of rows whose times are within noise of each other

    @property
    def frontier(self) -> list[Strategy]:
        """The strategies on the trade-off frontier at ``config``."""
        return [s for s in self.points if s not in self.beaten_by]

    @property
    def quality_read(self) -> bool:
        """Whether any row's quality was read: where none was, the paragraph says so once, not row by row."""
        return any(figures.kl_nats is not None for figures in self.points.values())

    @property
    def fastest(self) -> Strategy:
        return min(self.points, key=lambda s: self.points[s].seconds)

    def __str__(self) -> str:
        """The paragraph, wrapped to the shown table's width."""
        return textwrap.fill(paragraph(self), WIDTH, break_long_words=False, break_on_hyphens=False)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(paragraph(self))}</p>"


def choice(result: BenchmarkRecord) -> Choice:
    """Which strategy to choose, from a comparison of :data:`~kvmagic.results.pareto_marks.MIN_STRATEGIES`
    strategies or more."""
    if not result.configs:
        raise KVMagicError(
            "which strategy to choose needs a comparison: {cache} with two strategies or more beside off", "cache"
        )
    config = largest_config(result)
    rows = [m for m in result.measurements if m.config == config]
    if len(rows) < MIN_STRATEGIES:
        raise KVMagicError(
            f"which strategy to choose needs {MIN_STRATEGIES} strategies measured at {config}, off included; "
            f"{len(rows)} ran there: name more in {{cache}}",
            "cache",
        )
    points, close = ByStrategy({m.strategy: point(m) for m in rows}), within_noise(rows)
    held = undecided(close)
    beaten_by = ByStrategy(
        {
            s: next(
                o
                for o in points
                if o != s and frozenset((s, o)) not in held and beats(points[o], figures, frozenset((s, o)) in close)
            )
            for s, figures, mark in zip(points, points.values(), marked(rows, close))
            if not mark
        }
    )
    fitted, unfitted = fits(result, config)
    reach = frontier_of(result)
    crossed, searched, falling = crossovers(fitted, _longest(reach))
    return Choice(config, points, beaten_by, fitted, crossed, searched, unfitted, reach, falling, close)


def _longest(reach: Frontier | None) -> dict[Strategy, int]:
    """The longest context each strategy holds in the memory free, where the frontier was predicted."""
    return {row.strategy: row.max_context for row in reach.rows} if reach else {}


def paragraph(found: Choice) -> str:
    """The choice in words: what is fastest, what each other row on the trade-off frontier trades for it, what
    is beaten, where one strategy overtakes another (with each check) and how long a context each holds."""
    fastest, points = found.fastest, found.points
    read = found.quality_read
    lead = f"at {found.config}: {fastest} is fastest"
    off = points.get(REFERENCE)
    said: list[str] = []
    if off is not None and fastest != REFERENCE:
        said.append(f"{_times(off.seconds / points[fastest].seconds)} off's speed")
    said += [_quality(points[fastest]) if read else "no row's quality read"] if said or not read else []
    lead += f" ({', '.join(said)})" if said else ""
    ties = [str(s) for s in points if frozenset((s, fastest)) in found.close]
    if ties:
        named = ties[0] if len(ties) == 1 else f"{', '.join(ties[:-1])} and {ties[-1]}"
        lead = lead.replace(" is fastest", " has the fastest median", 1)
        lead += f", but the rounds cannot tell {named} from it"
    others = [s for s in found.frontier if s != fastest]
    if others:  # the fastest median leaves the frontier where a row within its noise beats it on another figure
        where = "beside it" if fastest in found.frontier else "without it"
        lead += f"; on the trade-off frontier {where} (pareto in the table), " + "; ".join(
            _trade(found, s, fastest) for s in others
        )
    sentences = [lead]
    if found.beaten_by:
        sentences.append("off the frontier: " + ", ".join(_beaten(found, s, by) for s, by in found.beaten_by.items()))
    return ". ".join(s[0].upper() + s[1:] for s in [*sentences, _crossing_text(found), _reach_text(found)]) + "."


def _beaten(found: Choice, strategy: Strategy, by: Strategy) -> str:
    """What a row off the frontier lost to the row that beats it, and on which figures the two tie."""
    lost: list[str] = []
    tied: list[str] = []
    unknown: list[str] = []
    noise = frozenset((strategy, by)) in found.close  # a tie on speed that the rounds make, not the medians
    for (worse, figure, unread), edge in zip(_FIGURES, better(found.points[by], found.points[strategy], noise)):
        if edge is None:
            unknown += [unread] if figure != "quality" or found.quality_read else []  # else said once, up front
        elif edge:
            lost.append(worse)
        elif figure != "speed" or not noise:
            tied.append(figure)
    within = ["speed within noise"] if noise else []
    said = [*lost, *within, *([f"as good on {' and '.join(tied)}"] if tied else []), *unknown]
    return f"{strategy} (beaten by {by}: {', '.join(said)})"


def _quality(point: Point) -> str:
    return "quality not read" if point.kl_nats is None else f"KL {cell('kl_nats')(point.kl_nats)}"


def _trade(found: Choice, strategy: Strategy, fastest: Strategy) -> str:
    """What ``strategy`` trades against the fastest: its time, the context it reaches or the KV it holds, its KL."""
    mine, theirs = found.points[strategy], found.points[fastest]
    reach = _longest(found.reach)
    mine_reach, their_reach = reach.get(strategy, 0), reach.get(fastest, 0)
    if mine.kv_bytes != 0 and mine_reach and their_reach and mine_reach != their_reach:
        more = "more" if mine_reach > their_reach else "less"
        ratio = max(mine_reach, their_reach) / min(mine_reach, their_reach)
        held = f"holds {_times(ratio)} {more} context ({mine_reach} tokens)"
    else:
        held = _held(mine.kv_bytes, theirs.kv_bytes)
    joined = " and " if held.startswith("holds") else ", "
    quality = f", {_quality(mine)}" if found.quality_read else ""
    noise = " (within noise)" if frozenset((strategy, fastest)) in found.close else ""
    return f"{strategy} takes {_times(mine.seconds / theirs.seconds)} as long{noise}{joined}{held}{quality}"


def _times(ratio: float) -> str:
    """A ratio as the table writes a speed-up (1.00x, 1.20x, 12.0x)."""
    return cell("speedup")(ratio) + "x"


def _held(mine: float | None, theirs: float | None) -> str:
    """The KV bytes one row holds against another's: as a ratio, or in bytes where the ratio rounds to 1."""
    if mine is None:
        return "its KV not counted"
    if mine == 0:
        return "holds no cache"
    if not theirs:
        return f"holds {cell('kv_cache_mib')(mine / 2**20)} MiB of KV"
    if mine == theirs:
        return "holds as much KV"
    times = _times(max(mine, theirs) / min(mine, theirs))
    apart = times if times != "1.00x" else f"{abs(theirs - mine):.0f} bytes"  # a position or two, of many
    return f"holds {apart} {'less' if mine < theirs else 'more'} KV"


def _crossing_text(found: Choice) -> str:
    """The crossovers along the sweep, each beside its check at the held-out length, or why there are none."""
    if not found.fits or found.searched is None:
        return found.unfitted
    first = found.fits[0]
    fitted, held_out = ", ".join(map(str, first.fitted)), first.checked_at
    errors = [fit.error for fit in found.fits]
    said = (
        f"each strategy's time against the context fitted at {fitted} tokens, checked at {held_out} (the fits were "
        f"{min(errors):+.1%} to {max(errors):+.1%} off its rows): "
    )
    crossings = [
        f"{c.overtaker} overtakes {c.overtaken} from {c.context} tokens (time ratio at {held_out}: predicted "
        f"{cell('speedup')(c.predicted_ratio)}, measured {cell('speedup')(c.measured_ratio)}, {c.error:+.1%}"
        + ("" if c.agrees else f", so {c.overtaken} was the faster there")
        + ")"
        for c in found.crossovers
    ]
    until = f"up to {found.searched[1]} tokens"
    if found.reach is not None and found.reach.rows:
        until = f"within each pair's shorter reach ({until})"
    if crossings:
        said += "; ".join(crossings) + f"; no other crossover {until}"
    else:
        said += f"no strategy overtakes another {until}"
    if found.falling:
        names = ", ".join(map(str, found.falling))
        said += f"; the fit of {names} falls to no time or less within that range, so it predicts no crossover"
    return said + (f"; {found.unfitted}" if found.unfitted else "")


def _reach_text(found: Choice) -> str:
    """How long a context each strategy holds in the memory free, and whether a run there checked it."""
    reach = found.reach
    if reach is None or not reach.rows:
        return "--frontier adds how long a context each holds in the memory free"
    gib = reach.free_bytes / 2**30
    free = f"in the {gib:.3g} GiB free" if gib >= 1 else f"in the {reach.free_bytes / 2**20:.3g} MiB free"
    capped = [row for row in reach.rows if row.limited_by == "positions"]
    limit = f"the model's {max((row.max_context for row in capped), default=0)} positions before memory"
    checks = [f"{check.strategy} {check.error:+.1%}" for check in reach.checks]
    checked = f"; a run there took tensors of {', '.join(checks)} against the prediction" if checks else ""
    if len(capped) == len(reach.rows):
        return f"{free}, every strategy reaches {limit}{checked}"
    held = ", ".join(f"{row.strategy} {row.max_context or 'none'}" for row in reach.rows if row not in capped)
    if capped:
        held += (
            f"; {', '.join(str(row.strategy) for row in capped)} {'reach' if len(capped) > 1 else 'reaches'} {limit}"
        )
    return f"{free}, the longest context each holds, in tokens: {held}" + (
        checked or " (predicted, not run: --frontier check runs each there)"
    )
