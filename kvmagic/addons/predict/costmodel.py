"""A cost model of both strategies from a few short probes: why the cache buys what it buys.

Two curves explain a greedy generation: F(L), one forward pass over L tokens without a cache
(what every uncached step and the cached prefill cost), and D(L), one cached decode step with L
tokens already cached. Uncached generation of N tokens after P costs about sum_{i<N} F(P+i);
cached about F(P) + sum_{1<=i<N} D(P+i). Each curve is the lowest-degree polynomial in L that the
probes support (:func:`kvmagic.core.curves.fit_polynomial`). ``generate`` adds its own work around
every forward (input preparation, logits processing, stopping checks), the same in both strategies:
a constant G per step and C per call, read from a short cached ``generate`` whose forwards hooks
stamp as they start and end.

The probes that time these curves on a device live in :mod:`kvmagic.addons.predict.costmodel_probe`; here the
fitting and summation are pure Python, exactly checkable by hand.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvmagic.core.curves import Polynomial, fit_polynomial

__all__ = ["PROBE_LENGTHS", "PROBE_REPEAT", "CostModel", "Probes", "break_even", "generate_overhead", "probe_lengths"]

PROBE_LENGTHS = 5  # distinct lengths per curve: enough to tell a line from a parabola, held out one at a time
PROBE_REPEAT = 5  # rounds over all lengths; each point fitted is the median of its rounds (Probes)
DECODE_STEPS = 2  # cached decode steps timed per length and round, on the cache a prefill of that length built
OVERHEAD_TOKENS = 10  # new tokens of the hooked cached generate that measures G and C


@dataclass(frozen=True)
class CostModel:
    """Fitted prefill and decode curves, and what a generation costs under each strategy."""

    prefill: Polynomial  # F(L): one uncached forward over L tokens
    decode: Polynomial  # D(L): one cached decode step with L tokens cached
    step_overhead_s: float = 0.0  # G: what generate adds around each forward, in both strategies
    call_overhead_s: float = 0.0  # C: what generate adds once per call (set-up, checks), in both strategies
    probe_s: float = 0.0  # what probing cost

    def generate_seconds(self, prompt_tokens: int, new_tokens: int, *, use_cache: bool) -> float:
        """Predicted time of one greedy generate of ``new_tokens`` after ``prompt_tokens``: C plus its steps."""
        steps = (self.step_seconds(prompt_tokens, i, use_cache=use_cache) for i in range(new_tokens))
        return self.call_overhead_s + sum(steps)

    def step_seconds(self, prompt_tokens: int, index: int, *, use_cache: bool) -> float:
        """Step ``index`` (0: the first) of a generate after ``prompt_tokens``, G included.

        Uncached, step i reprocesses all ``prompt_tokens + i`` tokens, F(P+i); cached, the first step
        is the prefill F(P) and each later one a decode step D(P+i). Negative stretches of a noisy
        fit count as 0.
        """
        curve = self.decode if use_cache and index else self.prefill
        return max(curve(prompt_tokens + index), 0.0) + self.step_overhead_s

    def speedup(self, prompt_tokens: int, new_tokens: int) -> float:
        cached = self.generate_seconds(prompt_tokens, new_tokens, use_cache=True)
        return self.generate_seconds(prompt_tokens, new_tokens, use_cache=False) / cached if cached > 0 else math.nan

    def scaled(self, factor: float) -> CostModel:
        """Every time in the model times ``factor``: the same curves on a machine that much slower."""
        return CostModel(
            Polynomial(tuple(factor * c for c in self.prefill.coefficients)),
            Polynomial(tuple(factor * c for c in self.decode.coefficients)),
            factor * self.step_overhead_s, factor * self.call_overhead_s, self.probe_s,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"prefill": list(self.prefill.coefficients), "decode": list(self.decode.coefficients),
                "step_overhead_s": self.step_overhead_s, "call_overhead_s": self.call_overhead_s,
                "probe_s": self.probe_s}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CostModel:
        return cls(Polynomial(tuple(data["prefill"])), Polynomial(tuple(data["decode"])),
                   float(data.get("step_overhead_s", 0.0)), float(data.get("call_overhead_s", 0.0)),
                   float(data.get("probe_s", 0.0)))  # fmt: skip

    def explain(
        self, prompt_tokens: int, new_tokens: int, *, kv_bytes: int | None, weight_bytes: int | None
    ) -> list[str]:
        """Plain-language reasons for the speed-up at this size, from the fitted curves alone."""
        mib = 1024 * 1024
        curves = f"prefill F(L) = {self.prefill.describe()}; decode step D(L) = {self.decode.describe()}"
        overhead = (
            f"G = {self.step_overhead_s * 1e3:.3g} ms per step and C = {self.call_overhead_s * 1e3:.3g} ms per call"
        )
        notes = [f"cost model: {curves}; generate's own work {overhead}"]
        speedup = self.speedup(prompt_tokens, new_tokens)
        notes.append(
            f"predicted speed-up {speedup:.2f}x at {prompt_tokens}+{new_tokens} tokens; "
            + _break_even_text(self, prompt_tokens)
        )
        length = prompt_tokens + new_tokens - 1
        for name, curve in (("uncached step F", self.prefill), ("cached step D", self.decode)):
            total = curve(length) + self.step_overhead_s
            fixed = curve.coefficients[0] + self.step_overhead_s
            if total > 0:
                share = min(max(fixed / total, 0.0), 1.0)
                kind = "the fixed per-step cost" if share >= 0.5 else "the cost growing with length"
                notes.append(
                    f"at {length} tokens the {name}({length}) + G = {total * 1e3:.3g} ms is {share:.0%} fixed "
                    f"per-step cost: {kind} dominates"
                )
        notes.append(
            "the cache saves only what grows with length: where the fixed per-step cost dominates, both strategies "
            "pay about the same per token and the speed-up stays small; longer prompts and generations raise it"
        )
        if kv_bytes is not None and weight_bytes:
            notes.append(
                f"KV cache at {length} tokens: {kv_bytes / mib:.3g} MiB against {weight_bytes / mib:.3g} MiB of "
                f"weights ({kv_bytes / weight_bytes:.1%}): the memory the cache trades for time"
            )
        return notes


@dataclass(frozen=True)
class Probes:
    """What the probes timed, every round kept, and what each round took as a whole.

    :meth:`typical` fits each point's median round: a typical step, what ``--predict`` sets beside
    measured medians. :meth:`fastest` scales that to the fastest whole round, which a budget counts:
    a load only slows a round, so one that passes during some rounds cannot inflate it, while one that
    lasts slows every round alike and is counted, as it will slow the run. Whole rounds, not each
    point's fastest: a probe of a few milliseconds can slip between the scheduler's turns of other
    work, and would promise a loaded machine's run its quiet speed.
    """

    prefill: dict[int, list[float]]  # F at each length, one timing per round
    decode: dict[float, list[float]]  # D at the middle of the steps timed at each length, every step of every round
    overheads: tuple[tuple[float, float], ...]  # (G, C) of each round's hooked generate
    rounds_s: tuple[float, ...]  # each round's wall time, everything it ran
    probe_s: float = 0.0  # what probing cost

    def typical(self) -> CostModel:
        """Both curves through each point's median round, G and C the median of theirs."""
        return CostModel(
            fit_polynomial([(length, statistics.median(times)) for length, times in self.prefill.items()]),
            fit_polynomial([(length, statistics.median(times)) for length, times in self.decode.items()]),
            step_overhead_s=statistics.median(step for step, _ in self.overheads),
            call_overhead_s=statistics.median(call for _, call in self.overheads),
            probe_s=self.probe_s,
        )

    def fastest(self) -> CostModel:
        """The typical model, every time in it scaled by the fastest round over the median round."""
        return self.typical().scaled(min(self.rounds_s) / statistics.median(self.rounds_s))


def break_even(model: CostModel, prompt_tokens: int, target: float = 1.0, limit: int = 1 << 16) -> int | None:
    """The fewest new tokens for which the predicted speed-up exceeds ``target`` (None within ``limit``)."""
    uncached = cached = model.call_overhead_s
    for i in range(limit):  # step by step: one pass, where summing generate_seconds per length would be quadratic
        uncached += model.step_seconds(prompt_tokens, i, use_cache=False)
        cached += model.step_seconds(prompt_tokens, i, use_cache=True)
        if cached > 0 and uncached / cached > target:
            return i + 1
    return None


def _break_even_text(model: CostModel, prompt_tokens: int) -> str:
    even, double = break_even(model, prompt_tokens), break_even(model, prompt_tokens, 2.0)
    text = f"the cache breaks even from {even} new tokens on" if even is not None else "the cache never breaks even"
    text += f" and passes 2x from {double}" if double is not None else " and never reaches 2x"
    return text + f" (prompt of {prompt_tokens})"


def probe_lengths(low: int, high: int, count: int = PROBE_LENGTHS) -> list[int]:
    """``count`` lengths spread geometrically from ``low`` to ``high``, both included, duplicates dropped."""
    if high <= low:
        return [low]
    ratio = high / low
    return list(dict.fromkeys(round(low * ratio ** (k / (count - 1))) for k in range(count)))


def generate_overhead(taken: float, stamps: Sequence[float]) -> tuple[float, float]:
    """G and C of one ``generate`` that took ``taken`` seconds, from its forwards' start and end stamps.

    ``stamps`` alternate: first forward's start, its end, the next start, ... G is the median time
    from one forward's end to the next one's start (the work around each step); C what is left of
    ``taken`` beyond the forwards and one G per step (set-up and finish, once per call), at least 0.
    """
    starts, ends = stamps[0::2], stamps[1::2]
    if len(starts) < 2 or len(ends) != len(starts):
        raise ValueError("need the start and end of two forwards or more")
    gaps = [start - end for end, start in zip(ends, starts[1:])]
    step = statistics.median(gaps)
    forwards = sum(end - start for start, end in zip(starts, ends))
    return step, max(taken - forwards - len(starts) * step, 0.0)
