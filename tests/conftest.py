"""Shared fixtures: the tiny model, loaded once, and a real IPython shell with kvmagic loaded."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from .tally import pytest_sessionfinish, pytest_terminal_summary, pytest_testnodedown  # noqa: F401 (hooks)

# A suite started in the background by a non-interactive shell (nohup, `cmd &` in a script) inherits SIGINT
# ignored, and passes that on to every kernel, terminal IPython and torchrun it starts: the tests of Ctrl-C
# would then find it never delivered. Python's own handler again, here and (inherited at exec) in them.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# No test may reach the hub: offline mode makes a missing model fail at once instead of retrying.
os.environ["HF_HUB_OFFLINE"] = "1"
# One thread: tiny gains nothing from more, and on a shared machine busy OpenMP threads wait
# on each other (measured: a 3-token generate took 3 s with two threads, 0.09 s with one).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("KVMAGIC_CACHE", str(Path(__file__).resolve().parent.parent / ".venv" / "cache"))


def said(error: BaseException | str) -> str:
    """A front end's message as one line again: the front ends wrap it at 100 columns, later lines indented."""
    return str(error).replace("\n  ", " ")


@contextmanager
def raises_usage(match: str) -> Iterator[pytest.ExceptionInfo[Exception]]:
    """``pytest.raises(UsageError, match=...)`` on the message as one line (see :func:`said`)."""
    import re

    from IPython.core.error import UsageError

    with pytest.raises(UsageError) as caught:
        yield caught
    assert re.search(match, said(caught.value)), said(caught.value)


PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"  # the source experiment's prompt


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny():
    """The embedded model, loaded once for the session: tests must leave it as they found it."""
    from kvmagic import load_model

    return load_model("tiny")


@pytest.fixture
def shell(tiny) -> Iterator:
    """A real InteractiveShell with ``%load_ext kvmagic`` done and tiny already loaded."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "kvmagic")
    magics = ip.magics_manager.registry["KVMagics"]
    magics.loaded = tiny
    names = set(ip.user_ns)
    yield ip
    magics.loaded = None  # keep the session's tiny alive; only this shell forgets it
    ip.run_line_magic("unload_ext", "kvmagic")
    for name in set(ip.user_ns) - names:  # the shell is one for the session: a test's `x = 41` must not
        del ip.user_ns[name]  # reach the next one's `-v {x}`, which IPython expands
