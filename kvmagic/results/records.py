"""The records a measurement is made of: where tokens differed, a hooked run; and what a run found out."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvmagic.core.config import Config
from kvmagic.core.kvbytes import KVSizes

__all__ = ["DEADLINE_STOPS", "Mismatch", "RunFacts", "StepProfile", "first_mismatch"]

DEADLINE_STOPS = ("deadline", "cut")  # RunFacts.stopped of a run held to max_seconds: work left out, or a run cut


@dataclass(frozen=True)
class Mismatch:
    """Where one run's generated tokens first left the reference run's (the first uncached one)."""

    run: int  # which of its strategy's runs (its round)
    position: int  # index among the generated tokens
    expected_id: int
    actual_id: int
    expected_token: str = ""
    actual_token: str = ""
    margin: float | None = None  # top-2 score gap of the differing run's strategy at that step
    sequence: int = 0  # which sequence of the run's batch differed

    @property
    def expected(self) -> str:
        """The reference's token there, as a reader can tell it: its text and id, or that its run had ended."""
        return _token(self.expected_token, self.expected_id)

    @property
    def actual(self) -> str:
        return _token(self.actual_token, self.actual_id)


def _token(text: str, token_id: int) -> str:
    if token_id < 0:
        return "no token (its run had ended)"
    part = ", part of a character" if "\ufffd" in text else ""  # a byte-level token that decodes to no character
    return f"{text!r} (id {token_id}{part})"


@dataclass(frozen=True)
class StepProfile:
    """One extra, hooked run of a strategy: what the headline timings cannot show.

    ``step_s[0]`` is the time to first token (prefill, measured from the ``generate`` call);
    ``step_s[i]`` the time from token ``i - 1`` to token ``i``. ``margins[i]`` is the gap
    between the two highest scores at step ``i``. ``peak_bytes`` is the peak memory during
    the run (see :class:`kvmagic.measure.accelerator.PeakMemory`); ``kv_bytes`` what the returned cache held.
    """

    step_s: tuple[float, ...]
    margins: tuple[float, ...]
    generated_ids: tuple[int, ...]
    peak_bytes: int
    kv_bytes: int

    @property
    def ttft_s(self) -> float:
        return self.step_s[0]

    @property
    def tok_s(self) -> float:
        """Decode speed: tokens after the first per second of decoding (NaN for one token)."""
        decode = self.step_s[1:]
        return len(decode) / sum(decode) if decode else math.nan


def first_mismatch(reference: Sequence[int], others: Sequence[Sequence[int]]) -> tuple[int, int] | None:
    """Return ``(which, position)`` of the first token in ``others`` that differs from ``reference``."""
    for which, ids in enumerate(others):
        for position, (want, got) in enumerate(zip(reference, ids)):
            if want != got:
                return which, position
        if len(ids) != len(reference):
            return which, min(len(ids), len(reference))
    return None


@dataclass(frozen=True)
class RunFacts:
    """What a run found out besides its times: its prompt, its plan, why it stopped, what the model holds."""

    prompt_sha256: str = ""
    prompt: str | None = None  # as given (before a chat template or a stretch): what a rerun needs; None in older files
    natural_prompt_tokens: int | None = None  # the prompt as written, before any -p stretched it
    prompt_stretched: bool = False
    configurations: int = 0  # planned; fewer were measured if the run stopped early
    estimated_s: float | None = None  # the run as its warm-up projected it, before its first timed run
    stopped: str = ""  # why configurations were left unmeasured ("interrupted", "out of accelerator memory ...")
    left_out: tuple[Config, ...] = ()  # stopped at the deadline: what it left out, the one it cut first
    fitting_s: float | None = None  # stopped at the deadline: a max_seconds that should fit what it left out
    kv_sizes: KVSizes | None = None  # the KV cache's sizes per layer, as the installed transformers keeps them
    model_generation_settings: dict[str, Any] = field(default_factory=dict)  # what the model ships, turned off

    def setup(self) -> dict[str, Any]:
        """The facts as ``how this was measured`` lists them, the empty ones left out, and the cache's sizes,
        which the model, its dtype and the transformers version already say (a baseline saved before kvmagic
        kept them per layer would differ from every run in them), and the prompt, which its digest says; what was
        left out, as the notes name it."""
        facts = {**dataclasses.asdict(self), "left_out": ", ".join(str(config) for config in self.left_out)}
        unlisted = ("kv_sizes", "prompt")  # the prompt is its digest here: a page of text is no setting
        return {k: v for k, v in facts.items() if k not in unlisted and v not in (None, "", {})}
