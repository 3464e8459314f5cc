"""Each strategy's quality at one configuration: teacher-forced along the full cache's continuation, untimed.

The full cache (:data:`~kvmagic.core.strategy.FULL_CACHE`) runs once, greedy (or forced along a given
text), keeping its logits; every strategy then runs forced along the same tokens, and its logits are set
against those step by step (:mod:`kvmagic.core.quality`). The full cache's own figures come from that one
run, so they are exactly 1, 0 and 1. It runs after the timed rounds, outside every timed region, on the
first sequence of the batch (every sequence holds the same prompt).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvmagic.core.quality import Quality, quality_of
from kvmagic.core.strategy import FULL_CACHE, Strategy
from kvmagic.measure.forcing import forced_logits, steps_against
from kvmagic.measure.strategies import Setup, reset_static_cache_state, resolve, strategy_config

if TYPE_CHECKING:
    import torch
    from transformers import BatchEncoding

    from kvmagic.measure.loaded import LoadedModel

__all__ = ["Judge"]


@dataclass(frozen=True)
class Judge:
    """How quality is read: along the full cache's own greedy tokens, or along ``text_ids`` (a given text)."""

    text_ids: tuple[int, ...] | None = None

    @property
    def along(self) -> str:
        return "greedy" if self.text_ids is None else "text"

    def __call__(
        self, loaded: LoadedModel, inputs: BatchEncoding, new_tokens: int, strategies: Sequence[Setup]
    ) -> dict[Strategy, Quality]:
        """Each strategy's :class:`Quality` against the full cache, by name."""
        first = {key: value[:1] for key, value in inputs.items()}
        full = next((s for s in strategies if s.strategy == FULL_CACHE), None) or resolve(loaded, FULL_CACHE)
        full_logits, forced = self._logits(loaded, first, new_tokens, full, self.text_ids)
        found = {}
        # A warm twin's tokens are checked against its cold self.
        for strategy in (s for s in strategies if not s.strategy.warm):
            logits = full_logits if strategy is full else self._logits(loaded, first, new_tokens, strategy, forced)[0]
            found[strategy.strategy] = quality_of(steps_against(full_logits, logits, forced), self.along)
        return found

    @staticmethod
    def _logits(
        loaded: LoadedModel,
        inputs: Mapping[str, torch.Tensor],
        new_tokens: int,
        strategy: Setup,
        ids: Sequence[int] | None,
    ) -> tuple[torch.Tensor, list[int]]:
        if strategy.static:
            reset_static_cache_state(loaded.model)  # sized for this run, not held over from another strategy
        config = strategy_config(loaded, new_tokens if ids is None else len(ids), strategy)
        with strategy.around(loaded.model):  # a press compresses the forced run's prefill as it does a timed one's
            return forced_logits(loaded.model, inputs, config, loaded.devices, ids)
