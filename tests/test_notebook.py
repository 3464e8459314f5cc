"""The example notebook, executed as a user would: a real Jupyter kernel, on the tiny model."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def tiny_kernel_env(monkeypatch):
    monkeypatch.setenv("KVMAGIC_MODEL", "tiny")
    # The kernel must import this checkout's kvmagic even where it is not installed.
    monkeypatch.setenv("PYTHONPATH", str(EXAMPLES.parent))


def red_bars(notebook: nbformat.NotebookNode) -> list[dict]:
    """Progress bars the notebook keeps in tqdm's "failed" style: a run that finished must not leave one."""
    widgets = notebook.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return [w["state"] for w in widgets.get("state", {}).values() if w.get("state", {}).get("bar_style") == "danger"]


def execute(name: str) -> nbformat.NotebookNode:
    notebook = nbformat.read(EXAMPLES / name, as_version=4)
    NotebookClient(
        notebook, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(EXAMPLES)}}
    ).execute()
    return notebook


def test_kvbench_notebook_reproduces_the_experiment(tiny_kernel_env):
    notebook = execute("kvbench.ipynb")
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert red_bars(notebook) == []
    tables = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert tables, "no table was rendered"
    for column in ("prompt_tokens", "new_tokens", "uncached_s", "cached_s", "speedup", "identical"):
        assert column in tables[0]
    assert ">True</td>" in tables[0]
    assert "<details><summary>how this was measured</summary>" in tables[0]  # the styled table, in a real kernel
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "tiny: Exaone4ForCausalLM" in printed
