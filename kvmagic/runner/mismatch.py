"""Where runs that should agree generated different tokens, and how close the model's choice was there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvmagic.results.records import Mismatch, StepProfile, first_mismatch

__all__ = ["margin_at", "strategy_mismatch"]


def strategy_mismatch(
    tokenizer: Any, reference: list[int], runs: Sequence[Sequence[list[int]]], *, first: bool
) -> Mismatch | None:
    """Where one strategy's runs first left ``reference`` (the first run's first sequence), every sequence of
    every run checked (a batch repeats one prompt, so all must agree): ``run`` is the round, ``sequence``
    the place in the batch. ``first``: this is the strategy whose first run is the reference."""
    batch = len(runs[0])
    flat = [ids for run in runs for ids in run]
    start = 1 if first else 0
    found = first_mismatch(reference, flat[start:])
    if found is None:
        return None
    which, position = found
    run, sequence = divmod(start + which, batch)
    actual = flat[start + which]
    expected_id = reference[position] if position < len(reference) else -1
    actual_id = actual[position] if position < len(actual) else -1
    return Mismatch(
        run=run,
        position=position,
        expected_id=expected_id,
        actual_id=actual_id,
        expected_token=tokenizer.decode([expected_id]) if expected_id >= 0 else "",
        actual_token=tokenizer.decode([actual_id]) if actual_id >= 0 else "",
        sequence=sequence,
    )


def margin_at(profile: StepProfile, ids: list[int], position: int) -> float | None:
    """The hooked run's top-2 gap at ``position``, if it took the same path as the differing run."""
    if position >= len(profile.margins) or list(profile.generated_ids[: position + 1]) != ids[: position + 1]:
        return None
    return profile.margins[position]
