"""The command as one rank of a tensor-parallel run (``torchrun ... -m kvmagic --tp``): who speaks, who writes.

Every rank runs the same command; only rank 0 prints (the summary, progress, the table, a refusal) and
writes ``--save``; the others stay quiet and end with the same status. Started by the notebook's
launcher (:mod:`kvmagic.addons.split.split_launch`), which names a folder in :data:`LAUNCH_DIR`, each rank also
leaves there what the launcher reads back: its process id and its stderr, its refusal as a template (so
the notebook can spell its own flags), its exit status once its part is done, and rank 0 the result as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from kvmagic.core.spec import BenchSpec
    from kvmagic.measure.loaded import LoadedModel
    from kvmagic.measure.lockstep import World
    from kvmagic.results.result import BenchmarkResult

__all__ = [
    "LAUNCH_DIR", "RESULT", "end_rank", "finished", "join_ranks", "numbered", "quiet_rank", "refused",
    "report_result", "run_rank", "torchrun_hint",
]  # fmt: skip

LAUNCH_DIR = "KVMAGIC_LAUNCH_DIR"  # set by the notebook's launcher: where each rank leaves what it reads back
RESULT = "result.json"
# How long a quiet rank's refusal waits for rank 0 to print the same one. torchrun ends every rank as soon as
# one fails, so a quiet rank that left first could end rank 0 before its line was out.
SPEAKER_GRACE_S = 30.0


def numbered(words: Sequence[str]) -> str:
    """The notebook's ``--tp N`` typed to the command, as the one message that refuses it: here torchrun starts the
    ranks (empty where ``--tp`` comes without a number)."""
    ranks = words[words.index("--tp") + 1] if "--tp" in words[:-1] else ""
    return f"--tp takes no N: torchrun --nproc-per-node {ranks} -m kvmagic --tp" if ranks.isdigit() else ""


def torchrun_hint(argv: Sequence[str]) -> str:
    """The command that runs ``argv`` under torchrun, as the refusal of ``--tp`` without it gives it."""
    return shlex.join(["torchrun", "--nproc-per-node", "N", "-m", "kvmagic", *argv])


def join_ranks(args: argparse.Namespace, argv: Sequence[str]) -> World | None:
    """With ``--tp``, this process's place among the ranks (refused outside torchrun, with the command to use);
    a rank other than 0 is made quiet and writes no file."""
    if not args.tp:
        return None
    from kvmagic.addons.split.process_group import join, launched

    if not launched():
        raise KVMagicError(
            "{tp} splits the model over the ranks torchrun starts, one per device: run it as "
            f"{torchrun_hint(argv)} (N: the number of devices)",
            "tp",
        )
    folder = os.environ.get(LAUNCH_DIR)
    rank = int(os.environ["RANK"])
    if folder:
        Path(folder, f"rank{rank}.pid").write_text(str(os.getpid()))
        err = os.open(Path(folder, f"rank{rank}.err"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(err, 2)  # the launcher reads rank 0's as progress, and any rank's last words if it fails
        os.close(err)
    if rank != 0:
        args.quiet, args.save = True, None
        _hush_libraries()
    return join()


def _hush_libraries() -> None:
    """transformers' progress bars and warnings, on a rank that stays quiet: rank 0 shows them once."""
    import warnings

    from transformers.utils import logging

    logging.disable_progress_bar()
    logging.set_verbosity_error()
    warnings.simplefilter("ignore")


def quiet_rank() -> bool:
    """Whether this process is a rank other than 0 (which stays quiet)."""
    return os.environ.get("RANK", "0") != "0" and "WORLD_SIZE" in os.environ


def refused(error: KVMagicError, split: bool) -> None:
    """Before the command says a refusal, so that it is said once: every rank refuses alike, and rank 0 prints it.
    A rank leaves its refusal for the launcher; a quiet rank then waits for rank 0 to print and exit, upon which
    torchrun ends it; if rank 0 has not refused by then (a refusal of this rank alone), it prints its own."""
    folder = os.environ.get(LAUNCH_DIR)
    if folder:  # as a template, which the launcher spells in the notebook's own flags
        record = {"template": error.template, "params": list(error.params)}
        Path(folder, f"rank{os.environ.get('RANK', '0')}.json").write_text(json.dumps(record))
    if split and quiet_rank():
        time.sleep(SPEAKER_GRACE_S)


def run_rank(
    args: argparse.Namespace, configured: Mapping[str, object], prompt: str, spec: BenchSpec,
    on_load: Callable[[LoadedModel], None] | None,
) -> BenchmarkResult:  # fmt: skip
    """This rank's part of the command's run: its share of the model loaded (as the load options ask, but the
    device map: each rank places its own), measured in lockstep with the others, rank 0's result left for the
    launcher."""
    from kvmagic.addons.split.split_loading import load_split_model
    from kvmagic.frontends.options import load_kwargs
    from kvmagic.runner.benchmark import run_benchmark

    loaded = load_split_model(**{**load_kwargs(args, configured), "device_map": None})
    if on_load is not None:
        on_load(loaded)
    result = run_benchmark(loaded, prompt, spec, progress=not args.quiet)
    report_result(result)
    return result


def report_result(result: BenchmarkResult) -> None:
    """Rank 0 leaves the result for the launcher, whole or not at all (written beside it, then renamed)."""
    folder = os.environ.get(LAUNCH_DIR)
    if folder and not quiet_rank():
        result.to_json(Path(folder, RESULT + ".part"))
        os.replace(Path(folder, RESULT + ".part"), Path(folder, RESULT))


def finished(status: int) -> None:
    """Each rank leaves its exit status for the launcher once its part is done, before it leaves the process
    group: a rank that then ends otherwise failed while closing its connections (gloo can abort one there
    under load), after every measurement and every word it had to say."""
    folder = os.environ.get(LAUNCH_DIR)
    if folder:
        Path(folder, f"rank{os.environ.get('RANK', '0')}.done").write_text(str(status))


def end_rank(status: int) -> NoReturn:
    """End this rank once its part is done: its status left for the launcher, the process group left with every
    rank, what it printed flushed, then the process ended without the interpreter's teardown. The split model's
    device mesh still holds the process group then, and its destructor, run at teardown after the group was
    destroyed, can abort the rank ("terminate called without an active exception") after a run that succeeded."""
    from kvmagic.addons.split.process_group import leave

    finished(status)
    leave()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
