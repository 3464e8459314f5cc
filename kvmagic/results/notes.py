"""The plain-language notes under a result's table: what a reader of the numbers should not miss."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kvmagic.core import stats
from kvmagic.core.addon import addons
from kvmagic.core.deadline import CUT_MARGIN
from kvmagic.core.intervals import speedup_estimate
from kvmagic.core.strategy import REFERENCE
from kvmagic.results.caution import caution_notes
from kvmagic.results.columns import cell, interval
from kvmagic.results.verdict import quality_reference, verdict_lines

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kvmagic.core.config import Config
    from kvmagic.core.spec import BenchSpec
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Pair
    from kvmagic.results.records import Mismatch

__all__ = ["NEAR_TIE", "describe_mismatch", "more_pairs", "notes", "spread_warning"]

NEAR_TIE = 0.05  # a logit gap this small is within the rounding noise of half precision
_ROUNDING = 1e-9  # a speed-up this close to an end of its interval is on it: the two are computed apart
FEW_STEPS = 16  # quality read over fewer forced steps than this is called rough


def notes(result: BenchmarkRecord) -> list[str]:
    """Plain-language remarks a reader of the table should not miss, the most important first: a comparison's
    verdict (what the rounds tell, in the user's terms), what is wrong or surprising, then noise, then the rest (the
    shown table keeps the first few: :func:`~kvmagic.results.shown.brief`)."""
    verdict = verdict_lines(result)
    holding_one = _holding_one(result)
    wrong = [*_partial_notes(result), *_shipped_notes(result), *_mismatch_notes(result), *_below_one(result)]
    wrong += [] if verdict else holding_one
    noise = [*spread_warning([result]), *caution_notes(result), *_few_steps(result)]
    noise += _outside(result)
    rest = [*_stretched_notes(result), *_auto_repeat_notes(result)]
    rest += [*(holding_one if verdict else []), *_addon_notes(result, last=False)]
    rest += [*_quality_notes(result), *_addon_notes(result, last=True)]
    return [*verdict, *wrong, *noise, *rest]


def _addon_notes(result: BenchmarkRecord, *, last: bool) -> list[str]:
    """The add-ons' notes, in the registry's order: those before the centre's last, or (``last``) after them."""
    return [note for addon in addons() if addon.notes_last == last for note in addon.notes(result)]


def _shipped_notes(result: BenchmarkRecord) -> list[str]:
    shipped = result.facts.model_generation_settings
    if not shipped:
        return []
    settings = ", ".join(f"{key}={value!r}" for key, value in shipped.items())
    return [f"the model ships {settings}: turned off here, so its own defaults generate differently"]


def _mismatch_notes(result: BenchmarkRecord) -> list[str]:
    """Where the one other strategy's tokens first differed, in words (the plain run's view has no column for it)."""
    found = []
    for config in result.configs:
        pair = result.only_pair(config)
        if pair is not None and pair.mismatch is not None:
            m, mismatch = pair.mismatch
            shown = result.shown_name
            found.append(f"{config}: {describe_mismatch(mismatch, shown(pair.reference.strategy), shown(m.strategy))}")
    return found


def more_pairs(*results: BenchmarkRecord) -> str:
    """How to take more pairs under the request's stop rule (the first result's: several results share one): -r
    counts them; -r auto stops at its target (--ci-target) or at its cap (--auto-cap), whichever came first for
    the pairs here."""
    spec = results[0].spec
    if spec.repeat != "auto":
        return "raise -r"
    reached = {_reached(spec, pair) for result in results for pair in result.pairs()}
    advice = {True: "lower --ci-target", False: "raise --auto-cap"}
    return " or ".join(advice[way] for way in (False, True) if way in reached) or advice[False]


def spread_warning(results: Sequence[BenchmarkRecord]) -> list[str]:
    """One warning for every strategy whose times vary past :data:`~kvmagic.core.stats.SPREAD_WARNING`, each
    with its spread (and its configuration, in a sweep; its result's model, among several results): one line per
    strategy or result would bury the other notes."""
    said = [(result, which) for result in results for which in [_noisy(result)] if which]
    if not said:
        return []
    noisy = [result for result, _ in said]
    which = ", ".join(f"{r.model} ({which})" for r, which in said) if len(results) > 1 else said[0][1]
    alone = len(results) == 1 and len(results[0].strategies) == 2 and len(results[0].configs) == 1
    speedups = "speed-up" if alone else "speed-ups"
    shared = any(
        str(r.metadata.get("device", "")).startswith("cpu") and r.metadata.get("threads", 1) > 1 for r in noisy
    )
    steadier = ", use --threads 1," if shared else ""  # threads that wait on other work's stall every step
    advice = f"close other work{steadier} or {more_pairs(*noisy)} for more pairs before trusting the {speedups}"
    return [f"warning: times vary (IQR over {stats.SPREAD_WARNING:.0%} of the median) for {which}: {advice}"]


def _noisy(result: BenchmarkRecord) -> str:
    """``uncached 12%, cached 10.3%``: each strategy whose times vary past the warning's bound, with its spread (at
    its configuration, in a sweep); empty where none does."""
    noisy: dict[Config, list[str]] = {}
    for m in result.measurements:
        if m.spread > stats.SPREAD_WARNING:
            noisy.setdefault(m.config, []).append(f"{result.shown_name(m.strategy)} {_past_bound(m.spread)}")
    sweep = len(result.configs) > 1
    return "; ".join(", ".join(names) + (f" at {config}" if sweep else "") for config, names in noisy.items())


def _past_bound(spread: float) -> str:
    """A spread past the warning's bound, in whole percent where that reads past it (12%), else to a tenth (10.3%)."""
    whole = f"{spread:.0%}"
    return whole if round(spread * 100) > round(stats.SPREAD_WARNING * 100) else f"{spread:.1%}"


def describe_mismatch(mismatch: Mismatch, reference: str, differing: str) -> str:
    """Where the ``differing`` strategy's run first left the ``reference`` strategy's first run, in a sentence."""
    sequence = f", sequence {mismatch.sequence + 1} of its batch" if mismatch.sequence else ""
    text = (
        f"generated tokens differ from position {mismatch.position}: {mismatch.expected} in the first {reference} "
        f"run vs {mismatch.actual} in the {differing} run{sequence}"
    )
    if mismatch.margin is not None:
        text += f"; there the {differing} run's top two logits were {mismatch.margin:.4g} apart"
        if mismatch.margin < NEAR_TIE:
            text += " (a near tie: rounding in float16/bfloat16 can flip it)"
    return text


def _quality_notes(result: BenchmarkRecord) -> list[str]:
    """One line on how quality was read (docs/columns.md says what each figure means), and whether every strategy
    kept the full cache's predictions (the figure then has no trade-off to draw); a line for each perplexity ratio
    within the noise of its steps, which must not read as better or worse than the full cache."""
    judged = [m.quality for m in result.measurements if m.quality is not None]
    if not judged:
        return []
    along = "the given text" if judged[0].along == "text" else "its greedy tokens"
    steps = min(q.steps for q in judged)
    said = f"quality: against {quality_reference(result.strategies)}, teacher-forced along {along}, {steps} steps"
    if all(q.lossless for q in judged):
        said += ("; every strategy kept the full cache's predictions (kl_nats 0, top1_agreement 1), so the figure "
                 "draws no trade-off")  # fmt: skip
    said += "".join(f"; {clause}" for addon in addons() if (clause := addon.quality_said(result)))
    return [said, *_ppl_notes(result)]


def _few_steps(result: BenchmarkRecord) -> list[str]:
    """Quality read over fewer than :data:`FEW_STEPS` forced steps: rough figures."""
    steps = [m.quality.steps for m in result.measurements if m.quality is not None and not m.quality.lossless]
    if not steps or min(steps) >= FEW_STEPS:
        return []
    return [f"quality read over only {min(steps)} steps: rough figures; a longer -n, or --quality-text, reads more"]


def _ppl_notes(result: BenchmarkRecord) -> list[str]:
    """Each perplexity ratio within the noise of its steps (its rough interval holds 1), or below 1 beyond it:
    neither reads as predicting better than the full cache."""
    found, reference = [], quality_reference(result.strategies)
    for m in result.measurements:
        q = m.quality
        if q is None or q.ppl_interval is None or q.ppl_ratio == 1:
            continue
        (low, high), name = q.ppl_interval, str(m.strategy) + (f" at {m.config}" if len(result.configs) > 1 else "")
        rough = f"rough 95% interval {interval('ppl_ratio', low, high)} over its {q.steps} steps"
        ratio = cell("ppl_ratio")
        if low <= 1 <= high:
            found.append(f"{name}: ppl_ratio {ratio(q.ppl_ratio)} is within noise ({rough} holds 1): neither "
                         f"better nor worse than {reference}'s")  # fmt: skip
        elif q.ppl_ratio < 1:
            found.append(f"{name}: ppl_ratio {ratio(q.ppl_ratio)} ({rough}): surer of these tokens than "
                         f"{reference}, not closer to its predictions (kl_nats says how far they moved)")  # fmt: skip
    return found


def _partial_notes(result: BenchmarkRecord) -> list[str]:
    facts = result.facts
    if facts.left_out:
        return [_left_out_note(result)]
    if not result.partial:
        return []
    said = f"partial: {facts.stopped} after {len(result.configs)} of {facts.configurations or '?'} configurations"
    found = [f"{said}; the rows shown are complete, the rest were not measured"]
    if facts.stopped.startswith("out of"):
        found.append("to measure the rest: lower -n or -p, or load the model with a smaller --dtype")
    return found


def _left_out_note(result: BenchmarkRecord) -> str:
    """What the deadline left out, why, and the budget that should fit it: the line that says the table is short."""
    facts, budget = result.facts, f"--max-seconds {result.spec.max_seconds:g} s"
    left = facts.left_out
    names = ", ".join(str(c) for c in left[:-1]) + (" and " if len(left) > 1 else "") + str(left[-1])
    they, them = ("they", "them") if len(left) > 1 else ("it", "it")
    if facts.stopped == "cut":
        cause = f"{left[0]} was still running {CUT_MARGIN:.0%} past {budget} and was cut"
    else:
        cause = f"{they} would pass {budget}"
    fitting = "" if facts.fitting_s is None else f"; --max-seconds {facts.fitting_s:g} should fit {them}"
    return f"left out {names}: {cause}{fitting}"


def _stretched_notes(result: BenchmarkRecord) -> list[str]:
    facts = result.facts
    natural = facts.natural_prompt_tokens
    if not (facts.prompt_stretched and natural):
        return []
    lengths = ", ".join(str(n) for n in dict.fromkeys(c.prompt_tokens for c in result.configs))
    return [f"prompt stretched: the prompt's {natural} tokens repeated (or cut) to {lengths} tokens"]


def _intervals(result: BenchmarkRecord) -> list[tuple[str, Pair]]:
    """Each pair of the reference and another strategy, with the name the notes give it."""
    found = []
    for config in result.configs:
        for strategy in [s for s in result.strategies if s != REFERENCE]:
            pair = result.pair(config, strategy)
            if pair is not None:
                found.append(((f"{config} " if len(result.configs) > 1 else "") + result.shown_name(strategy), pair))
    return found


def _holding_one(result: BenchmarkRecord) -> list[str]:
    """Each pair whose 95% interval holds 1: its runs cannot tell which of the two was faster."""
    off = result.shown_name(REFERENCE)
    return [
        f"{name}: the 95% interval {interval('speedup', *pair.interval)} holds 1, so these runs cannot tell whether it "
        f"is faster than {off}: {more_pairs(result)} for more pairs"
        for name, pair in _intervals(result)
        if pair.interval[0] <= 1 <= pair.interval[1]
    ]


def _below_one(result: BenchmarkRecord) -> list[str]:
    """Each pair whose 95% interval lies below 1: the strategy was the slower."""
    off = result.shown_name(REFERENCE)
    return [
        f"{name}: slower than {off}: its 95% interval {interval('speedup', *pair.interval)} lies below 1"
        for name, pair in _intervals(result)
        if pair.interval[1] < 1
    ]


def _outside(result: BenchmarkRecord) -> list[str]:
    """Each pair whose interval leaves out the speed-up shown (a ratio of medians, which the machine's drift between
    pairs can move past what every pair saw)."""
    ratio = cell("speedup")
    return [
        f"{name}: the speed-up {ratio(pair.speedup)} (a ratio of median times) lies outside its 95% interval "
        f"{interval('speedup', low, high)}, drawn from each pair's own ratio (median {ratio(_reach(pair)[0])}): the "
        "machine's speed changed between pairs, which a pair's own ratio cancels, so read the interval"
        for name, pair in _intervals(result)
        for low, high in [pair.interval]
        if math.isfinite(low)
        and not low <= 1 <= high
        and not low * (1 - _ROUNDING) <= pair.speedup <= high * (1 + _ROUNDING)
    ]


def _auto_repeat_notes(result: BenchmarkRecord) -> list[str]:
    spec = result.spec
    if spec.repeat != "auto":
        return []
    found = []
    for pair in result.pairs():
        low, high = pair.interval
        middle, width = _reach(pair)
        verdict = (
            f"within the ±{spec.ci_target:.0%} target"
            if _reached(spec, pair)
            else f"the {spec.auto_cap:g} s cap (--auto-cap) came first"
        )
        found.append(
            f"-r auto: {pair.config} took {len(pair.rounds)} pairs; 95% interval {interval('speedup', low, high)} "
            f"spans ±{width:.1%} around the median pair's {cell('speedup')(middle)}x: {verdict}"
        )
    return found


def _reach(pair: Pair) -> tuple[float, float]:
    """The speed-up -r auto's stop rule measures from, and its interval's half-width as a fraction of it."""
    low, high = pair.interval
    middle = speedup_estimate(pair.reference.seconds, pair.other.seconds)
    return middle, stats.relative_half_width(middle, low, high)


def _reached(spec: BenchSpec, pair: Pair) -> bool:
    """Whether -r auto stopped taking pairs at its target (--ci-target) rather than at its cap (--auto-cap)."""
    return _reach(pair)[1] <= spec.ci_target
