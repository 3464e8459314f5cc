"""examples/sweep.ipynb runs top to bottom in a real Jupyter kernel, on tiny at small lengths."""

from __future__ import annotations

import os
from pathlib import Path

import nbclient
import nbformat

from .test_notebook import unreadable

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "sweep.ipynb"


def _outputs(cell) -> list[dict]:
    return [output for output in cell.get("outputs", [])]


def test_sweep_notebook_shows_tables_and_plots(monkeypatch, tmp_path) -> None:
    root = str(NOTEBOOK.parent.parent)
    monkeypatch.setenv("KVMAGIC_MODEL", "tiny")
    monkeypatch.setenv("KVMAGIC_NEW_TOKENS", "2,4")
    monkeypatch.setenv("KVMAGIC_PROMPT_TOKENS", "4-8*2")
    monkeypatch.setenv("KVMAGIC_CACHE", os.environ["KVMAGIC_CACHE"])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert unreadable(notebook) == []
    sweep, prompts, markdown = code[1], code[2], code[3]
    for cell, column in ((sweep, "new_tokens"), (prompts, "prompt_tokens")):
        data = [o["data"] for o in _outputs(cell) if o["output_type"] in ("execute_result", "display_data")]
        images = [d for d in data if "image/png" in d]
        tables = [d for d in data if "text/html" in d and "<table" in d["text/html"]]
        assert len(images) == 1, cell.source
        assert len(tables) == 1 and "speedup" in tables[0]["text/html"] and column in tables[0]["text/html"]
    (table,) = [o["data"]["text/html"] for o in _outputs(prompts) if "text/html" in o.get("data", {})]
    assert "<p>prompt stretched: the prompt&#x27;s" in table and "to 4, 8 tokens" in table  # under the table
    printed = "".join(o.get("text", "") for o in _outputs(markdown) if o["output_type"] == "stream")
    rows = [line for line in printed.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| prompt_tokens | new_tokens |") and len(rows) == 4  # header, rule, 2 rows
    assert "uncached_ttft_s" not in rows[0] and all(len(row) <= 100 for row in rows)  # the short table
