"""Each strategy's quality at one configuration: teacher-forced along the full cache's continuation, untimed.

The full cache (:data:`~kvmagic.core.quality.FULL_CACHE`) runs once, greedy (or forced along a given
text), keeping its logits; every strategy then runs forced along the same tokens, and its logits are set
against those step by step (:mod:`kvmagic.core.quality`). The full cache's own figures come from that one
run, so they are exactly 1, 0 and 1. It runs after the timed rounds, outside every timed region, on the
first sequence of the batch (every sequence holds the same prompt).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvmagic.core.quality import FULL_CACHE, Quality, quality_of
from kvmagic.measure.forcing import forced_logits, steps_against
from kvmagic.measure.strategies import Strategy, reset_static_cache_state, resolve
from kvmagic.runner.rounds import strategy_config

if TYPE_CHECKING:
    import torch
    from transformers import BatchEncoding

    from kvmagic.model.loading import LoadedModel

__all__ = ["Judge"]


@dataclass(frozen=True)
class Judge:
    """How quality is read: along the full cache's own greedy tokens, or along ``text_ids`` (a given text)."""

    text_ids: tuple[int, ...] | None = None

    @property
    def along(self) -> str:
        return "greedy" if self.text_ids is None else "text"

    def __call__(
        self, loaded: LoadedModel, inputs: BatchEncoding, new_tokens: int, strategies: Sequence[Strategy]
    ) -> dict[str, Quality]:
        """Each strategy's :class:`Quality` against the full cache, by name."""
        first = {key: value[:1] for key, value in inputs.items()}
        full = next((s for s in strategies if s.name == FULL_CACHE), None) or resolve(loaded, FULL_CACHE)
        full_logits, forced = self._logits(loaded, first, new_tokens, full, self.text_ids)
        found = {}
        for strategy in (s for s in strategies if not s.warm):  # a warm twin's tokens are checked against its cold self
            logits = full_logits if strategy is full else self._logits(loaded, first, new_tokens, strategy, forced)[0]
            found[strategy.name] = quality_of(steps_against(full_logits, logits, forced), self.along)
        return found

    @staticmethod
    def _logits(
        loaded: LoadedModel,
        inputs: Mapping[str, torch.Tensor],
        new_tokens: int,
        strategy: Strategy,
        ids: Sequence[int] | None,
    ) -> tuple[torch.Tensor, list[int]]:
        if strategy.static:
            reset_static_cache_state(loaded.model)  # sized for this run, not held over from another strategy
        config = strategy_config(loaded, new_tokens if ids is None else len(ids), strategy)
        return forced_logits(loaded.model, inputs, config, loaded.devices, ids)
