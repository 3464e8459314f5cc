"""Memory across a long session: repeated runs stay flat, and a dropped model is really freed."""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
import torch
from IPython.core.error import UsageError

from .conftest import PROMPT

RUNS = 50
# Resident memory may grow this much over the 50 runs. Measured growth on both transformers lines
# was 1-6 MiB (allocator noise); keeping even one extra copy of tiny per run would add 15 MiB a run,
# 750 MiB in all. Smaller per-run leaks (a KV cache is about 170 KiB here) hide in that noise, so the
# test also requires the number of live tensors and caches to stay exactly where it was.
RSS_BOUND = 24 * 2**20


def _live(kind: type) -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if issubclass(type(obj), kind))


def test_fifty_runs_keep_memory_flat(shell) -> None:
    from transformers.cache_utils import Cache

    process = psutil.Process()
    for _ in range(3):  # first calls fill lazy imports, kernels and allocator pools
        shell.run_cell_magic("kvbench", "-n 4 -w 1", PROMPT)
    tensors, caches = _live(torch.Tensor), _live(Cache)
    before = process.memory_info().rss
    for _ in range(RUNS):
        table = shell.run_cell_magic("kvbench", "-n 4 -w 1", PROMPT)
        assert bool(table["identical"].all())
    del table
    growth = process.memory_info().rss - before
    print(f"resident memory grew {growth / 2**20:.1f} MiB over {RUNS} runs")
    assert (_live(torch.Tensor), _live(Cache)) == (tensors, caches)
    assert growth < RSS_BOUND, f"resident memory grew {growth / 2**20:.1f} MiB over {RUNS} runs"


@pytest.fixture
def fresh() -> Iterator[Any]:
    """A shell with kvmagic loaded and no model: what it loads is referenced by nothing else."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "kvmagic")
    yield ip
    if "KVMagics" in ip.magics_manager.registry:
        ip.run_line_magic("unload_ext", "kvmagic")


def _load(ip: Any) -> weakref.ref:
    ip.run_line_magic("kvload", "tiny")
    return weakref.ref(ip.magics_manager.registry["KVMagics"].loaded.model)


def test_loading_a_second_model_frees_the_first(fresh) -> None:
    first = _load(fresh)
    second = _load(fresh)
    gc.collect()
    assert first() is None
    assert second() is not None


def test_unload_ext_frees_the_model(fresh) -> None:
    model = _load(fresh)
    fresh.run_line_magic("unload_ext", "kvmagic")
    gc.collect()
    assert model() is None


def test_a_usage_error_does_not_keep_the_model(fresh) -> None:
    """IPython keeps the last error for %debug; its frames must not hold the model once it is dropped."""
    first = _load(fresh)
    fresh.run_cell("%%kvbench -n 5000\n" + PROMPT)  # past tiny's 2048 positions: a UsageError
    assert isinstance(getattr(sys, "last_value", None), UsageError)
    _load(fresh)
    gc.collect()
    assert first() is None


def test_an_interrupted_run_does_not_keep_the_model(fresh, monkeypatch) -> None:
    first = _load(fresh)
    model_class = type(first())

    def interrupt(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(model_class, "generate", interrupt)
        fresh.run_cell("%%kvbench -n 2 -w 1\n" + PROMPT)
    assert isinstance(getattr(sys, "last_value", None), KeyboardInterrupt)
    _load(fresh)
    gc.collect()
    assert first() is None


def test_an_unrelated_error_stays_debuggable(fresh, monkeypatch) -> None:
    """Only errors that came through kvmagic are cleared: the user's own stay for %debug, through both places
    that clear (a %kvload that releases the model before, and a run)."""
    from kvmagic.frontends import magics

    cleared: list[object] = []
    real = magics.forget_last_failure
    monkeypatch.setattr(magics, "forget_last_failure", lambda: cleared.append(sys.last_value) or real())
    _load(fresh)
    fresh.run_cell("def broken(value):\n    return value / 0\nbroken(41)")
    assert isinstance(sys.last_value, ZeroDivisionError)
    _load(fresh)  # releases the model loaded before: the clean-up runs with the user's error as the last one
    fresh.run_cell("%%kvbench -n 2 -w 0 -q\n" + PROMPT)
    assert len(cleared) == 2 and all(isinstance(error, ZeroDivisionError) for error in cleared)
    tb = sys.last_traceback
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_locals["value"] == 41


def test_an_interrupted_run_holds_nothing_once_it_stopped(shell, tiny, monkeypatch) -> None:
    """IPython keeps an interrupted run's frames (inputs, half-built caches) for %debug; on an accelerator
    they would share the memory with the next run. The one-line stop drops them at once: the frames torch
    was in when the signal landed are no one's to debug."""
    shell.run_cell_magic("kvbench", "-n 2 -w 1", PROMPT)
    tensors = _live(torch.Tensor)
    original = type(tiny.model).generate
    calls: list[int] = []

    def interrupt_the_cached_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(type(tiny.model), "generate", interrupt_the_cached_run)
        shell.run_cell("%%kvbench -n 2 -w 1\n" + PROMPT)
    assert isinstance(sys.last_value, KeyboardInterrupt) and len(calls) == 4
    assert _live(torch.Tensor) == tensors  # not the inputs, nor the first timed output
    shell.run_cell_magic("kvbench", "-n 2 -w 1", PROMPT)
    assert _live(torch.Tensor) == tensors


@pytest.fixture
def own_names(shell) -> Iterator[Any]:
    """The shell, and afterwards the names a test's cells bound gone again: the shell is shared by every test."""
    before = set(shell.user_ns)
    yield shell
    for name in set(shell.user_ns) - before:
        del shell.user_ns[name]


def test_a_mistake_then_a_run_keeps_the_notebooks_variables(own_names) -> None:
    """The frames a mistake leaves for %debug include the cell's own, whose variables are the notebook's:
    freeing the model must clear only the frames kvmagic's calls made."""
    shell = own_names
    shell.run_cell("x = 41", store_history=True)
    shell.run_cell("1 + 1", store_history=True)
    out_before = dict(shell.user_ns["Out"])
    shell.run_cell("%%kvbench -n 0\n" + PROMPT, store_history=True)
    assert isinstance(sys.last_value, UsageError)
    assert shell.run_cell("%%kvbench -n 4 -w 0 -q\n" + PROMPT, store_history=True).success
    assert shell.user_ns["x"] == 41
    assert shell.user_ns["_"] == 2 and dict(shell.user_ns["Out"]) == out_before
    assert shell.run_cell("x + 1", store_history=True).result == 42


def test_a_mistake_inside_the_users_own_except_block_keeps_their_variables(own_names) -> None:
    """A kvmagic error raised while the user's code handles its own carries that error as its context,
    with the cell's frame in it: the context is the user's, and stays whole."""
    shell = own_names
    shell.run_cell("y = 7")
    cell = "try:\n    1 / 0\nexcept ZeroDivisionError as caught:\n    get_ipython().run_cell_magic('kvbench', '-n 0', 'hi')"
    shell.run_cell(cell)
    context = sys.last_value
    while not isinstance(context, ZeroDivisionError):
        context = context.__context__
    assert shell.run_cell("%%kvbench -n 4 -w 0 -q\n" + PROMPT).success
    assert shell.user_ns["y"] == 7
    assert context.__traceback__ is not None and context.__traceback__.tb_frame.f_locals["y"] == 7


def test_after_a_run_the_last_traceback_still_reaches_the_users_cell(own_names) -> None:
    """Only the part below the magic is detached: %tb still shows the user's cell."""
    shell = own_names
    shell.run_cell("def run():\n    get_ipython().run_cell_magic('kvbench', '-n 0', 'hi')\nrun()")
    shell.run_cell("%%kvbench -n 4 -w 0 -q\n" + PROMPT)
    names = []
    tb = sys.last_traceback
    while tb is not None:
        names.append((tb.tb_frame.f_globals.get("__name__"), tb.tb_frame.f_code.co_name))
        tb = tb.tb_next
    assert ("__main__", "run") in names
    assert not [name for name in names if str(name[0]).startswith("kvmagic")]
