"""Models side by side as one table: each model's rows (its result's table) under a ``model`` column, the notes
beneath them, and each model's shape where it decides the cache: its layers and which of them slide over a window,
its heads and how many share a key-value head, its head size and dtype, and the KV bytes a token adds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvmagic.addons.models.models_columns import MODEL, SHAPE_COLUMNS
from kvmagic.results.notes import notes as result_notes
from kvmagic.results.notes import spread_warning
from kvmagic.results.report import table as result_table

if TYPE_CHECKING:
    import pandas as pd

    from kvmagic.addons.models.models_record import ModelsRecord
    from kvmagic.core.shape import ModelShape
    from kvmagic.results.benchmark_record import BenchmarkRecord

__all__ = ["models_notes", "models_table", "shape_table", "shape_values"]


def models_table(models: ModelsRecord) -> pd.DataFrame:
    """Every model's rows, in the order the models ran, each led by its ``model``; a column some model's table
    lacks (a prediction, a limit) is empty in the others' rows."""
    import pandas as pd

    frames = []
    for result in models.results:
        frame = result_table(result)
        frame.insert(0, MODEL.name, result.model)
        frames.append(frame)
    filled = [frame for frame in frames if len(frame)] or frames[:1]
    if not filled:
        return pd.DataFrame(columns=[MODEL.name])
    return pd.concat(filled, ignore_index=True)


def shape_values(model: str, shape: ModelShape, dtype: str) -> dict[str, Any]:
    """One model's row of :func:`shape_table`."""
    windows = shape.layer_windows
    sliding = [index for index, window in enumerate(windows) if window is not None]
    sizes = sorted({window for window in windows if window is not None})
    token = shape.kv_bytes_per_position * shape.layers
    full = shape.kv_bytes_per_position * (shape.layers - len(sliding))
    return {
        "model": model,
        "layers": shape.layers,
        "sliding_layers": _ranges(sliding),
        "sliding_window": None if not sizes else sizes[0] if len(sizes) == 1 else ", ".join(map(str, sizes)),
        "heads": shape.heads,
        "kv_heads": shape.kv_heads,
        "group_size": shape.heads // shape.kv_heads,
        "head_dim": shape.head_dim,
        "dtype": dtype,
        "token_kv_bytes": token,
        "windowed_token_kv_bytes": full if sliding and shape.cache_windows else token,
    }


def shape_table(models: ModelsRecord) -> pd.DataFrame:
    """One row per model measured: the sizes its KV cache follows (docs/columns.md)."""
    import pandas as pd

    rows = [_shape_row(models, result.model) for result in models.results if result.model in models.shapes]
    frame = pd.DataFrame(rows, columns=list(SHAPE_COLUMNS))
    frame["sliding_window"] = pd.Series([row["sliding_window"] for row in rows], dtype=object)  # a window, or none
    return frame


def _shape_row(models: ModelsRecord, model: str) -> dict[str, Any]:
    return shape_values(model, models.shapes[model], str(models.result(model).metadata.get("dtype", "")))


def models_notes(models: ModelsRecord) -> list[str]:
    """Each model's shape in a sentence, then the notes of each model's result: one every model has, once; the
    others led by their model's name; one warning for the times that vary, naming each model's; then the models
    left unmeasured."""
    found = [_shape_sentence(_shape_row(models, r.model), models.shapes[r.model]) for r in models.results
             if r.model in models.shapes]  # fmt: skip
    each = [(result.model, _own_notes(result)) for result in models.results]
    shared = [note for note in each[0][1] if all(note in notes for _, notes in each)] if each else []
    found += shared + [f"{model}: {note}" for model, notes in each for note in notes if note not in shared]
    found += spread_warning(models.results)
    if models.left:
        found.append(f"{models.stopped or 'stopped'}: {', '.join(models.left)} not measured")
    return found


def _own_notes(result: BenchmarkRecord) -> list[str]:
    """One model's notes but its warning on times that vary: the models' warnings are said together, as one."""
    alone = spread_warning([result])
    return [note for note in result_notes(result) if note not in alone]


def _shape_sentence(row: dict[str, Any], shape: ModelShape) -> str:
    """``gemma: 18 layers, 15 of them over a sliding window of 512 (layers 0-4, 6-10, 12-16); ...``"""
    layers = f"{row['layers']} layers"
    sliding = len(shape.layer_windows) - shape.layer_windows.count(None)
    if sliding:
        which = f"layers {row['sliding_layers']}" if sliding < row["layers"] else "every layer"
        layers += f", {sliding} of them over a sliding window of {row['sliding_window']} ({which})"
    heads, kv_heads = row["heads"], row["kv_heads"]
    if kv_heads == heads:
        grouping = f"{heads} attention heads, each with its own KV head"
    else:
        groups = f"a group of {heads}" if kv_heads == 1 else f"groups of {row['group_size']}"
        grouping = f"{heads} attention heads share {kv_heads} KV head{'s' * (kv_heads > 1)} ({groups})"
    per_token = f"{row['token_kv_bytes']:,} KV bytes per token"
    if sliding and shape.cache_windows:
        per_token += f", {row['windowed_token_kv_bytes']:,} past the window (the full-attention layers')"
    elif sliding:
        per_token += " at any length: the installed transformers keeps every position of a sliding layer"
    return f"{row['model']}: {layers}; {grouping}, head size {row['head_dim']}; {row['dtype']}: {per_token}"


def _ranges(indices: list[int]) -> str:
    """``[0, 1, 2, 4]`` as ``0-2, 4``."""
    runs: list[list[int]] = []
    for index in indices:
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)
