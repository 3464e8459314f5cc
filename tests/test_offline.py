"""With the Hub unreachable and offline mode not set, a hub id gets its answer from the local cache at once.

Unreachable here is a server that accepts connections and never replies, the slowest way a Hub can fail
(a closed port or a name that does not resolve fail faster). Each load may ask it once, the probe; any
other request would be huggingface_hub's own, whose back-off prints "Retrying in".
The suite runs offline (conftest), so these run in a subprocess with offline mode unset.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvmagic.measure.capabilities import PROBE_SECONDS

ROOT = Path(__file__).resolve().parent.parent
MISSING = "someone/not-cached-anywhere"
CACHED = "someone/cached-tiny"
ANSWER = (
    f"cannot download {MISSING!r}: the Hugging Face Hub is unreachable (offline, or no network) and it is not in "
    "the local cache; the built-in model 'tiny' works offline"
)
PROBE = "HEAD / HTTP/1.1"
# The product's promise: the answer within 5 s of %kvload, where the retries took about 50 s.
ANSWER_SECONDS = 5.0

_SESSION = """
import json, sys, time
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "kvmagic")
shell.run_line_magic("kvload", sys.argv[1])
magics = shell.magics_manager.registry["KVMagics"]
loaded = magics.loaded is not None and magics.loaded.name == sys.argv[1]
start = time.perf_counter()
try:
    shell.run_line_magic("kvload", sys.argv[2])
    said = None
except UsageError as error:
    said = str(error)
print(json.dumps({"loaded": loaded, "seconds": time.perf_counter() - start, "said": said}))
"""


class _Silent:
    """A server that accepts every connection, reads what it is asked, and never answers."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.held: list[socket.socket] = []
        self.asked: list[str] = []  # each request's first line
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection = self.server.accept()[0]
                self.held.append(connection)
                connection.settimeout(10)
                self.asked.append(connection.recv(4096).decode(errors="replace").partition("\r\n")[0])
            except OSError:
                return

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.getsockname()[1]}"

    def close(self) -> None:
        for connection in [self.server, *self.held]:
            connection.close()


@pytest.fixture
def silent() -> Iterator[_Silent]:
    server = _Silent()
    yield server
    server.close()


@pytest.fixture
def hub_cache(tiny, tmp_path: Path) -> Path:
    """A Hub cache holding tiny as ``CACHED``, laid out as huggingface_hub keeps a download."""
    from kvmagic.model.tiny import tiny_dir

    cache = tmp_path / "hub"
    repo = cache / f"models--{CACHED.replace('/', '--')}"
    commit = "0" * 40
    shutil.copytree(tiny_dir(), repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return cache


def _unreachable(silent: _Silent, hub_cache: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "HF_HUB_OFFLINE"}
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**env, "HF_ENDPOINT": silent.endpoint, "HF_HUB_CACHE": str(hub_cache), "PYTHONPATH": path}


def test_kvload_answers_at_once_and_a_cached_model_still_loads(silent: _Silent, hub_cache: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", _SESSION, CACHED, MISSING], capture_output=True, text=True, cwd=ROOT, timeout=300,
        env=_unreachable(silent, hub_cache),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout.splitlines()[-1])
    assert found["loaded"], run.stdout
    assert found["said"].replace("\n  ", " ") == ANSWER  # wrapped at 100 columns
    assert "Retrying" not in run.stderr + run.stdout
    assert silent.asked == [PROBE] * 2  # one per %kvload, and nothing else
    assert PROBE_SECONDS < found["seconds"] < ANSWER_SECONDS  # the probe waited its whole time, and no more


def test_the_command_answers_in_one_line_without_retrying(silent: _Silent, hub_cache: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "kvmagic", "-m", MISSING, "-n", "1", "a prompt"], capture_output=True, text=True,
        cwd=ROOT, timeout=300, env=_unreachable(silent, hub_cache), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.replace("\n  ", " ").strip() == f"kvbench: error: {ANSWER}"
    assert silent.asked == [PROBE]


def test_offline_mode_asks_nothing(monkeypatch) -> None:
    """HF_HUB_OFFLINE (set for the whole suite) already keeps huggingface_hub off the network: no probe either."""
    from kvmagic.model.loading import offline_source

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("probed the Hub in offline mode")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    assert offline_source(MISSING, None) == MISSING  # huggingface_hub's own offline mode answers it
