"""The sizes of a model that bound its speed and its memory, as arithmetic of either reads them.

Read from a loaded model by kvmagic.measure.shape_probe; here pure data, so the arithmetic that uses it
stays checkable by hand.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

__all__ = ["ModelShape"]


@dataclass(frozen=True)
class ModelShape:
    """The sizes a model's speed and memory depend on; ``windows``: per layer, None = full attention."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    dtype_bytes: int
    weight_bytes: int
    tied_embeddings: bool = False
    windows: tuple[int | None, ...] = ()
    mlp_matrices: int = 3  # gated MLPs (Llama, EXAONE) have gate, up and down; a plain MLP has 2
    max_positions: int | None = None
    cache_windows: bool = True  # whether the installed dynamic cache keeps a sliding layer to its window (probed)

    def __post_init__(self) -> None:
        if self.windows and len(self.windows) != self.layers:
            raise ValueError(f"windows lists {len(self.windows)} layers, the model has {self.layers}")

    @property
    def layer_windows(self) -> tuple[int | None, ...]:
        return self.windows or (None,) * self.layers

    @property
    def matmul_params(self) -> int:
        """Weights every token multiplies through, all layers: q, k, v, o projections and the MLP."""
        attention = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return self.layers * (attention + self.mlp_matrices * self.hidden * self.intermediate)

    @property
    def weights_read(self) -> int:
        """Weight bytes a forward reads: all of them, less an untied input embedding (rows are gathered)."""
        return self.weight_bytes - (0 if self.tied_embeddings else self.vocab * self.hidden * self.dtype_bytes)

    @property
    def kv_bytes_per_position(self) -> int:
        """Keys and values of one position in one layer, at the model's dtype."""
        return 2 * self.kv_heads * self.head_dim * self.dtype_bytes

    def positions(self, length: int) -> int:
        """Positions a dynamic cache holds over all layers when ``length`` are in context: min(length, window)
        per sliding layer where it windows them, else ``length`` per layer."""
        if not self.cache_windows:
            return self.layers * length
        return sum(count * (length if w is None else min(length, w)) for w, count in self._window_counts())

    def attended(self, length: int) -> int:
        """Query-key pairs of a causal forward over ``length`` tokens, all layers: sum over i <= length of c(i)."""
        total = 0
        for window, count in self._window_counts():
            if window is None or length <= window:
                total += count * length * (length + 1) // 2
            else:
                total += count * (window * (window + 1) // 2 + (length - window) * window)
        return total

    def _window_counts(self) -> list[tuple[int | None, int]]:
        return list(Counter(self.layer_windows).items())
