"""The columns of models side by side, declared once: the ``model`` that leads each row of the one table, and the
sizes a model's KV cache follows, a row per model of ``models.shape_table()``.

Declarations only, so that loading the add-on loads no table: :mod:`~kvmagic.addons.models.models_table` fills them.
"""

from __future__ import annotations

from typing import Any

from kvmagic.results.columns import Column, declare, names

__all__ = ["MODEL", "SHAPES", "SHAPE_COLUMNS", "short_name", "short_names"]


def short_names(models: list[Any]) -> list[str]:
    """Models as the shown table names them: each without the folders or organisation before its last ``/``
    (``google/gemma-3-270m`` as ``gemma-3-270m``) where that still tells them apart, so that the columns the
    notes cite keep their room; the notes, ``--wide`` and every file keep the whole name."""
    named = [str(model) for model in models]
    short = {model: short_name(model) for model in dict.fromkeys(named)}
    return [short[model] for model in named] if len(set(short.values())) == len(short) else named


def short_name(model: str) -> str:
    """A model's name without the folders or organisation before its last ``/``."""
    return model.rstrip("/").rsplit("/", 1)[-1] or model


MODEL = declare(
    Column[Any]("model", "`-m A,B`, models side by side: the model this row measured, each loaded in turn and "
                "released before the next; absent where one model is measured", form="text", shown=True,
                identifies=True, shown_cells=short_names),
)[0]  # fmt: skip
# ``models.shape_table()``: one row per model of models side by side, the sizes its KV cache follows (a table of its
# own, not declared with the benchmark's).
_SHAPES = (
    ("model", "the model", ""),
    ("layers", "decoder layers, each with its own keys and values", ""),
    ("sliding_layers", ("the layers that attend over a sliding window rather than the whole context (numbered from "
     "0)"), ""),
    ("sliding_window", "the window, in positions, of those layers; empty where every layer attends to everything",
     "tokens"),
    ("heads", "attention (query) heads per layer", ""),
    ("kv_heads", "key-value heads per layer: fewer than `heads` under grouped-query attention", ""),
    ("group_size", ("`heads / kv_heads`: query heads that share one key-value head, what grouped-query attention "
     "divides the cache by"), ""),
    ("head_dim", "the size of one head's key (and value)", ""),
    ("dtype", "the element type the keys and values are kept in", ""),
    ("token_kv_bytes", ("KV bytes one more token adds to one sequence's cache, every layer: 2 x `kv_heads` x "
     "`head_dim` x element size x `layers`"), "bytes"),
    ("windowed_token_kv_bytes", ("the same once the context passes the sliding window: the full-attention layers' "
     "alone where the installed transformers keeps a sliding layer to its window (probed), every layer's where it "
     "keeps every position"), "bytes"),
)  # fmt: skip
SHAPES = tuple(Column[Any](name, meaning, unit) for name, meaning, unit in _SHAPES)
SHAPE_COLUMNS = names(SHAPES)
