"""``%%kvbench --tp 2`` in a real Jupyter kernel: the launch's table shown as any other, and its result object."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
CELLS = [
    "%load_ext kvmagic",
    "%kvload tiny",
    "%%kvbench --tp 2 -n 4 -w 0 -r 2\nThe KV cache stores each token's keys and values",
    "%%kvbench --tp 2 -n 4 -w 0 -r 2 -o\nThe KV cache stores each token's keys and values",
    "r = _\nprint(type(r).__name__, r.split.size, r.identical, [m.ranks.agree for m in r.measurements])",
    "import os, psutil\nprint('left running:', [p.pid for p in psutil.Process(os.getpid()).children(recursive=True)])",
]


def test_a_split_run_in_a_kernel_shows_the_table_and_returns_the_result(monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel imports this checkout's kvmagic
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    NotebookClient(notebook, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [list(cell.outputs) for cell in notebook.cells]
    assert not [o for cell in outputs for o in cell if o.output_type == "error"]
    table = next(o["data"]["text/html"] for o in outputs[2] if "text/html" in o.get("data", {}))
    for column in ("prompt_tokens", "uncached_s", "cached_s", "speedup", "identical"):
        assert column in table
    assert ">True</td>" in table and "split over 2 ranks by tensor parallelism (gloo, cpu)" in table
    assert "every rank generated the same tokens" in table
    red = [o.text for o in outputs[2] if o.output_type == "stream" and o.name != "stdout"]
    assert red == [] and any(o.output_type == "stream" for o in outputs[2]), red  # ordinary output, not a red box
    progress = "".join(o.get("text", "") for o in outputs[2] if o.output_type == "stream")
    assert progress.startswith("kvbench --tp 2: starting 2 ranks, each loading tiny\n")
    assert "tiny: Exaone4ForCausalLM, 3.87 M parameters, float32 on cpu, split over 2 ranks (gloo)" in progress
    shown = next(o["data"] for o in outputs[3] if o.output_type == "execute_result")
    title, header = shown["text/plain"].splitlines()[:2]  # -o: what it is, then its table
    assert title.startswith("<BenchmarkResult tiny: 48+4 tokens: ") and header.startswith("prompt_tokens new_tokens")
    assert "split over 2 ranks" in shown["text/html"]  # every note is in the page, those past three folded
    printed = "".join(o.get("text", "") for o in outputs[4] if o.output_type == "stream")
    assert printed.strip() == "BenchmarkResult 2 True [True, True]"
    left = "".join(o.get("text", "") for o in outputs[5] if o.output_type == "stream")
    assert left.strip() == "left running: []"
