"""A real terminal IPython, 100 columns wide, driven through pexpect: typed line by line, Ctrl-C when asked.

IPython runs with ``--simple-prompt`` (plain ``input()``, no prompt_toolkit redrawing the line), so what
comes back is exactly what the session prints; TERM=dumb shows help without a pager. Each line is typed
once the prompt for it is on the screen, so the echo and the output arrive in the order a user sees.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pexpect

from .cells import Kind
from .checks import BAR, COLUMNS, terminal_problems
from .kernel import CELL_TIMEOUT_S, INSIDE, PROBE, STARTED
from .play import Ledger
from .record import Record, rendered

__all__ = ["TerminalSession"]

PROMPT = re.compile(r"\nIn \[(\d+)\]: ")
CONTINUATION = re.compile(r"\.\.\.: ")
TYPING_TIMEOUT_S = 30.0  # for the prompt of the next line to come back: no cell runs meanwhile


class TerminalSession:
    """A terminal IPython, for one sequence or more in a row; :meth:`close` ends it."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        every_bar = f"--InteractiveShellApp.exec_lines={[f'{INSIDE}.show_every_bar()']}"
        arguments = ["-m", "IPython", "--simple-prompt", "--no-banner", "--colors=nocolor",
                     "--HistoryManager.hist_file=:memory:", every_bar]  # fmt: skip
        env = {**env, "TERM": "dumb", "COLUMNS": str(COLUMNS), "LINES": "50"}
        self.child = pexpect.spawn(
            sys.executable, arguments, env=env, cwd=str(cwd), dimensions=(50, COLUMNS), encoding="utf-8",
            codec_errors="replace", timeout=CELL_TIMEOUT_S,
        )  # fmt: skip
        self.child.expect(PROMPT)
        self.count = int(self.child.match.group(1))
        self.ledger = Ledger()
        self.pid = self.child.pid

    def close(self) -> None:
        """End it by signal, not by typing ``exit``: a session that lost its namespace has no ``exit`` left."""
        self.child.close(force=True)

    def _type(self, source: str) -> str:
        """Type a cell line by line, each once its prompt is drawn; what was drawn before the last line."""
        lines, drawn = source.split("\n"), ""
        self.child.send(lines[0] + "\r")
        for line in lines[1:]:
            self.child.expect(CONTINUATION, timeout=TYPING_TIMEOUT_S)
            drawn += self.child.before + self.child.after
            self.child.send(line + "\r")
        return drawn

    def run(self, record: Record) -> None:
        """Type ``record.cell`` and the blank lines that end it; Ctrl-C once it has printed if it is an
        interrupt cell; read up to the next prompt."""
        started, record.count = time.monotonic(), self.count
        drawn, output = self._type(record.cell.source), ""
        interrupt, echo = record.cell.kind is Kind.INTERRUPT, True
        while True:
            if echo:  # the echo of the line just typed is the user's, not the cell's output
                self.child.expect("\n", timeout=TYPING_TIMEOUT_S)
                drawn, output, echo = drawn + output + self.child.before + self.child.after, "", False
            index = self.child.expect([CONTINUATION, PROMPT, BAR, *([STARTED] if interrupt else [])])
            output += self.child.before + self.child.after
            if index == 0:  # not complete yet: one more blank line
                self.child.send("\r")
                echo = True
            elif index == 2:  # a bar drawn: when, and how far
                record.marks.append((time.monotonic() - started, self.child.match.group(0)))
            elif index == 3:
                self.child.sendintr()
                interrupt = False
            else:
                break
        self.count = int(self.child.match.group(1))
        # The terminal echoes Ctrl-C as ^C after whatever the line held: the terminal's, not the cell's.
        record.stdout = output.removesuffix(self.child.after).replace("^C", "")
        record.screen = drawn + record.stdout
        screen = "\n".join(rendered(record.stdout))
        shown = re.search(rf"^Out\[{record.count}\]:(.*)", screen, re.MULTILINE | re.DOTALL)
        record.results = [shown.group(1).strip()] if shown else []
        record.status = "done"
        record.seconds = time.monotonic() - started

    def problems(self, record: Record) -> list[str]:
        return terminal_problems(record)

    def slow(self, seconds: float) -> None:
        """Every forward of the loaded model waits ``seconds`` more (see :func:`tests.session.inside.slow_forward`)."""
        self.child.send(f"{INSIDE}.slow_forward({seconds})\r")
        self.child.expect(PROMPT)
        self.count = int(self.child.match.group(1))

    def facts(self, names: str, outputs: tuple[int, ...], results: str) -> dict[str, Any]:
        """The probe's view of the namespace, printed by a cell of its own: print() leaves ``_`` and ``Out``."""
        self.child.send(f"print({PROBE}(globals(), {names!r}, {outputs!r}, {results!r}))\r")
        self.child.expect(PROMPT)
        self.count = int(self.child.match.group(1))
        printed = [line for line in self.child.before.splitlines() if line.startswith("{")]
        if not printed:
            return {"probe": self.child.before.strip()[-300:]}
        return dict(json.loads(printed[-1]))
