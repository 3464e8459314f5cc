"""Which strategy to choose, from a comparison's own rows: the trade-off frontier, where one strategy overtakes
another as the context grows, how long a context each holds, and a paragraph that says it in words.

- The trade-off frontier (:mod:`kvmagic.core.pareto`): at each configuration, the rows no other row beats on
  speed (median seconds), KV bytes held and quality (``kl_nats``) at once; the table's ``pareto`` column.
- Crossovers: along the sweep through the largest configuration (its prompt lengths, or its numbers of new
  tokens, whichever has more), each strategy's median seconds against the context (prompt + new tokens) is
  fitted (:func:`kvmagic.core.costmodel.fit_polynomial`) on every length but the longest, which is held out to
  check it; a crossover is the context from which one fitted curve stays below another's
  (:func:`kvmagic.core.costmodel.crossing`), searched from the shortest length fitted to the longest held out,
  or, with ``--frontier``, to the shorter of the two strategies' reach. Each crossover is shown beside the check:
  the two strategies' time ratio at the held-out length, predicted and measured.
- The reach: ``--frontier``'s longest context per strategy in the memory free, with its check where one ran.
- Noise: two rows whose times the rounds cannot tell apart (the 95% interval of their per-round time ratio, as
  the table's speed-up interval is taken, holds 1, or there is no interval: one round) are within noise of each
  other: they tie on speed. A row within noise of off is not beaten by it, nor off by it: whether that cache pays
  is open.
"""

from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any

from kvmagic.core.costmodel import Polynomial, crossing, fit_polynomial, lowest
from kvmagic.core.intervals import speedup_interval
from kvmagic.core.pareto import Point, beats, better, on_frontier
from kvmagic.core.strategy import REFERENCE, Strategy
from kvmagic.errors import KVMagicError
from kvmagic.results.columns import WIDTH, cell
from kvmagic.results.measurement import MIN_REPEAT_FOR_SPREAD

if TYPE_CHECKING:
    from kvmagic.core.config import Config
    from kvmagic.core.frontier import Frontier
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement

__all__ = [
    "MIN_LENGTHS",
    "MIN_STRATEGIES",
    "Choice",
    "Crossover",
    "Fit",
    "choice",
    "largest_config",
    "pareto_marks",
    "told_apart",
]

MIN_STRATEGIES = 3  # rows at one configuration before a choice has something to say (off and two more)
MIN_LENGTHS = 4  # three to fit a line (fit_polynomial holds one out to pick a degree), one held out to check it
# Each figure of a Point, in order, in the words for a row that lost on it, tied on it, or whose figure is unknown.
_FIGURES = (("slower", "speed", ""), ("more KV bytes", "KV bytes", "KV bytes not counted"),
            ("lower quality", "quality", "quality not read"))  # fmt: skip


def _point(m: Measurement) -> Point:
    kl_nats = None if m.quality is None else m.quality.kl_nats
    return Point(m.median_s, None if m.kv_bytes is None else float(m.kv_bytes), kl_nats)


def pareto_marks(result: BenchmarkRecord) -> dict[tuple[Config, Strategy], bool]:
    """For each row measured, whether it is on its configuration's trade-off frontier."""
    marks = {}
    for config in result.configs:
        rows = [m for m in result.measurements if m.config == config]
        marks.update({(m.config, m.strategy): mark for m, mark in zip(rows, _on_frontier(rows, _close(rows)))})
    return marks


def _close(rows: list[Measurement]) -> frozenset[frozenset[Strategy]]:
    """The pairs of rows whose times the rounds cannot tell apart."""
    return frozenset(frozenset((a.strategy, b.strategy)) for a, b in combinations(rows, 2) if not told_apart(a, b))


def _undecided(close: frozenset[frozenset[Strategy]]) -> frozenset[frozenset[Strategy]]:
    """The pairs within noise that hold off: whether that cache pays is open, so neither row beats the other (off
    holds no cache, and would otherwise beat every cache the rounds cannot tell from it)."""
    return frozenset(pair for pair in close if REFERENCE in pair)


def _on_frontier(rows: list[Measurement], close: frozenset[frozenset[Strategy]]) -> list[bool]:
    """Each row's mark, its pairs within noise (``close``, by strategy) handed over as the rows' positions."""
    at = {m.strategy: i for i, m in enumerate(rows)}
    positions = {pair: frozenset(at[s] for s in pair) for pair in close}
    undecided = [positions[pair] for pair in _undecided(close)]
    return on_frontier([_point(m) for m in rows], positions.values(), undecided)


@dataclass(frozen=True)
class Fit:
    """One strategy's median seconds against the context, fitted on ``fitted`` and checked at ``checked_at``."""

    strategy: Strategy
    curve: Polynomial
    fitted: tuple[int, ...]
    checked_at: int
    measured_s: float  # its row's median seconds there

    @property
    def error(self) -> float:
        """The fit's error at the held-out length: +0.05 = it predicted 5% more than was measured."""
        return self.curve(self.checked_at) / self.measured_s - 1


@dataclass(frozen=True)
class Crossover:
    """``overtaker`` is slower than ``overtaken`` at the shortest length fitted and faster from ``context`` on."""

    overtaker: Strategy
    overtaken: Strategy
    context: int
    checked_at: int
    predicted_ratio: float  # the overtaker's time over the overtaken's at checked_at, from the fits
    measured_ratio: float  # the same from their rows there

    @property
    def error(self) -> float:
        """The predicted ratio against the measured one at the held-out length: +0.05 = 5% above it."""
        return self.predicted_ratio / self.measured_ratio - 1

    @property
    def agrees(self) -> bool:
        """At the held-out length, the one the fits called faster was the faster measured."""
        return (self.predicted_ratio < 1) == (self.measured_ratio < 1)


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
    close: frozenset[frozenset[Strategy]] = frozenset()  # pairs of rows whose times are within noise of each other

    @property
    def frontier(self) -> list[Strategy]:
        """The strategies on the trade-off frontier at ``config``."""
        return [s for s in self.points if s not in self.beaten_by]

    @property
    def quality_read(self) -> bool:
        """Whether any row's quality was read: where none was, the paragraph says so once, not row by row."""
        return any(point.kl_nats is not None for point in self.points.values())

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
    """Which strategy to choose, from a comparison of :data:`MIN_STRATEGIES` strategies or more."""
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
    points, close = {m.strategy: _point(m) for m in rows}, _close(rows)
    undecided = _undecided(close)
    beaten_by = {
        s: next(
            o
            for o in points
            if o != s and frozenset((s, o)) not in undecided and beats(points[o], point, frozenset((s, o)) in close)
        )
        for s, point, mark in zip(points, points.values(), _on_frontier(rows, close))
        if not mark
    }
    fits, unfitted = _fits(result, config)
    crossovers, searched, falling = _crossovers(fits, result.frontier)
    return Choice(config, points, beaten_by, fits, crossovers, searched, unfitted, result.frontier, falling, close)


def largest_config(result: BenchmarkRecord) -> Config:
    """The configuration a choice speaks of: the longest context, the largest batch among those."""
    return max(result.configs, key=lambda c: (c.prompt_tokens + c.new_tokens, c.batch))


def told_apart(a: Measurement, b: Measurement) -> bool | None:
    """Whether the rounds tell the two rows' times apart: the 95% interval of their per-round time ratio (the rounds
    ran side by side) leaves out 1. None where there is no interval to tell by (fewer than 3 rounds, as in the
    table, or rounds that did not run side by side): such rows are within noise of each other too."""
    if len(a.seconds) != len(b.seconds) or len(a.seconds) < MIN_REPEAT_FOR_SPREAD:
        return None  # the table shows no interval below 3 rounds: neither do the words
    if min((*a.seconds, *b.seconds)) <= 0:
        return None
    found = speedup_interval(a.seconds, b.seconds)
    return None if found is None else not found[0] <= 1 <= found[1]


def _series(configs: list[Config], largest: Config) -> list[Config]:
    """The sweep through the largest configuration: its prompt lengths, or its numbers of new tokens where those
    are more, shortest context first."""
    by_prompt = [c for c in configs if (c.new_tokens, c.batch) == (largest.new_tokens, largest.batch)]
    by_new = [c for c in configs if (c.prompt_tokens, c.batch) == (largest.prompt_tokens, largest.batch)]
    return sorted(by_new if len(by_new) > len(by_prompt) else by_prompt, key=_context)


def _context(config: Config) -> int:
    return config.prompt_tokens + config.new_tokens


def _fits(result: BenchmarkRecord, largest: Config) -> tuple[list[Fit], str]:
    """Each strategy with a row at every length of the series: its fit on all but the longest, checked there."""
    series = _series(result.configs, largest)
    if len(series) < MIN_LENGTHS:
        return [], (
            f"crossovers need a sweep of {MIN_LENGTHS} lengths or more (-p or -n): each strategy's time is fitted "
            "on all but the longest and checked there"
        )
    *fitted, held_out = series
    fits, missing = [], []
    for strategy in result.strategies:
        rows = [result.measurement(strategy, c) for c in series]
        if any(m is None for m in rows[:-1]):
            continue  # it did not run along the sweep: no curve to fit
        last = rows[-1]
        if last is None:
            missing.append(str(strategy))
            continue
        points = [(_context(c), m.median_s) for c, m in zip(fitted, rows) if m is not None]
        fits.append(Fit(strategy, fit_polynomial(points), tuple(_context(c) for c in fitted), _context(held_out),
                        last.median_s))  # fmt: skip
    if missing:
        return fits, f"no row at {held_out} to check the fit of {', '.join(missing)}: its crossovers not shown"
    return fits, ""


def _crossovers(
    fits: list[Fit], reach: Frontier | None
) -> tuple[list[Crossover], tuple[int, int] | None, tuple[Strategy, ...]]:
    """Every pair of fitted strategies whose curves cross between the shortest length fitted and the longest
    checked, or the shorter of their two reaches where the memory frontier gives them; and the strategies whose
    fit falls to no time or less there (a noisy sweep's line can slope down), which cross nothing."""
    if not fits:
        return [], None, ()
    low, held_out = fits[0].fitted[0], fits[0].checked_at
    contexts = {row.strategy: row.max_context for row in reach.rows} if reach else {}
    found, highest, falling = [], held_out, {}
    for a, b in combinations(fits, 2):
        high = max(held_out, min(contexts.get(a.strategy, held_out), contexts.get(b.strategy, held_out)))
        highest = max(highest, high)
        fallen = [fit.strategy for fit in (a, b) if lowest(fit.curve, low, high) <= 0]
        falling.update(dict.fromkeys(fallen))
        if fallen:
            continue
        at = crossing(a.curve, b.curve, low, high)
        if at is None:
            continue
        first, second = (a, b) if a.curve(low) > b.curve(low) else (b, a)
        predicted = first.curve(held_out) / second.curve(held_out)
        found.append(Crossover(first.strategy, second.strategy, at, held_out, predicted,
                               first.measured_s / second.measured_s))  # fmt: skip
    return found, (low, highest), tuple(falling)


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
    reach = {row.strategy: row.max_context for row in found.reach.rows} if found.reach else {}
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
