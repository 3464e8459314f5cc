"""Where runs that should agree generated different tokens, and how close the model's choice was there."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from kvmagic.results.records import Mismatch, StepProfile, first_mismatch

__all__ = ["batch_mismatches", "find_mismatch", "margin_at", "mismatches_by_condition"]


def batch_mismatches(
    tokenizer: Any, runs: Sequence[str], generated: Sequence[Sequence[list[int]]]
) -> tuple[Mismatch | None, dict[str, Mismatch]]:
    """Every sequence of every run against the first run's first (a batch repeats one prompt, so all must
    agree): the first difference, and each condition's; ``run`` indexes the runs, ``sequence`` the batch."""
    batch = len(generated[0])
    flat = [ids for run in generated for ids in run]
    names = [name for name in runs for _ in range(batch)]

    def located(found: Mismatch | None) -> Mismatch | None:
        if found is None:
            return None
        return dataclasses.replace(found, run=found.run // batch, sequence=found.run % batch)

    first = located(find_mismatch(tokenizer, flat[0], flat, range(1, len(flat))))
    per_condition = mismatches_by_condition(tokenizer, names, flat)
    return first, {name: m for name, found in per_condition.items() if (m := located(found)) is not None}


def mismatches_by_condition(tokenizer: Any, runs: Sequence[str], generated: list[list[int]]) -> dict[str, Mismatch]:
    """Per condition, where its runs first left the reference run's tokens (conditions that agree are absent)."""
    found = {}
    for name in dict.fromkeys(runs):
        indices = [i for i, run in enumerate(runs) if run == name and i]
        mismatch = find_mismatch(tokenizer, generated[0], generated, indices)
        if mismatch is not None:
            found[name] = mismatch
    return found


def find_mismatch(
    tokenizer: Any, reference: list[int], generated: list[list[int]], indices: Sequence[int]
) -> Mismatch | None:
    """The first difference from ``reference`` among the runs at ``indices``; ``run`` indexes ``generated``."""
    found = first_mismatch(reference, [generated[i] for i in indices])
    if found is None:
        return None
    which, position = found
    actual = generated[indices[which]]
    expected_id = reference[position] if position < len(reference) else -1
    actual_id = actual[position] if position < len(actual) else -1
    return Mismatch(
        run=indices[which],
        position=position,
        expected_id=expected_id,
        actual_id=actual_id,
        expected_token=tokenizer.decode([expected_id]) if expected_id >= 0 else "",
        actual_token=tokenizer.decode([actual_id]) if actual_id >= 0 else "",
    )


def margin_at(profile: StepProfile, ids: list[int], position: int) -> float | None:
    """The hooked run's top-2 gap at ``position``, if it took the same path as the differing run."""
    if position >= len(profile.margins) or list(profile.generated_ids[: position + 1]) != ids[: position + 1]:
        return None
    return profile.margins[position]
