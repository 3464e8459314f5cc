"""examples/architectures.ipynb runs top to bottom in a real Jupyter kernel: four shipped shapes, cut to a few layers
with random weights, side by side at three lengths; its outputs read as a newcomer should meet them, and the numbers
it saves show the lesson: the cache grows by the KV heads (grouped-query attention divides it by the group size), and
a sliding layer's stops at its window where the installed transformers stops it there."""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbclient
import nbformat
import pytest

from kvmagic.addons.models.models_result import ModelsResult
from kvmagic.addons.random_weights.random_build import shipped_config
from kvmagic.measure.memory import sliding_keep

from .test_notebook import unreadable

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "architectures.ipynb"
MODELS = {  # the table's name -> the shipped config it is cut from
    "qwen1.5-0.5b": "Qwen/Qwen1.5-0.5B",
    "smollm2-135m": "HuggingFaceTB/SmolLM2-135M",
    "gemma-3-270m": "google/gemma-3-270m",
    "qwen2.5-0.5b": "Qwen/Qwen2.5-0.5B",
}
LAYERS = {"gemma-3-270m": 6}  # the others: 2
WINDOW = 128
FLOAT32 = 4


def _data(cell: nbformat.NotebookNode) -> list[dict]:
    return [o["data"] for o in cell.outputs if o["output_type"] in ("execute_result", "display_data")]


def _printed(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o["output_type"] == "stream")


def _position_bytes(name: str) -> int:
    """What one position adds to a model's cache over every layer, by hand from its published config: a key and a
    value vector per KV head and layer."""
    config = shipped_config(MODELS[name]) or {}
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return LAYERS.get(name, 2) * 2 * config["num_key_value_heads"] * head_dim * FLOAT32


def test_architectures_notebook_shows_the_lesson(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = str(NOTEBOOK.parent.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()

    assert unreadable(notebook) == []
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    run, shapes, lesson, speedups = code[1], code[2], code[3], code[4]
    data = _data(run)
    assert len([d for d in data if "image/png" in d]) == 1, "the models' figure"
    (table,) = [d for d in data if "text/html" in d and "<table" in d["text/html"]]
    shown = table["text/plain"].splitlines()
    assert shown[0].split()[:3] == ["model", "prompt_tokens", "new_tokens"]
    assert [line.split()[0] for line in shown[1:13]] == [name for name in MODELS for _ in range(3)]
    assert re.search(r"\(\+\d+ notes: --wide or \.notes\(\)\)$", table["text/plain"])  # three lines, then a count
    windowed = sliding_keep().windowed
    kept = f"stops growing at its window ({WINDOW} positions)" if windowed else "keeps every position"
    assert re.match(rf"transformers [\w.]+: a sliding layer's cache {re.escape(kept)}", _printed(shapes))
    assert len([d for d in _data(lesson) if "image/png" in d]) == 1, "the lesson's figure"
    (pivot,) = [d["text/plain"] for d in _data(speedups)]
    assert pivot.split()[:6] == ["32", "prompt", "tokens", "128", "prompt", "tokens"]
    assert len(re.findall(r"\b\d+\.\d\dx\b", pivot)) == 12

    models = ModelsResult.read_json(tmp_path / "architectures.json")
    assert any(
        "gemma-3-270m: 6 layers, 5 of them over a sliding window of 128 (layers 0-4)" in n for n in models.notes()
    )
    frame = models.to_dataframe()
    assert frame["identical"].all() and frame["prompt_tokens"].tolist() == [32, 128, 512] * 4
    counted = frame["kv_cache_mib"] * 2**20
    assert counted.tolist() == (frame["kv_predicted_mib"] * 2**20).tolist()
    kv = {name: dict(zip(rows["prompt_tokens"], counted[rows.index])) for name, rows in frame.groupby("model")}
    late = {name: (kv[name][512] - kv[name][128]) / (512 - 128) for name in MODELS}  # every row past the window
    early = {name: (kv[name][128] - kv[name][32]) / (128 - 32) for name in MODELS}
    for name in ("qwen1.5-0.5b", "smollm2-135m", "qwen2.5-0.5b"):
        assert late[name] == early[name] == _position_bytes(name)
    gemma = _position_bytes("gemma-3-270m")
    assert late["gemma-3-270m"] == (gemma // 6 if windowed else gemma)  # the full layer's alone, past the window
    assert bool(late["gemma-3-270m"] < early["gemma-3-270m"]) == windowed

    # Equal head size (64) in these three: per attention head and layer, an MHA model's cache is the group size
    # times a grouped-query one's.
    shapes_found = models.shape_table().set_index("model")
    assert shapes_found["group_size"].tolist() == [1, 3, 4, 7]
    grouped = ("qwen1.5-0.5b", "smollm2-135m", "qwen2.5-0.5b")
    heads = {name: LAYERS.get(name, 2) * shapes_found.loc[name, "heads"] for name in grouped}
    per_head = {name: late[name] * shapes_found.loc[name, "group_size"] / heads[name] for name in grouped}
    assert set(per_head.values()) == {2 * 64 * FLOAT32}
