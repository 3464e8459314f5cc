"""The budget as a deadline: what each run to come should take, judged from the runs this cell has made.

A probe of one moment is wrong by large factors on a machine with other work running, in both directions;
the runs a cell has just made say best how the machine runs now. So every run to come is projected from the
latest runs seen (the warm-up or a short probe only until timed runs exist), work projected past the deadline
is not started, and a run that overruns the deadline by :data:`CUT_MARGIN` is cut. Pure arithmetic: no torch,
no clock; the runner keeps the time.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvmagic.core.config import Config
from kvmagic.core.strategy import Strategy
from kvmagic.errors import KVMagicError

__all__ = [
    "CUT_MARGIN", "FAR_PAST", "LATEST", "Seen", "config_seconds", "cut_seconds", "fits", "fitting_budget",
    "format_seconds", "nothing_finished", "prefill_seconds", "refusal", "run_seconds", "shortest_first",
]  # fmt: skip

# Before any timed run the projection rests on the warm-up (or a two-token probe) alone, which a load that comes or
# goes can put far off (benchmarks/deadline.py). Only a projection this many times past the budget refuses up
# front; anything less starts, and the runs it makes decide.
FAR_PAST = 10.0
CUT_MARGIN = 0.2  # a run still going this share of the budget past the deadline is cut
LATEST = 3  # the latest runs of a kind say how the machine runs now: their median, so that one slow run does not
STEP_FLOOR = 0.01  # a cached step counts as at least this share of a forward over the prompt (noise can say less)


@dataclass(frozen=True)
class Seen:
    """One ``generate`` this run has made (a warm-up, a probe, a timed run) and its seconds."""

    strategy: Strategy
    config: Config  # its prompt, its new tokens and its batch
    seconds: float
    timed: bool = False  # a timed run: once some exist, the warm-ups and probes no longer say how the machine runs


def _latest(seen: Sequence[Seen], kind: Callable[[Seen], bool]) -> list[Seen]:
    """The latest :data:`LATEST` runs of a ``kind``, timed ones only where there are some (a warm-up is a probe of a
    moment, and carries its first call's costs); read from the end, so that a long run's every projection stays
    cheap."""
    timed: list[Seen] = []
    untimed: list[Seen] = []
    for run in reversed(seen):
        if kind(run):
            (timed if run.timed else untimed).append(run)
            if len(timed) == LATEST:
                break
    return timed or untimed[:LATEST]


def shortest_first(configs: Sequence[Config]) -> list[Config]:
    """The configurations in the order to measure them: the least work first, so that what fits is measured
    before what does not, and each run is projected from shorter ones. Work counts the positions an uncached run
    computes (each step a forward over the whole sequence) in every sequence of the batch; ties keep their order."""

    def work(config: Config) -> int:
        prompt_tokens, new_tokens, batch = config
        return batch * (new_tokens * prompt_tokens + new_tokens * (new_tokens - 1) // 2)

    return sorted(configs, key=work)


def _forwards(prompt_tokens: int, new_tokens: int) -> float:
    """How many forwards over ``prompt_tokens`` an uncached run of ``new_tokens`` costs, each step's forward
    taken to grow in proportion to its sequence: F(P + i) = F(P) (P + i) / P."""
    return new_tokens + new_tokens * (new_tokens - 1) / (2 * prompt_tokens)


def prefill_seconds(seen: Sequence[Seen], prompt_tokens: int) -> float | None:
    """F(P), one forward over ``prompt_tokens`` of one sequence: the median over the latest uncached runs at that
    prompt length (:func:`_latest`), each scaled down to one forward (:func:`_forwards`); where none ran at it, the
    latest at any length, scaled in proportion to the length (the safe side for a longer prompt); where none ran
    uncached, the latest runs of any strategy, each step of which costs at most a forward. None: nothing ran
    yet."""
    latest = _latest(seen, lambda s: not s.strategy.caches and s.config.prompt_tokens == prompt_tokens)
    latest = latest or _latest(seen, lambda s: not s.strategy.caches)
    if latest:
        estimates = [s.seconds / (s.config.batch * _forwards(*s.config[:2])) for s in latest]
    else:
        latest = _latest(seen, lambda s: True)
        estimates = [s.seconds / (s.config.batch * s.config.new_tokens) for s in latest]
    if not latest:
        return None
    return statistics.median(f * prompt_tokens / s.config.prompt_tokens for f, s in zip(estimates, latest))


def _step_seconds(seen: Sequence[Seen], strategy: Strategy) -> float | None:
    """A cached step of ``strategy`` after the prefill, per sequence: the median over its latest runs of two
    tokens or more of what each took past its prefill, per step (each at least :data:`STEP_FLOOR` of the
    prefill)."""
    mine = _latest(seen, lambda s: s.strategy == strategy and s.config.new_tokens > 1)
    steps = []
    for s in mine:
        prompt_tokens, new_tokens, batch = s.config
        prefill = prefill_seconds(seen, prompt_tokens) or 0.0
        steps.append(max((s.seconds / batch - prefill) / (new_tokens - 1), STEP_FLOOR * prefill))
    return statistics.median(steps) if steps else None


def run_seconds(seen: Sequence[Seen], strategy: Strategy, config: Config) -> float | None:
    """Seconds one ``generate`` of ``strategy`` at ``config`` should take, as the runs ``seen`` say the machine
    runs now (None: nothing ran yet). Uncached, its forwards (:func:`_forwards`); cached, the prefill and then
    steps as its own latest runs took them (a forward over the prompt each, where it has none). A batch counts
    as that many sequences: a first, conservative approximation (a batch shares each step's fixed costs)."""
    prompt_tokens, new_tokens, batch = config
    prefill = prefill_seconds(seen, prompt_tokens)
    if prefill is None or new_tokens < 1:
        return None if prefill is None else 0.0
    if not strategy.caches:
        return batch * prefill * _forwards(prompt_tokens, new_tokens)
    step = _step_seconds(seen, strategy)
    return batch * (prefill + (new_tokens - 1) * (prefill if step is None else step))


def config_seconds(
    seen: Sequence[Seen], config: Config, strategies: Sequence[Strategy], *, rounds: int, first_tokens: int
) -> float | None:
    """One configuration's work: ``rounds`` runs of each strategy, then ``first_tokens`` one-token runs of each
    (its time to first token). None: nothing ran yet."""
    one = [run_seconds(seen, s, config) for s in strategies]
    first = [run_seconds(seen, s, config._replace(new_tokens=1)) for s in strategies]
    if any(seconds is None for seconds in [*one, *first]):
        return None
    return rounds * math.fsum(s or 0.0 for s in one) + first_tokens * math.fsum(s or 0.0 for s in first)


def fits(spent: float, needed: float, max_seconds: float, *, measured: bool) -> bool:
    """Whether work projected to take ``needed`` seconds, started ``spent`` seconds into the run, ends within
    ``max_seconds`` (0: no limit). Before any timed run (``measured`` false) the projection rests on the warm-up
    alone, which a busy machine can put far off either way: then only a projection :data:`FAR_PAST` times past
    the budget is held back."""
    if not max_seconds:
        return True
    return spent + needed <= max_seconds * (1.0 if measured else FAR_PAST)


def cut_seconds(max_seconds: float) -> float | None:
    """When a run still going is cut, in seconds from the start: the deadline and its margin (None: no limit)."""
    return max_seconds * (1 + CUT_MARGIN) if max_seconds else None


def fitting_budget(needed: float) -> float:
    """A ``max_seconds`` that would fit a run projected to take ``needed`` seconds in all, with the cut's margin
    as room for a slower moment, rounded up to two significant digits."""
    room = needed * (1 + CUT_MARGIN)
    if room <= 0:
        return 0.0
    unit = 10.0 ** (math.floor(math.log10(room)) - 1)
    return math.ceil(room / unit - 1e-9) * unit


def refusal(config: Config, needed: float, max_seconds: float) -> KVMagicError:
    """Why a run is refused before it starts: even its shortest configuration is projected far past the budget."""
    return KVMagicError(
        f"{config} would take about {format_seconds(needed)}, over {FAR_PAST:g} times {{max_seconds}} "
        f"{format_seconds(max_seconds)}: raise it or lower {{new_tokens}}, {{prompt_tokens}} or {{repeat}}",
        *("max_seconds", "new_tokens", "prompt_tokens", "repeat"),
    )


def nothing_finished(config: Config, max_seconds: float, needed: float | None, *, cut: bool) -> KVMagicError:
    """Why a run returns nothing: its first configuration was cut past the deadline, or its rounds would pass it;
    with the budget that should fit it where the runs made project one (``needed`` seconds in all)."""
    what = "ran past it and was cut" if cut else "would pass it"
    fitting = "raise it" if needed is None else f"{{max_seconds}} {fitting_budget(needed):g} should fit it"
    return KVMagicError(
        f"nothing finished within {{max_seconds}} {format_seconds(max_seconds)}: {config} {what}; {fitting}, or "
        "lower {new_tokens}, {prompt_tokens} or {repeat}",
        *("max_seconds", "new_tokens", "prompt_tokens", "repeat"),
    )


def format_seconds(seconds: float) -> str:
    """Seconds as a message says them: in hours or minutes where they run that long."""
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.3g} s"
