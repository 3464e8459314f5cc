"""Every pair of options answers: it runs to a result, or it is refused before running in one line that
names both options and says what to do instead. Never a traceback; the command exits 1 only from --fail-on.

The cases come from the option table: each option's ``examples`` are the values a case gives it, so a
new option is covered without editing this file. ``KVMAGIC_PAIRS=all`` runs every pair (one CI leg);
otherwise a sample fixed by :data:`SEED` runs, with the pairs that once failed. A pair refused for a reason
one of its options has alone is judged by that option's own refusal, which must name it. Runs stay short on
tiny: the settings in :data:`SHORT` apply wherever a case does not set them (``--auto-cap`` only beside the
``-r auto`` it is for). ``%%kvbench --tp N`` starts torchrun (seconds per start), so a case whose launch is the
command an earlier case already ran (the options the kernel alone acts on: -o, -v, --save, --compare, ...) gets
a copy of that command's result instead of starting it again.
"""

from __future__ import annotations

import ast
import copy
import itertools
import os
import random
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from kvmagic.frontends.cli import main
from kvmagic.frontends.options import BENCH_OPTIONS, LOAD_OPTIONS, Host, Option
from kvmagic.results.result import BenchmarkResult

from .conftest import PROMPT, said
from .model_state import snapshot
from .tally import TALLY

SEED = 20
SAMPLE = 30  # pairs per front end in the sampled legs
WIDTH = 100  # a refusal fits one line of a 100-column terminal, as the front end prints it
# Pairs that failed once, as their test ids read: the sampled legs run them too. The first two also run in a
# real process: a traceback there, and the prompt taken for --frontier's word.
IN_A_PROCESS = ("cli: --cache off,dynamic,static --limits", "cli: --cache off,dynamic,static --frontier")
ONCE_FAILED = frozenset({
    *IN_A_PROCESS,
    "magic: --cache off,dynamic,static --limits",  # a traceback: no median of the strategies' rows
    "magic: --kv-bits 4 --compile",  # past 100 columns
    "cli: --kv-bits 4 --compile",
    "cli: --cache off,dynamic,static --kv-bits 4",  # past 100 columns
    "cli: --gguf-file model.gguf --random-weights",  # named one option of the two
    "cli: --revision main -b 2",  # said no fix
})  # fmt: skip
# Settings that keep a run on tiny short. A frontier check (a generate of about 2,000 tokens on tiny, estimated
# at 20 s or more) stays unchecked under this budget, unless a case sets its own; a case that sets none may
# also be refused by it, in one line.
SHORT = {"model": "tiny", "new_tokens": "2", "warmup_tokens": "0", "auto_cap": "0.5", "max_seconds": "8"}
FIXES = re.compile(r"\b(drop|add|give|use|remove|put|pick|write|lower|raise|run|set|choose|shorten)\b")
ROOT = Path(__file__).resolve().parent.parent
BUDGET = next(option for option in BENCH_OPTIONS if option.dest == "max_seconds")


def host_options(host: Host) -> list[Option]:
    """The options ``host`` has: the magic's pairs are %%kvbench's; the command's add the model's."""
    table = (*LOAD_OPTIONS, *BENCH_OPTIONS) if host == "cli" else BENCH_OPTIONS
    return [option for option in table if host in option.hosts]


@dataclass(frozen=True)
class Case:
    """Some options of one front end, each at one of its examples."""

    host: Host
    chosen: tuple[tuple[Option, str], ...]

    def args(self) -> list[str]:
        """The options as typed: the flag, then its example unless the example is the flag alone."""
        return [word for option, text in self.chosen for word in (option.spelling(self.host)[0], text) if word]

    def value(self, dest: str) -> str | None:
        return next((text for option, text in self.chosen if option.dest == dest), None)

    def __str__(self) -> str:
        return f"{self.host}: {shlex.join(self.args())}"


def cases(host: Host, size: int) -> list[Case]:
    """Every ``size`` options of ``host`` (in the table's order), at every combination of their examples."""
    found = []
    for options in itertools.combinations(host_options(host), size):
        for texts in itertools.product(*(option.examples for option in options)):
            found.append(Case(host, tuple(zip(options, texts))))
    return found


def chosen(host: Host) -> list[Case]:
    """Each option alone and every pair, or (the sampled legs) a fixed sample of pairs and those that once failed;
    there an option alone runs only when a pair's refusal is to be judged against it."""
    pairs = cases(host, 2)
    if os.environ.get("KVMAGIC_PAIRS") == "all":
        return cases(host, 1) + pairs
    sample = random.Random(SEED).sample(pairs, min(SAMPLE, len(pairs)))
    return sample + [case for case in pairs if str(case) in ONCE_FAILED and case not in sample]


def names(message: str, option: Option, host: Host) -> bool:
    """Whether ``message`` names ``option`` in one of ``host``'s spellings (``--no-chat`` for ``--chat`` too)."""
    flags = list(option.spelling(host))
    flags += [f"--no-{flag[2:]}" for flag in flags if option.action is not None and flag.startswith("--")]
    return any(re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", message) for flag in flags)


def test_every_option_has_examples_for_the_pairs() -> None:
    missing = [option.spelling("cli")[0] for option in (*LOAD_OPTIONS, *BENCH_OPTIONS) if not option.examples]
    assert missing == [], f"give these options examples in the option table: {', '.join(missing)}"


def test_the_cases_cover_every_option_and_the_sample_is_fixed() -> None:
    for host in ("magic", "cli"):
        singles = {case.chosen[0][0].dest for case in cases(host, 1)}
        assert singles == {option.dest for option in host_options(host)}
        assert [str(case) for case in chosen(host)] == [str(case) for case in chosen(host)]
    assert {str(case) for host in ("magic", "cli") for case in cases(host, 2)} >= ONCE_FAILED
    assert len([case for case in cases("cli", 2) if str(case) in IN_A_PROCESS]) == len(IN_A_PROCESS)


# ---- running a case ----------------------------------------------------------------------------------------

KEPT = ["the user's own list"]  # a variable of the user's that every run must leave alone


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory, tiny: Any) -> Iterator[Path]:
    """A directory to run in, holding the baseline every --compare example names."""
    from kvmagic import run_benchmark

    path = tmp_path_factory.mktemp("pairs")
    before = Path.cwd()
    os.chdir(path)
    baseline = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, repeat=3)
    for option in BENCH_OPTIONS:
        for text in option.examples if option.dest == "compare" else ():
            baseline.save(text)
        for text in option.examples if option.dest == "quality_text" else ():
            Path(text).write_text(" and reads them back.", encoding="utf-8")
    yield path
    os.chdir(before)


@pytest.fixture(scope="module")
def launches() -> Iterator[None]:
    """Each command a launch runs under torchrun runs once; a launch of the same ranks, words and texts gets a copy
    of its result. What a case does before launching (its refusals) and with the result stays its own."""
    from kvmagic.addons.split import split_launch as launching

    real, ran = launching.launch, {}

    def once(ranks: int, words: Any, texts: Any, *, echo: Any = None) -> BenchmarkResult:
        key = (ranks, tuple(words), tuple(texts.items()))
        TALLY["magic launches", "shared" if key in ran else "started"] += 1
        if key not in ran:
            ran[key] = real(ranks, words, texts, echo=echo)
        return copy.deepcopy(ran[key])

    patch = pytest.MonkeyPatch()
    patch.setattr(launching, "launch", once)
    yield
    patch.undo()


@pytest.fixture(scope="module")
def magic(tiny: Any, workdir: Path, launches: None) -> Iterator[Any]:
    """One shell for every case, tiny loaded, the short settings configured."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "kvmagic")
    magics = ip.magics_manager.registry["KVMagics"]
    magics.loaded = tiny
    configured = {name: getattr(magics, name) for name in SHORT if magics.has_trait(name) and name != "model"}
    for name in configured:
        setattr(magics, name, ast.literal_eval(SHORT[name]))
    ip.user_ns["kept"] = KEPT
    yield ip
    for name, value in configured.items():
        setattr(magics, name, value)
    ip.user_ns.pop("kept", None)
    magics.loaded = None
    ip.run_line_magic("unload_ext", "kvmagic")


def _user_names(shell: Any) -> dict[str, int]:
    """The user's variables, each by identity (IPython's own history names aside)."""
    return {k: id(v) for k, v in shell.user_ns.items() if not k.startswith("_") and k not in ("In", "Out")}


def run_magic(shell: Any, tiny: Any, case: Case, capsys: pytest.CaptureFixture[str]) -> str | None:
    """Run the case as a notebook cell; the refusal's message, or None when it ran. Checks what must hold
    either way: no traceback, the model the same object and unchanged, the user's variables untouched."""
    capsys.readouterr()
    before, state = _user_names(shell), snapshot(tiny.model)
    outcome = shell.run_cell(f"%%kvbench {shlex.join(case.args())}\n{PROMPT}\n")
    out, err = capsys.readouterr()
    error = outcome.error_in_exec
    assert outcome.error_before_exec is None and (error is None or type(error) is UsageError), f"{case}: {error!r}"
    assert "Traceback" not in out + err, f"{case}:\n{out}\n{err}"
    assert shell.magics_manager.registry["KVMagics"].loaded is tiny and snapshot(tiny.model) == state
    after = _user_names(shell)
    var = case.value("var")
    if var is not None and error is None:
        assert isinstance(shell.user_ns.pop(var), BenchmarkResult)
        after.pop(var, None)
    assert after == before and shell.user_ns["kept"] is KEPT and KEPT == ["the user's own list"]
    if error is None:
        return None
    shown = f"UsageError: {error}"
    assert err == shown + "\n" and "\n" not in said(error), f"{case}: {err!r}"
    assert max(map(len, shown.splitlines())) <= WIDTH, f"{case}: wider than {WIDTH} columns: {shown}"
    return said(error)


def command_args(case: Case) -> list[str]:
    """The case's options after the short settings it does not set itself, the prompt last (as a user types it)."""
    options = {option.dest: option for option in (*LOAD_OPTIONS, *BENCH_OPTIONS)}
    given = {option.dest for option, _ in case.chosen}
    if case.value("repeat") != "auto":  # --auto-cap is refused without the -r auto it is for
        given.add("auto_cap")
    short = [w for dest, text in SHORT.items() if dest not in given for w in (options[dest].spelling("cli")[0], text)]
    return [*short, *case.args(), PROMPT]


def command_outcome(case: Case, status: int | str | None, out: str, err: str) -> str | None:
    """Judge what the command printed and returned: the refusal's message, or None when it ran."""
    assert "Traceback" not in err, f"{case}:\n{err}"
    errors = [line for line in said(err).splitlines() if line.startswith("kvbench: error:")]
    judged = case.value("fail_on") is not None
    if status == 0:
        assert errors == [] and (out or case.value("quiet") is not None), f"{case}: {err}"
        return None
    if status == 1:  # only --fail-on finds a regression
        assert judged and "kvbench: regression:" in err, f"{case}: exit 1\n{err}"
        return None
    assert status == 2 and len(errors) == 1 and said(err).splitlines()[-1] == errors[0], f"{case}: exit {status}\n{err}"
    if judged and out and errors[0].startswith("kvbench: error: --fail-on cannot judge"):  # it ran; the gate
        return None  # could not tell (a change past the threshold in a run of one round: a slow moment can make one)
    assert out == "", f"{case}: refused after printing a result"
    assert max(map(len, err.splitlines())) <= WIDTH, f"{case}: wider than {WIDTH} columns: {err}"
    return errors[0].removeprefix("kvbench: error: ")


def run_command(case: Case, capsys: pytest.CaptureFixture[str]) -> str | None:
    """Run ``kvbench`` in this process, as its console script does."""
    capsys.readouterr()
    try:
        status: int | str | None = main(command_args(case))
    except SystemExit as exit_:  # argparse's own refusal
        status = exit_.code
    out, err = capsys.readouterr()
    return command_outcome(case, status, out, err)


# ---- judging a refusal --------------------------------------------------------------------------------------

_ALONE: dict[tuple[Host, str, str], str | None] = {}  # each option alone: its refusal, or None when it ran


def check_refusal(case: Case, message: str, alone: Callable[[Case], str | None]) -> str:
    """One line that says what to do, and names both options unless one of them is refused alone for it;
    returns why it was refused."""
    assert "\n" not in message and FIXES.search(message), f"{case}: says no fix: {message}"
    if len(case.chosen) > 1:
        singles = [Case(case.host, (chosen,)) for chosen in case.chosen]
        single = next((single for single in singles if _alone(single, alone) == message), None)
        if single is not None:
            check_refusal(single, message, alone)  # and alone, it is refused for a reason that names it
            return "refused as one of its options alone"
    if case.value("max_seconds") is None and names(message, BUDGET, case.host):
        return "refused by the short settings' budget"
    unnamed = [option.spelling(case.host)[0] for option, _ in case.chosen if not names(message, option, case.host)]
    assert unnamed == [], f"{case}: refused without naming {', '.join(unnamed)}: {message}"
    return "refused, naming both" if len(case.chosen) > 1 else "refused"


def _alone(single: Case, run: Callable[[Case], str | None]) -> str | None:
    ((option, text),) = single.chosen
    key = (single.host, option.dest, text)
    if key not in _ALONE:
        _ALONE[key] = run(single)
    return _ALONE[key]


def answer(case: Case, run: Callable[[Case], str | None]) -> None:
    message = _alone(case, run) if len(case.chosen) == 1 else run(case)
    outcome = "ran" if message is None else check_refusal(case, message, run)
    TALLY[f"{case.host} {'pairs' if len(case.chosen) > 1 else 'alone'}", outcome] += 1


@pytest.mark.parametrize("case", chosen("magic"), ids=str)
def test_every_pair_answers_in_the_magic(magic: Any, tiny: Any, case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    answer(case, lambda each: run_magic(magic, tiny, each, capsys))


@pytest.mark.parametrize("case", chosen("cli"), ids=str)
def test_every_pair_answers_in_the_command(workdir: Path, case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    answer(case, lambda each: run_command(each, capsys))


@pytest.mark.parametrize("case", [c for c in cases("cli", 2) if str(c) in IN_A_PROCESS], ids=str)
def test_the_pairs_that_once_failed_answer_in_a_real_process(workdir: Path, case: Case) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "kvmagic", *command_args(case)], capture_output=True, text=True, env=env,
        cwd=workdir, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    message = command_outcome(case, run.returncode, run.stdout, run.stderr)
    if message is not None:
        check_refusal(case, message, lambda each: None)
