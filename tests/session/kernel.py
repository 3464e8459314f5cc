"""A real IPython kernel (ipykernel) driven through jupyter_client, one cell at a time, every iopub message kept."""

from __future__ import annotations

import ast
import json
import re
import time
from pathlib import Path
from queue import Empty
from typing import Any

from ipykernel.kernelspec import write_kernel_spec
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from .cells import Kind
from .checks import STILL_S, kernel_problems
from .play import Ledger
from .record import Record
from .widgets import Widgets

__all__ = ["CELL_TIMEOUT_S", "INSIDE", "KernelSession"]

CELL_TIMEOUT_S = 180.0  # a stuck cell fails the sequence instead of hanging the suite
INSIDE = "__import__('tests.session.inside', fromlist=['facts'])"
PROBE = f"{INSIDE}.facts"
# A progress bar naming the first of its configurations ("kvbench 1/3: prompt 56, new 200"): the run is
# measuring, the moment to interrupt it. Earlier, Ctrl-C would land in tqdm building its widget.
STARTED = re.compile(r"\b1/\d+:")


class KernelSession:
    """A kernel started in ``cwd`` with ``env``, for one sequence or more in a row; :meth:`close` shuts it down.

    It keeps the widget state a notebook would hold, across cells, to see how every progress bar ended."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        # This interpreter's own kernel spec, so that no "python3" kernel installed elsewhere is picked instead.
        specs = Path(env["IPYTHONDIR"]) / "kernels"
        if not (specs / "python3").exists():
            write_kernel_spec(specs / "python3", extra_arguments=["--HistoryManager.hist_file=:memory:"])
        self.manager = KernelManager(
            kernel_name="python3", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs)])
        )
        self.manager.start_kernel(env=env, cwd=str(cwd))
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)
        self.widgets = Widgets()
        self.cells = 0
        self.excused: set[str] = set()  # bars already reported, or left red by an interrupt (how it says so)
        self.ledger = Ledger()
        self.every_bar = False
        pid = self.quietly("pass", {"pid": "__import__('os').getpid()"})["user_expressions"]["pid"]
        self.pid = int(pid["data"]["text/plain"])

    def show_every_bar(self, every: bool) -> None:
        """Show the bar on every run (see :func:`tests.session.inside.show_every_bar`), or as shipped."""
        if every != self.every_bar:
            reply = self.quietly(f"{INSIDE}.show_every_bar({every})")
            assert reply["status"] == "ok", reply
            self.every_bar = every

    def slow(self, seconds: float) -> None:
        """Every forward of the loaded model waits ``seconds`` more (see :func:`tests.session.inside.slow_forward`)."""
        reply = self.quietly(f"{INSIDE}.slow_forward({seconds})")
        assert reply["status"] == "ok", reply

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)

    def quietly(self, code: str, expressions: dict[str, str] | None = None) -> dict[str, Any]:
        """Run harness code silently (no history, no ``_``, no execution count); the reply's content."""
        msg_id = self.client.execute(code, silent=True, store_history=False, user_expressions=expressions or {})
        self._drain(msg_id, None, interrupt=False)
        return self._reply(msg_id)

    def facts(self, names: str, outputs: tuple[int, ...], results: str) -> dict[str, Any]:
        """The probe's view of the user's namespace, read through user_expressions (which change nothing)."""
        expression = f"{PROBE}(globals(), {names!r}, {outputs!r}, {results!r})"
        found = self.quietly("pass", {"facts": expression}).get("user_expressions", {}).get("facts", {})
        if found.get("status") != "ok":
            return {"probe": f"{found.get('ename')}: {found.get('evalue')}"}
        return json.loads(ast.literal_eval(found["data"]["text/plain"]))

    def run(self, record: Record) -> None:
        """Execute ``record.cell`` as a notebook would; interrupt it once it has started if it is that kind."""
        started = time.monotonic()
        msg_id = self.client.execute(record.cell.source, store_history=True)
        self._drain(msg_id, record, interrupt=record.cell.kind is Kind.INTERRUPT)
        reply = self._reply(msg_id)
        record.status, record.count = reply.get("status", "no reply"), reply.get("execution_count")
        record.ename = record.ename or reply.get("ename", "")
        record.evalue = record.evalue or reply.get("evalue", "")
        pages = [p.get("data", {}).get("text/plain", "") for p in reply.get("payload", []) if p.get("source") == "page"]
        record.help = "".join(pages)
        record.seconds = time.monotonic() - started
        self.cells += 1

    def problems(self, record: Record) -> list[str]:
        """The cell's outcome, and every progress bar on the page finished."""
        bars = self.widgets.bars()
        if record.expect == "interrupted":
            here = [model for model, style in bars.items() if self.widgets.born.get(model) == self.cells - 1]
            self.excused.update(model for model in here if bars[model] == "danger")
        record.bars = {model: self.widgets.text(model) for model in bars if model not in self.excused}
        self.excused.update(record.bars)  # reported once, by the cell that left it
        problems = kernel_problems(record) + [
            f"a progress bar left unfinished: {text}" for text in record.bars.values()
        ]
        return problems + self._motion(record)

    def _motion(self, record: Record) -> list[str]:
        """A finished run's bars advanced within :data:`STILL_S` of appearing, and ended full."""
        if record.expect not in ("result", "quiet"):
            return []
        problems = []
        for bar in self.widgets.progress(self.cells - 1):
            still, text = self.widgets.still_s(bar), self.widgets.text(bar)
            if still > STILL_S:
                problems.append(f"a progress bar held still for {still:.1f} s after it appeared: {text}")
            if not self.widgets.full(bar):
                problems.append(f"a progress bar ended short of full: {text}")
        return problems

    def _drain(self, msg_id: str, record: Record | None, *, interrupt: bool) -> None:
        """Read the cell's iopub messages until the kernel is idle again."""
        deadline = time.monotonic() + CELL_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                message = self.client.get_iopub_msg(timeout=1.0)
            except Empty:
                if not self.manager.is_alive():
                    raise TimeoutError("the kernel died") from None
                continue
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "status" and content["execution_state"] == "idle":
                return
            self.widgets.hear(message, self.cells)
            if record is not None:
                _keep(record, kind, content)
            if interrupt and _started(kind, content):
                self.manager.interrupt_kernel()
                interrupt = False
        raise TimeoutError(f"the kernel did not finish the cell within {CELL_TIMEOUT_S:.0f} s")

    def _reply(self, msg_id: str) -> dict[str, Any]:
        while True:
            reply = self.client.get_shell_msg(timeout=CELL_TIMEOUT_S)
            if reply["parent_header"].get("msg_id") == msg_id:
                return dict(reply["content"])


def _started(kind: str, content: dict[str, Any]) -> bool:
    """Whether this message shows the run measuring: its progress bar names its first configuration."""
    state = content.get("data", {}).get("state", {}) if kind == "comm_msg" else {}
    return any(isinstance(value, str) and STARTED.search(value.replace("\u2007", " ")) for value in state.values())


def _keep(record: Record, kind: str, content: dict[str, Any]) -> None:
    """Add one iopub message's output to the record."""
    if kind == "stream":
        if content["name"] == "stdout":
            record.stdout += content["text"]
        else:
            record.stderr += content["text"]
    elif kind == "execute_result":
        record.results.append(content["data"].get("text/plain", ""))
    elif kind == "error":
        record.ename, record.evalue = content["ename"], content["evalue"]
        record.tracebacks.append("\n".join(content["traceback"]))
