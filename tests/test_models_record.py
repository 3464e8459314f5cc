"""Models side by side as data, on injected results (no model loads): the one table, each shape's row and sentence,
the notes shared once, the settings that differ, and the file it is kept in."""

from __future__ import annotations

import pytest

from kvmagic.core.shape import ModelShape
from kvmagic.errors import KVMagicError
from kvmagic.results.models_result import ModelsResult
from kvmagic.results.models_table import shape_values
from kvmagic.results.result import BenchmarkResult

from .records import pair

# 4 layers, the middle two over a window of 16; 8 heads sharing 2 KV heads of 8, float32: 2 * 2 * 8 * 4 = 128 bytes
# a position and layer, 512 a token over all layers, 256 past the window (the two full-attention layers').
SLIDING = ModelShape(4, 64, 128, 8, 2, 8, 512, 4, 0, windows=(None, 16, 16, None))
FULL = ModelShape(
    2, 64, 128, 4, 4, 16, 512, 2, 0
)  # every head its own KV head, float16: 2 * 4 * 16 * 2 = 256 a layer, 512 a token


def _models(stopped: str = "", left: tuple[str, ...] = ()) -> ModelsResult:
    one = BenchmarkResult("org/one", pair((8, 4), [2.0, 2.2, 2.1], [1.0, 1.1, 1.0]), metadata={"dtype": "float32"})
    two = BenchmarkResult("two", pair((8, 4), [3.0, 3.3, 3.1], [1.0, 1.0, 1.1]), metadata={"dtype": "float16"})
    return ModelsResult([one, two], {"org/one": SLIDING, "two": FULL}, stopped, list(left))


def test_the_table_leads_each_models_rows_with_its_name() -> None:
    frame = _models().to_dataframe()
    assert frame["model"].tolist() == ["org/one", "two"] and list(frame.columns[:2]) == ["model", "prompt_tokens"]
    assert frame["speedup"].tolist() == pytest.approx([2.1, 3.1])


def test_a_shape_row_counts_the_sliding_layers_and_the_bytes_a_token_adds() -> None:
    row = shape_values("org/one", SLIDING, "float32")
    assert row == {"model": "org/one", "layers": 4, "sliding_layers": "1-2", "sliding_window": 16, "heads": 8,
                   "kv_heads": 2, "group_size": 4, "head_dim": 8, "dtype": "float32", "token_kv_bytes": 512,
                   "windowed_token_kv_bytes": 256}  # fmt: skip
    unwindowed = shape_values("x", ModelShape(**{**SLIDING.__dict__, "cache_windows": False}), "float32")
    assert unwindowed["windowed_token_kv_bytes"] == 512  # the cache keeps every position of a sliding layer
    plain = shape_values("two", FULL, "float16")
    assert (plain["sliding_layers"], plain["sliding_window"], plain["group_size"]) == ("", None, 1)


def test_the_notes_give_each_shape_then_a_note_all_share_once() -> None:
    notes = _models("interrupted", ("three",)).notes()
    assert notes[:2] == [
        (
            "org/one: 4 layers, 2 of them over a sliding window of 16 (layers 1-2); 8 attention heads share 2 KV "
            "heads (groups of 4), head size 8; float32: 512 KV bytes per token, 256 past the window (the "
            "full-attention layers')"
        ),
        "two: 2 layers; 4 attention heads, each with its own KV head, head size 16; float16: 512 KV bytes per token",
    ]
    assert notes[-1] == "interrupted: three not measured"
    assert not any(note.startswith(("org/one: org/one", "two: two")) for note in notes)


def test_settings_every_model_shares_are_said_once_and_others_per_model() -> None:
    setup = _models().setup()
    assert setup["dtype"] == {"org/one": "float32", "two": "float16"} and setup["repeat"] == 1
    assert repr(_models()) == "<ModelsResult org/one, two: 4 measurements; identical=True>"
    assert repr(_models("interrupted")).endswith("; partial>")


def test_the_file_reads_back_whole_and_refuses_what_it_is_not(tmp_path) -> None:
    models = _models("interrupted", ("three",))
    back = ModelsResult.from_dict(models.to_dict())
    assert back.to_dict() == models.to_dict() and back.shapes == models.shapes and back.left == ["three"]
    with pytest.raises(KVMagicError, match="not a run of several models"):
        ModelsResult.from_dict({"format": "other"})
    with pytest.raises(KVMagicError, match=r"saved by a newer kvmagic \(format 2\): upgrade kvmagic"):
        ModelsResult.from_dict({**models.to_dict(), "version": 2})
