"""``%%kvbench --tp N`` in a real shell: refusals before anything starts, a launch that runs, a rank killed
mid-run, an interrupted launch; and, whatever happens, no process of the launch left running."""

from __future__ import annotations

import _thread
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from IPython.core.error import UsageError

from kvmagic.addons.split import split_launch
from kvmagic.addons.split.split_launch import launch
from kvmagic.results.result import BenchmarkResult

from .conftest import PROMPT, raises_usage, said

SHORT = "-n 4 -w 0 -r 2"
LONG = "-n 200 -w 0 -r 20 --max-seconds 0"  # still running when a test stops it


def _launched(pid: int) -> list[psutil.Process]:
    """This process's descendants that a launch started (torchrun and its ranks)."""
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if "KVMAGIC_LAUNCH_DIR" in child.environ():
                found.append(child)
        except psutil.Error:
            continue
    return found


class Watcher(threading.Thread):
    """Remembers every process a launch started; does ``act`` once rank 0 is measuring (its stderr names the
    configuration), then stops watching."""

    def __init__(self, act: Any = None) -> None:
        super().__init__(daemon=True)
        self.act, self.seen, self.done = act, {}, threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + 240
        while not self.done.is_set() and time.monotonic() < deadline:
            for process in _launched(os.getpid()):
                self.seen.setdefault(process.pid, process)
            try:
                ranks = {int(p.environ()["RANK"]): p for p in self.seen.values() if _alive(p) and "RANK" in p.environ()}
                if self.act is not None and len(ranks) == 2 and self._measuring(ranks[0]):
                    self.act(ranks)
                    self.act = None
            except (psutil.Error, OSError):
                pass  # a process that ended meanwhile: look again
            time.sleep(0.2)

    @staticmethod
    def _measuring(rank0: psutil.Process) -> bool:
        folder = Path(rank0.environ()["KVMAGIC_LAUNCH_DIR"])
        err = folder / "rank0.err"
        return err.is_file() and "split over 2 ranks" in err.read_text(errors="replace")

    def left_running(self) -> list[int]:
        self.done.set()
        self.join(10)
        return [pid for pid, process in self.seen.items() if _alive(process)]


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_launch_returns_the_result_and_shows_it_as_any_other(shell: Any, tmp_path: Path, capsys, monkeypatch) -> None:
    done: dict[str, str] = {}  # what each rank said as it finished, as the launcher reads it
    read = split_launch.outcome

    def outcome(folder: Path, ranks: int, status: int | None) -> BenchmarkResult:
        done.update({path.name: path.read_text() for path in folder.glob("rank*.done")})
        return read(folder, ranks, status)

    monkeypatch.setattr(split_launch, "outcome", outcome)
    watcher = Watcher()
    watcher.start()
    (tmp_path / "text.txt").write_text("The cache keeps the keys and values of every token it has seen.")
    compared = f"--cache off,dynamic,static --quality-text {tmp_path / 'text.txt'}"
    result = shell.run_line_magic("kvbench", f"--tp 2 {SHORT} {compared} -o --save {tmp_path / 'run.json'} {PROMPT}")
    assert watcher.left_running() == [] and watcher.seen  # it did start processes, and none is left
    assert isinstance(result, BenchmarkResult) and result.identical
    assert done == {"rank0.done": "0", "rank1.done": "0"}
    assert [str(m.strategy) for m in result.measurements] == ["off", "dynamic", "static"]
    static = result.measurements[2]
    assert static.quality is not None and static.quality.steps > 4  # the text reached the ranks
    assert result.split is not None and result.split.size == 2
    assert all(m.ranks and m.ranks.agree for m in result.measurements)
    assert BenchmarkResult.read_json(tmp_path / "run.json").to_dict() == result.to_dict()  # --save, in the kernel
    out = capsys.readouterr().out
    assert out.count("split over 2 ranks (gloo)") == 1 and "USDT" not in out  # rank 0's progress, streamed
    again = shell.run_line_magic("kvbench", f"--tp 2 {SHORT} {compared} -o --compare {tmp_path / 'run.json'} {PROMPT}")
    assert "speedup_change" in again.to_dataframe().columns


def test_a_killed_rank_is_named_and_every_process_stopped(shell: Any) -> None:
    watcher = Watcher(lambda ranks: ranks[1].send_signal(signal.SIGKILL))
    watcher.start()
    with raises_usage(r"^--tp 2: rank 1 was killed by signal 9 \(SIGKILL") as caught:
        shell.run_line_magic("kvbench", f"--tp 2 {LONG} {PROMPT}")
    assert "every rank was stopped" in said(caught.value) and "\n" not in said(caught.value)
    assert watcher.left_running() == []


def test_an_interrupted_launch_stops_every_process(capsys) -> None:
    watcher = Watcher(lambda ranks: _thread.interrupt_main())
    watcher.start()
    with pytest.raises(KeyboardInterrupt):
        launch(2, ["-m", "tiny", *LONG.split()], {"--prompt-file": PROMPT})
    assert watcher.left_running() == []
    assert capsys.readouterr().err == "kvbench --tp 2: interrupted; torchrun and its 2 ranks were stopped\n"


@pytest.mark.parametrize(
    ("line", "said_"),
    [
        ("--tp 1", r"^--tp 1 would split the model over one process: drop --tp, or give it 2 or more$"),
        (
            "--tp 3",
            r"^'tiny' has 8 attention heads and 2 KV heads, which 3 ranks cannot share equally under --tp: use 2",
        ),
        (
            "--tp 2 --predict",
            r"^--predict fits its cost model to one device's steps, not a model split by --tp: drop one",
        ),
        ("--tp 2 --frontier", r"^--frontier reads one device's free memory, not a model split by --tp: drop one"),
        (
            "--tp 1000 -m somewhere/unreadable",
            r"^--tp 1000: this machine has \d+ (GPUs|CPU cores and no GPU), one per rank",
        ),
        (
            "--tp 2 -m tiny,somewhere/else",
            r"^--tp splits one model over its ranks, not each of several -m: drop it, or name one model$",
        ),
    ],
)
def test_refused_before_any_process_starts(shell: Any, line: str, said_: str) -> None:
    watcher = Watcher()
    watcher.start()
    with raises_usage(said_):
        shell.run_line_magic("kvbench", f"{line} -n 2 {PROMPT}")
    assert watcher.left_running() == [] and watcher.seen == {}


def test_a_model_without_a_plan_is_refused_before_launching(shell: Any, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "gpt2", "n_embd": 32, "n_head": 2, "n_layer": 1}')
    with raises_usage(r"has no tensor-parallel plan \(base_model_tp_plan\) in this transformers, so --tp cannot"):
        shell.run_line_magic("kvbench", f"--tp 2 -m {tmp_path} -n 2 {PROMPT}")


def test_with_no_model_loaded_the_launch_says_how_to_name_one(shell: Any) -> None:
    magics = shell.magics_manager.registry["KVMagics"]
    loaded, magics.loaded = magics.loaded, None
    try:
        with pytest.raises(UsageError, match=r"^no model loaded: run %kvload MODEL first, or name the model with -m$"):
            shell.run_line_magic("kvbench", f"--tp 2 -n 2 {PROMPT}")
    finally:
        magics.loaded = loaded
