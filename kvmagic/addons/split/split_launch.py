"""``%%kvbench --tp N``: the command under torchrun in a subprocess, its result read back as any other.

A kernel is one process; a model split by tensor parallelism needs one per device, started together by
torchrun. So the magic writes the prompt to a file, starts ``python -m torch.distributed.run
--nproc-per-node N -m kvmagic ... --tp`` in a folder of its own, copies rank 0's stderr (the model's
summary, the progress bar) to the cell as it comes, and reads rank 0's result back. A rank that refuses
leaves its refusal there, which the magic spells in its own flags; one that fails is named, with why
(torchrun's own report of it, or its last words). On every way out, success, failure or Ctrl-C, every
process the launch started is stopped: torchrun and each rank, which torchrun starts in sessions of
their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kvmagic.addons.random_weights.random_build import NAME
from kvmagic.addons.split.split_rank import LAUNCH_DIR, RESULT
from kvmagic.errors import KVMagicError, clipped

if TYPE_CHECKING:
    from kvmagic.core.spec import BenchSpec
    from kvmagic.measure.loaded import LoadedModel
    from kvmagic.results.result import BenchmarkResult

__all__ = [
    "GRACE_S", "failure", "launch", "launch_cell", "launch_command", "launch_request", "outcome", "root_cause", "stop",
]  # fmt: skip

GRACE_S = 5.0  # how long a stopped process may take to end before it is killed
_POLL_S = 0.1
_ROOT = re.compile(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.DOTALL)


def launch_cell(
    args: Any, prompt: str, spec: BenchSpec, held: tuple[LoadedModel, Mapping[str, Any]] | None,
    configured: Mapping[str, Any],
) -> BenchmarkResult:  # fmt: skip
    """``%%kvbench --tp N [-m MODEL]``: the model ``%kvload`` loaded (``held``, with the options it was loaded
    with), or the one ``-m`` names (with the configured dtype and attention, and ``--random-weights``), on N
    ranks."""
    loaded, loaded_with = held if held is not None else (None, {})
    own = loaded if loaded is not None and args.models in (None, loaded.name) else None
    if own is None and args.models is None:
        raise KVMagicError("no model loaded: run %kvload MODEL first, or name the model with {models}", "models")
    keys = ("dtype", "attn_implementation")
    named = {"name": args.models, "random_weights": args.random_weights, **{key: configured[key] for key in keys}}
    load = _load_of(own, loaded_with) if own else named
    config = own.model.config if own else None
    return launch_request(args.tp, load, spec, prompt, config=config, quiet=bool(args.quiet))


def _load_of(loaded: LoadedModel, loaded_with: Mapping[str, Any]) -> dict[str, Any]:
    """How ``loaded`` was loaded: the keywords ``%kvload`` passed, else (a model handed over in Python) what it
    says of itself."""
    if loaded_with.get("name") == loaded.name:
        return dict(loaded_with)
    dtype = str(loaded.dtype).removeprefix("torch.")
    return {"name": loaded.name, "revision": loaded.revision, "random_weights": NAME in loaded.addons, "dtype": dtype}


def launch_request(
    ranks: int, load: Mapping[str, Any], spec: BenchSpec, prompt: str, *, config: Any = None, quiet: bool = False
) -> BenchmarkResult:
    """``spec`` measured on the model ``load`` names (``load_model``'s keywords), split over ``ranks`` processes.

    What can be refused before any process starts is: a request a split cannot take, one rank, and, where
    the model's config is at hand (``config``, else read without a download), a model without a plan or
    with heads the ranks do not divide."""
    from kvmagic.addons.split.split_loading import check_split, readable_config
    from kvmagic.addons.split.split_request import bench_words, check_split_request, load_words

    if ranks < 2:
        raise KVMagicError("{tp} 1 would split the model over one process: drop {tp}, or give it 2 or more", "tp")
    check_split_request(spec)
    name = str(load["name"])
    if config is None:
        trusted = bool(load.get("trust_remote_code"))
        config = readable_config(name, revision=load.get("revision"), trust_remote_code=trusted)
    if config is not None:
        check_split(name, config, ranks)
    _check_devices(ranks)
    words = [*load_words(load), *bench_words(spec), *(["-q"] if quiet else [])]
    texts = {"--prompt-file": prompt, "--quality-text": spec.quality_text}
    if not quiet:  # a notebook shows the ranks' load summary and bar as ordinary output, from the first second
        print(f"kvbench --tp {ranks}: starting {ranks} ranks, each loading {name}", flush=True)
    return launch(ranks, words, texts, echo=None if quiet else sys.stdout)


def _check_devices(ranks: int) -> None:
    """One rank per device: more ranks than this machine has GPUs (or, without one, CPU cores) only wait
    on each other."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    have, kind = (gpus, "GPUs") if gpus else (os.cpu_count() or 1, "CPU cores and no GPU")
    if ranks > have:
        raise KVMagicError(f"{{tp}} {ranks}: this machine has {have} {kind}, one per rank: give {{tp}} {have} or fewer",
                           "tp")  # fmt: skip


def _importable() -> str:
    """PYTHONPATH for the ranks: this kvmagic's folder first, so they run the code the kernel runs."""
    import kvmagic

    here = str(Path(kvmagic.__file__).resolve().parent.parent)
    return os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])


def launch_command(ranks: int, words: Sequence[str]) -> list[str]:
    """torchrun, as this Python runs it, starting ``ranks`` processes of ``kvbench`` with ``words``."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
            "-m", "kvmagic", *words]  # fmt: skip


def launch(
    ranks: int, words: Sequence[str], texts: Mapping[str, str | None], *, echo: IO[str] | None = None
) -> BenchmarkResult:
    """Run ``kvbench words --tp`` on ``ranks`` processes under torchrun; rank 0's result. ``texts`` maps each
    option that reads a file (``--prompt-file``) to the text the ranks read there. ``echo`` hears rank 0's
    stderr as it comes. A rank's refusal comes back as its :class:`KVMagicError`; any other failure as one
    naming the rank and why."""
    with tempfile.TemporaryDirectory(prefix="kvmagic-launch-") as name:
        folder = Path(name)
        files = []
        for number, (flag, text) in enumerate((flag, text) for flag, text in texts.items() if text is not None):
            (folder / f"text{number}.txt").write_text(text, encoding="utf-8")
            files += [flag, str(folder / f"text{number}.txt")]
        command = launch_command(ranks, [*words, "--tp", *files])
        env = {**os.environ, LAUNCH_DIR: name, "PYTHONPATH": _importable()}
        with open(folder / "torchrun.log", "wb") as log:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       env=env, start_new_session=True, cwd=os.getcwd())  # fmt: skip
            try:
                _follow(process, folder / "rank0.err", echo)
            except KeyboardInterrupt:
                stop(process, folder)
                print(
                    f"kvbench --tp {ranks}: interrupted; torchrun and its {ranks} ranks were stopped", file=sys.stderr
                )
                raise
            finally:
                stop(process, folder)
        return outcome(folder, ranks, process.returncode)


def outcome(folder: Path, ranks: int, status: int | None) -> BenchmarkResult:
    """Rank 0's result where it wrote one, else why there is none. Every rank took part in a result written (its
    rows are put together across ranks), so a rank that failed after it is said in a line, not fatal to a
    finished measurement; and where every rank had said it was done, with status 0 (:func:`finished`), the failure
    came while the ranks closed their connections (gloo can abort one there under load): it cost nothing, and is
    not said."""
    from kvmagic.results.result import BenchmarkResult

    if not (folder / RESULT).is_file():
        raise failure(folder, ranks, status)
    done = [folder / f"rank{rank}.done" for rank in range(ranks)]
    if status and not all(path.is_file() and path.read_text() == "0" for path in done):
        found = root_cause(_log(folder))
        late = f"rank {found[0]} {_cause(folder, *found)}" if found else f"torchrun ended with status {status}"
        print(f"kvbench --tp {ranks}: {late} after the result was complete; the result stands", file=sys.stderr)
    return BenchmarkResult.read_json(folder / RESULT)


def _follow(process: subprocess.Popen[bytes], path: Path, echo: IO[str] | None) -> None:
    """Wait for ``process``, copying what ``path`` gains to ``echo`` meanwhile."""
    offset = 0
    while True:
        ended = process.poll() is not None
        if echo is not None and path.is_file():
            with path.open("rb") as file:
                file.seek(offset)
                chunk = file.read()
            offset += len(chunk)
            if chunk:
                echo.write(chunk.decode("utf-8", errors="replace"))
                echo.flush()
        if ended:
            return
        time.sleep(_POLL_S)


def stop(process: subprocess.Popen[bytes], folder: Path) -> None:
    """End torchrun and every rank it started that is still running: asked first, then killed."""
    import psutil

    found: list[Any] = []
    with contextlib.suppress(psutil.NoSuchProcess):
        found = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
    found += [p for p in _ranks(folder) if p.pid not in {q.pid for q in found}]  # orphans whose torchrun ended
    for each in found:
        _signal(each, signal.SIGTERM)
    _, alive = psutil.wait_procs(found, timeout=GRACE_S)
    for each in alive:
        _signal(each, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=GRACE_S)
    if process.returncode is None:
        process.wait()


def _ranks(folder: Path) -> list[Any]:
    """The ranks this launch started, by the process ids they left, where still running as this launch's."""
    import psutil

    found = []
    for path in folder.glob("rank*.pid"):
        try:
            each = psutil.Process(int(path.read_text()))
            if each.environ().get(LAUNCH_DIR) == str(folder):
                found.append(each)
        except (psutil.Error, ValueError, OSError):
            continue
    return found


def _signal(process: Any, sig: signal.Signals) -> None:
    import psutil

    with contextlib.suppress(psutil.Error):
        process.send_signal(sig)


def root_cause(log: str) -> tuple[int, int] | None:
    """The rank and exit code torchrun reports as the first failure, if it reported one."""
    match = _ROOT.search(log)
    return (int(match[1]), int(match[2])) if match else None


def failure(folder: Path, ranks: int, status: int | None) -> KVMagicError:
    """Why the launch gave no result, as one line: a rank's refusal, else the failing rank and its cause."""
    refusals = sorted(folder.glob("rank*.json"), key=lambda p: int(p.stem.removeprefix("rank")))
    if refusals:
        record = json.loads(refusals[0].read_text())
        return KVMagicError(record["template"], *record["params"])
    log = _log(folder)
    found = root_cause(log)
    if found is None:
        last = next((line.strip() for line in reversed(log.splitlines()) if line.strip()), "no output")
        said = f"{{tp}} {ranks}: torchrun ended with status {status}: {clipped(last)}: fix that and run the cell again"
        return KVMagicError(said, "tp")
    rank, code = found
    return KVMagicError(
        f"{{tp}} {ranks}: rank {rank} {_cause(folder, rank, code)}; every rank was stopped: run the cell again once "
        "that is fixed", "tp"
    )  # fmt: skip


def _log(folder: Path) -> str:
    return (folder / "torchrun.log").read_text(errors="replace") if (folder / "torchrun.log").is_file() else ""


def _cause(folder: Path, rank: int, code: int) -> str:
    """What ended a rank, from its exit code: the signal that killed it, or its last line."""
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        return f"was killed by signal {-code} ({name}{': often the system out of memory' if -code == 9 else ''})"
    return f"failed (exit status {code}): {_last_words(folder / f'rank{rank}.err')}"


def _last_words(path: Path) -> str:
    """A failed rank's last line (its exception), or that it left none."""
    text = path.read_text(errors="replace") if path.is_file() else ""
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    return clipped(lines[-1]) if lines else "it printed nothing"
