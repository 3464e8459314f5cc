"""Teacher forcing: a ``generate`` made to follow given tokens, keeping the raw logits of every step.

Any cache strategy runs this way exactly as it runs free (its cache is built and read by ``generate``
as always); only the choice of each next token is taken from it. ``output_logits`` keeps the logits
before any processor, so what is compared is what the model computed, not what forcing made of it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from kvmagic.core.quality import Step
from kvmagic.measure.accelerator import synchronize
from kvmagic.measure.timing import generate_kwargs, model_defaults

if TYPE_CHECKING:
    from transformers import GenerationConfig, PreTrainedModel

__all__ = ["ForcedTokens", "forced_logits", "steps_against"]


class ForcedTokens(LogitsProcessor):
    """Leaves only the forced token possible at each step: step ``i`` is the ``i``-th of ``ids``."""

    def __init__(self, ids: Sequence[int], prompt_tokens: int) -> None:
        self.ids, self.prompt_tokens = list(ids), prompt_tokens

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        forced = torch.full_like(scores, float("-inf"))
        forced[:, self.ids[input_ids.shape[-1] - self.prompt_tokens]] = 0.0
        return forced


def forced_logits(
    model: PreTrainedModel,
    inputs: Mapping[str, torch.Tensor],
    config: GenerationConfig,
    devices: Iterable[torch.device],
    ids: Sequence[int] | None = None,
) -> tuple[torch.Tensor, list[int]]:
    """The first sequence's raw logits at each step (a float32 tensor, steps x vocabulary) and the tokens taken.

    With ``ids``, ``generate`` is forced along them (as many steps as there are ids); without, it runs free,
    greedy, for the config's length. Untimed: it runs outside every timed region."""
    config = copy.deepcopy(config)
    config.return_dict_in_generate, config.output_logits = True, True
    prompt_tokens = inputs["input_ids"].shape[-1]
    processors = LogitsProcessorList([ForcedTokens(ids, prompt_tokens)] if ids is not None else [])
    if ids is not None:
        config.max_new_tokens = config.min_new_tokens = len(ids)
    with torch.inference_mode(), model_defaults(model, config):
        output = model.generate(  # type: ignore[operator]  # torch types Module attributes as Tensor | Module
            **inputs, generation_config=config, logits_processor=processors, **generate_kwargs()
        )
        synchronize(tuple(devices))
    logits = torch.stack([step[0] for step in output.logits]).float()
    return logits, output.sequences[0, prompt_tokens:].tolist()


def steps_against(full: torch.Tensor, logits: torch.Tensor, forced: Sequence[int]) -> list[Step]:
    """Each step's figures for ``logits`` against the full cache's ``full`` (both steps x vocabulary), on the
    ``forced`` tokens: argmax agreement, KL(full || strategy) and each side's loss on the forced token."""
    full_log, log = torch.log_softmax(full.double(), dim=-1), torch.log_softmax(logits.double(), dim=-1)
    terms = full_log.exp() * (full_log - log)
    terms = torch.where(torch.isnan(terms), torch.zeros_like(terms), terms)  # 0 * (-inf - -inf): ruled out by both
    kl = terms.sum(dim=-1).clamp(min=0.0)  # a KL is never negative: below 0 is rounding
    index = torch.tensor(list(forced), device=full.device).unsqueeze(-1)
    full_nll, nll = (-side.gather(-1, index).squeeze(-1) for side in (full_log, log))
    agrees = full.argmax(dim=-1) == logits.argmax(dim=-1)
    rows: Any = zip(agrees.tolist(), kl.tolist(), full_nll.tolist(), nll.tolist())
    return [Step(bool(a), float(k), float(f), float(n)) for a, k, f, n in rows]
