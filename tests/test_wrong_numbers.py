"""Numbers a one-line slip would make wrong while every formula's own test still passed: tokens that differ only
at the last step, and which side of the quality comparison is the full cache."""

from __future__ import annotations

import math

import torch

from kvmagic.core.strategy import parse
from kvmagic.results.records import first_mismatch
from kvmagic.runner import judge as judging
from kvmagic.runner.judge import Judge
from kvmagic.runner.mismatch import strategy_mismatch
from kvmagic.runner.prompt import encode_prompt

from .conftest import PROMPT


class _Tokens:
    def decode(self, ids: list[int]) -> str:
        return " ".join(map(str, ids))


def test_tokens_that_differ_only_at_the_last_step_are_not_identical() -> None:
    assert first_mismatch([5, 6, 7], [[5, 6, 7], [5, 6, 8]]) == (1, 2)
    runs = [[[5, 6, 7]], [[5, 6, 8]]]  # two rounds of one sequence: the second ends elsewhere
    found = strategy_mismatch(_Tokens(), [5, 6, 7], runs, first=False)
    assert found is not None and (found.run, found.position, found.actual_id) == (1, 2, 8)


def test_a_generated_run_is_compared_to_its_last_token_end_to_end(tiny, monkeypatch) -> None:
    """The runner's own slice of what generate returned reaches the last new token: a run whose last token alone
    differs is reported there."""
    from kvmagic.runner import rounds

    real = rounds.timed_generate
    calls = {"n": 0}

    def last_token_changed(model, inputs, config, devices, **kwargs):  # type: ignore[no-untyped-def]
        output, seconds = real(model, inputs, config, devices, **kwargs)
        calls["n"] += 1
        if calls["n"] == 2:  # the cached run of round one
            with torch.inference_mode():
                output.sequences[:, -1] = (output.sequences[:, -1] + 1) % tiny.model.config.vocab_size
        return output, seconds

    monkeypatch.setattr(rounds, "timed_generate", last_token_changed)
    found = rounds.measure_rounds(tiny, encode_prompt(tiny, PROMPT), new_tokens=3)
    mismatch = found[1].mismatch
    assert mismatch is not None and mismatch.position == 2


def test_quality_sets_the_full_cache_first_whichever_order_the_runs_come_in(tiny, monkeypatch) -> None:
    """KL(full || strategy), by hand: full logits (2, 0) against a strategy's (0, 1) over one forced step give
    0.8808 ln(0.8808 / 0.2689) + 0.1192 ln(0.1192 / 0.7311) = 0.8287 nats; the swapped order would give 1.0068."""
    full, other = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 1.0]])

    def logits(model, inputs, config, devices, ids=None):  # type: ignore[no-untyped-def]
        side = full if config.cache_implementation == "dynamic" else other
        return side, [0] if ids is None else list(ids)

    monkeypatch.setattr(judging, "forced_logits", logits)
    from kvmagic.measure.strategies import resolve

    setups = [resolve(tiny, parse("off")), resolve(tiny, parse("dynamic"))]
    quality = Judge()(tiny, encode_prompt(tiny, PROMPT), 1, setups)
    p, q = 1 / (1 + math.exp(-2)), 1 / (1 + math.exp(1))
    expected = p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))
    assert math.isclose(quality[parse("off")].kl_nats, expected, rel_tol=1e-9) and abs(expected - 0.8287) < 1e-4
    assert quality[parse("dynamic")].kl_nats == 0 and quality[parse("off")].top1_agreement == 0
    assert quality[parse("off")].ppl_ratio > 1  # the forced token 0 is likelier under the full cache
