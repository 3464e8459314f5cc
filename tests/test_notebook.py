"""The example notebook, executed as a user would: a real Jupyter kernel, on the tiny model."""

from __future__ import annotations

import re
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


# 3.9454253349623274: a figure printed as Python holds it, not as a reader reads it (seven significant digits or
# more after the point; a table's 0.009958 has four, whatever its leading zeros)
RAW_FLOAT = re.compile(r"\d\.0*[1-9]\d{5,}")


def unreadable(notebook: nbformat.NotebookNode) -> list[str]:
    """What a newcomer copying the notebook should never meet in its outputs: a traceback, a progress bar left
    red, a float printed with all its digits, a line of text wider than 100 columns."""
    found = [f"red bar: {state}" for state in red_bars(notebook)]
    for cell in (c for c in notebook.cells if c.cell_type == "code"):
        for output in cell.outputs:
            if output.output_type == "error":
                found.append(f"traceback: {output.ename}: {output.evalue}")
            text = output.get("text", "") + output.get("data", {}).get("text/plain", "")
            found += [f"raw float: {line}" for line in text.splitlines() if RAW_FLOAT.search(line)]
            found += [f"wider than 100: {line}" for line in text.splitlines() if len(line) > 100]
    return found


def execute(name: str) -> nbformat.NotebookNode:
    notebook = nbformat.read(EXAMPLES / name, as_version=4)
    NotebookClient(
        notebook, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(EXAMPLES)}}
    ).execute()
    return notebook


def test_kvbench_notebook_reproduces_the_experiment(tiny_kernel_env):
    notebook = execute("kvbench.ipynb")
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert unreadable(notebook) == []
    tables = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert tables, "no table was rendered"
    for column in ("prompt_tokens", "new_tokens", "uncached_s", "cached_s", "speedup", "identical"):
        assert column in tables[0]
    assert ">True</td>" in tables[0]
    assert "<details><summary>how this was measured</summary>" in tables[0]  # the styled table, in a real kernel
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "tiny: Exaone4ForCausalLM" in printed


def test_the_check_finds_what_a_newcomer_should_not_meet() -> None:
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    cell = new_code_cell("result.speedup")
    cell.outputs = [
        new_output("execute_result", {"text/plain": "3.9454253349623274"}, execution_count=1),
        new_output("stream", name="stdout", text="2.77x faster, 0.009958 s\n" + "x" * 101 + "\n"),
        new_output("error", ename="ValueError", evalue="no", traceback=[]),
    ]
    found = unreadable(new_notebook(cells=[cell]))
    assert [item.split(":")[0] for item in found] == ["raw float", "wider than 100", "traceback"]
