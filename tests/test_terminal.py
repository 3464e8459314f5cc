"""A default %%kvbench cell in a real terminal IPython, 100 columns wide: the speed-up and identical show,
and no line is wider than the terminal, nor any of a --wide cell's."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from .conftest import PROMPT

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = 100
# What a terminal draws but a reader does not see: colour, cursor and mode sequences.
ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")
SESSION = [
    "%load_ext kvmagic",
    "%kvload tiny",
    f"p = {PROMPT!r}",
    'get_ipython().run_cell_magic("kvbench", "-n 4 -w 1", p)',
    'get_ipython().run_cell_magic("kvbench", "-n 4 -w 0 --wide", p)',
    "exit",
]


def in_terminal(lines: list[str], ipython_dir: Path, timeout: float = 120) -> str:
    """Type ``lines`` into ``ipython`` running in a pseudo-terminal ``COLUMNS`` wide; what the screen got."""
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 50, COLUMNS, 0, 0))
    env = {
        **os.environ, "COLUMNS": str(COLUMNS), "LINES": "50", "TERM": "dumb", "IPYTHONDIR": str(ipython_dir),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }  # fmt: skip
    command = [sys.executable, "-m", "IPython", "--simple-prompt", "--no-banner", "--colors=nocolor",
               "--HistoryManager.hist_file=:memory:"]  # fmt: skip
    process = subprocess.Popen(command, stdin=secondary, stdout=secondary, stderr=secondary, env=env, cwd=ROOT)
    os.close(secondary)
    os.write(primary, "".join(line + "\n" for line in lines).encode())
    screen = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 1.0)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal closed: ipython has exited
                break
            if not chunk:
                break
            screen += chunk
    finally:
        os.close(primary)
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
    return ESCAPES.sub("", screen.decode("utf-8", errors="replace"))


def test_a_default_cell_fits_a_100_column_terminal_and_shows_the_speedup(tmp_path):
    screen = in_terminal(SESSION, tmp_path)
    lines = [line for row in screen.splitlines() for line in row.split("\r")]
    header = next((line for line in lines if line.lstrip().startswith("prompt_tokens")), None)
    assert header is not None, screen
    assert header.split() == [
        "prompt_tokens", "new_tokens", "uncached_s", "cached_s", "speedup", "identical", "kv_cache_mib",
    ], screen  # fmt: skip
    row = lines[lines.index(header) + 1].split()
    assert row[:2] == [str(len(PROMPT.encode())), "4"] and row[5] == "True", screen
    assert [line for line in lines if len(line) > COLUMNS] == [], screen
    assert "Error" not in screen, screen
    # --wide: every column, in blocks that fit, each led by the row's lengths; no index, no NaN, no pandas "\\"
    wide = [i for i, line in enumerate(lines) if line.lstrip().startswith("prompt_tokens")][1:]
    assert len(wide) > 1 and all(lines[i].split()[1] == "new_tokens" for i in wide), screen
    assert lines[wide[0] + 1].split()[:3] == [str(len(PROMPT.encode())), "4", "1"], screen
    assert "NaN" not in screen and not any(line.rstrip().endswith("\\") for line in lines), screen
