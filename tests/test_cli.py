"""The ``kvbench`` command as a user runs it: a subprocess on tiny, its formats, and its exit status."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pandas as pd
import pytest
import tomllib

from kvmagic.core.strategy import PAIR
from kvmagic.frontends.options import BENCH_OPTIONS, LOAD_OPTIONS
from kvmagic.results.report import COLUMNS
from kvmagic.results.result import BenchmarkResult

from .conftest import PROMPT, said

ROOT = Path(__file__).resolve().parent.parent


def kvbench(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "kvmagic", *args], input=stdin, capture_output=True, text=True, env=env,
        cwd=ROOT, timeout=300, stdin=None if stdin is not None else subprocess.DEVNULL,
    )  # fmt: skip


def test_table_from_an_argument_fits_100_columns():
    run = kvbench("-m", "tiny", "-n", "3", "-w", "1", "-r", "3", PROMPT)
    assert run.returncode == 0, run.stderr
    header, row = run.stdout.splitlines()[:2]
    assert header.split() == [
        "prompt_tokens", "new_tokens", "uncached_s", "cached_s", "speedup", "[95%", "CI]", "identical", "kv_cache_mib",
    ]  # fmt: skip
    prompt_tokens, new_tokens, uncached, cached, speedup = row.split()[:5]
    assert (int(prompt_tokens), int(new_tokens), row.split()[-2]) == (len(PROMPT.encode()), 3, "True")
    assert float(speedup) == pytest.approx(float(uncached) / float(cached), rel=1e-2)  # 4 and 3 digits
    assert all(len(line) <= 100 for line in run.stdout.splitlines()), run.stdout
    assert "tiny: Exaone4ForCausalLM, 3.87 M parameters, float32 on cpu" in run.stderr  # the summary stays off stdout
    assert "Loading weights" not in run.stderr and "it/s]" not in run.stderr  # transformers' progress bar


def test_wide_table_and_markdown_have_every_column():
    run = kvbench("-m", "tiny", "-n", "2", "-w", "0", "--wide", "hi")
    assert run.returncode == 0, run.stderr
    blocks = [block.splitlines() for block in run.stdout.split("\n\n")]
    assert all(block[0].split()[:2] == ["prompt_tokens", "new_tokens"] for block in blocks)  # which row, each time
    assert ["prompt_tokens", "new_tokens", *(name for block in blocks for name in block[0].split()[2:])] == list(
        COLUMNS
    )
    assert max(map(len, run.stdout.splitlines())) <= 100 and "NaN" not in run.stdout
    assert blocks[0][1].split()[:3] == ["2", "2", "1"]  # no index column before the lengths
    run = kvbench("-m", "tiny", "-n", "2", "-w", "0", "--format", "markdown", "hi")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == "| " + " | ".join(COLUMNS) + " |"


def test_csv_from_stdin_sweeps():
    run = kvbench("-m", "tiny", "-n", "2,3", "-w", "0", "--format", "csv", stdin="hello\n")
    assert run.returncode == 0, run.stderr
    frame = pd.read_csv(io.StringIO(run.stdout))
    assert list(frame.columns) == list(COLUMNS)
    assert frame.prompt_tokens.tolist() == [5, 5] and frame.new_tokens.tolist() == [2, 3]


def test_json_from_a_file_equals_what_save_wrote(tmp_path):
    (tmp_path / "prompt.txt").write_text(PROMPT, encoding="utf-8")
    saved = tmp_path / "run.json"
    run = kvbench("-m", "tiny", "-n", "2", "-w", "0", "-r", "2", "--chat", "--format", "json",
                  "--prompt-file", str(tmp_path / "prompt.txt"), "--save", str(saved))  # fmt: skip
    assert run.returncode == 0, run.stderr
    printed = BenchmarkResult.from_json(run.stdout)
    assert printed == BenchmarkResult.read_json(saved)
    assert printed.model == "tiny" and printed.spec.chat is True and printed.spec.repeat == 2
    assert [len(m.seconds) for m in printed.measurements] == [2, 2] and printed.strategies == list(PAIR)


def test_the_notes_beside_machine_read_output_fit_100_columns():
    run = kvbench(
        "-m", "tiny", "-n", "2", "-w", "0", "-r", "2", "--cache", "off,dynamic,static", "--format", "json", "hi"
    )
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert max(map(len, lines)) <= 100 and any(line.startswith("2 rounds cannot rank these") for line in lines), lines
    assert [m["strategy"] for m in json.loads(run.stdout)["measurements"]] == ["off", "dynamic", "static"]


def test_compare_adds_the_change_and_names_the_changed_setting(tmp_path):
    saved = tmp_path / "before.json"
    assert kvbench("-m", "tiny", "-n", "2", "-w", "1", "-r", "2", "-q", "--save", str(saved), "hi").returncode == 0
    assert saved.is_file()
    run = kvbench("-m", "tiny", "-n", "2", "-w", "0", "-r", "2", "--format", "json", "--compare", str(saved), "hi")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert BenchmarkResult.from_dict(data).config.new_tokens == 2  # still loadable as a baseline itself
    (row,) = data["comparison"]["rows"]
    before = BenchmarkResult.read_json(saved)
    assert row["speedup_was"] == pytest.approx(before.speedup)
    assert row["speedup_change"] == pytest.approx(row["speedup"] / before.speedup - 1)
    assert isinstance(row["significant"], bool)
    assert "differs from the saved run: warmup_tokens: 1 saved, 0 now" in data["comparison"]["notes"]
    assert "differs from the saved run: warmup_tokens: 1 saved, 0 now" in run.stderr
    assert f"against {saved} (2 rounds saved, 2 now): " in said(run.stderr)  # the verdict names the baseline
    again = kvbench("-m", "tiny", "-n", "2", "-w", "1", "--save", str(tmp_path / "again.md"), "hi")
    assert again.returncode == 0 and f"saved {tmp_path / 'again.md'}\n" in again.stderr  # one line says where


def test_a_save_that_fails_after_the_run_keeps_the_table_and_says_why(tmp_path, monkeypatch, capsys):
    """The folder checked before the run is gone after it: the table still prints, one line says what was not
    written, and the status is 2."""
    import shutil

    import kvmagic.runner.benchmark
    from kvmagic.frontends.cli import main

    folder, measure = tmp_path / "runs", kvmagic.runner.benchmark.run_benchmark
    folder.mkdir()

    def run_then_lose_the_folder(*args, **kwargs):
        found = measure(*args, **kwargs)
        shutil.rmtree(folder)
        return found

    monkeypatch.setattr(kvmagic.runner.benchmark, "run_benchmark", run_then_lose_the_folder)
    assert main(["-m", "tiny", "-n", "2", "-w", "0", "--save", str(folder / "run.json"), "hi"]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines()[0].split()[:2] == ["prompt_tokens", "new_tokens"]
    assert said(err).endswith(f"kvbench: error: cannot write '{folder / 'run.json'}': No such file or directory\n")


ERRORS = [  # each message whole, except where argparse words it differently across Python versions
    (["--fast", "x"], None, "kvbench: error: unrecognized arguments: --fast (see kvbench --help)"),
    (["--repat", "3", "x"], None, "kvbench: error: unrecognized arguments: --repat x (did you mean --repeat? see kvbench --help)"),
    (["-n", "0", "x"], None, "kvbench: error: argument -n/--new-tokens: lengths must be >= 1, got 0 (see kvbench --help)"),
    (["--format", "xml", "x"], None, "kvbench: error: argument --format: invalid choice: 'xml' (choose from "),
    (["-m", "tiny"], " \n\t", "kvbench: error: the prompt is empty: give the text to generate from"),
    (["-m", "tiny", "--prompt-file", "/no/such/file"], None,
     "kvbench: error: cannot read the prompt from '/no/such/file': No such file or directory"),
    (["-m", "tiny", "--prompt-file", "-", "x"], None,
     "kvbench: error: give the prompt once: as an argument or with --prompt-file, not both"),
    (["-m", "tiny", "--tp", "2", "x"], None,  # the magic's --tp N: here torchrun starts the ranks
     "kvbench: error: --tp takes no N: torchrun --nproc-per-node 2 -m kvmagic --tp (see kvbench --help)"),
    (["-m", "tiny", "--save", "out.txt", "x"], None,
     "kvbench: error: cannot tell a format from the name 'out.txt': end it with .csv, .json, .md or .html"),
    (["-m", "tiny", "-n", "4", "-v", "foo", "hi"], None,  # the notebook's -v: argparse took foo for the prompt
     "kvbench: error: -v is the notebook's (%%kvbench), not the command's: keep the result with --save PATH.json"),
    (["-m", "tiny", "--var=foo", "hi"], None, "kvbench: error: --var is the notebook's (%%kvbench)"),
    (["-m", "tiny", "--plot", "hi"], None,
     "kvbench: error: --plot is the notebook's (%%kvbench), not the command's: plot a result saved with --save"),
    (["-m", "tiny,other", "--plot", "hi"], None,
     ("kvbench: error: --plot is the notebook's (%%kvbench), not the command's: plot a result saved with --save "
      "PATH.json in a notebook: BenchmarkResult.read_json(PATH).plot() (ModelsResult.read_json for -m A,B)")),
    (["-m", "tiny", "--no-expand", "hi"], None, "kvbench: error: --no-expand is the notebook's (%%kvbench)"),
    (["-m", "tiny", "--save", "/no/such/folder/out.json", "x"], None,
     "kvbench: error: cannot write '/no/such/folder/out.json': there is no folder '/no/such/folder'; create it"),
    (["-m", "tiny", "--save", "/proc/kvmagic-run.json", "x"], None,  # a folder that takes no file: before the run
     "kvbench: error: cannot write '/proc/kvmagic-run.json': No such file or directory; name a file in a folder you"),
    (["-m", "tiny", "--compare", "before.json", "--fail-on", "speedup:-500%", "x"], None,
     "kvbench: error: --fail-on 'speedup:-500%' can never fail: speedup cannot fall by 100% or more; write a fall"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "stdin", "message"), ERRORS)
def test_bad_input_is_one_message_and_exit_status_2(args, stdin, message):
    run = kvbench(*args, stdin=stdin)
    assert (run.returncode, run.stdout) == (2, "")
    assert said(run.stderr).startswith(message) and said(run.stderr).count("\n") == 1, run.stderr
    assert all(len(line) <= 100 for line in run.stderr.splitlines()), run.stderr


def test_a_model_that_cannot_load_is_one_message_and_exit_status_2():
    run = kvbench("-m", "no-such-org/no-such-model", "x")
    assert run.returncode == 2 and run.stdout == ""
    assert "Traceback" not in run.stderr
    error = said(run.stderr[run.stderr.index("kvbench: error: ") :])
    assert error.startswith("kvbench: error: cannot download 'no-such-org/no-such-model': ") and error.count("\n") == 1


def test_the_console_script_is_the_same_main():
    import kvmagic.frontends.cli

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["kvbench"].partition(":")
    assert getattr(import_module(module), name) is kvmagic.frontends.cli.main


def test_command_and_magics_take_the_same_options(shell):
    """Every shared option has the same spelling and meaning in both; only host-specific ones differ."""
    from kvmagic.frontends.cli import parser

    def options(actions):
        return {flag: (a.dest, a.type, a.default) for a in actions for flag in a.option_strings}

    command = options(parser()._actions)
    for name, kind, declared in (("kvbench", "cell", BENCH_OPTIONS), ("kvload", "line", LOAD_OPTIONS)):
        magic = options(shell.find_magic(name, kind).parser._actions)
        shared = {f for o in declared if o.hosts == ("magic", "cli") and not o.cli_flags for f in o.flags}
        shared |= {f"--no-{f[2:]}" for f in shared if f"--no-{f[2:]}" in magic}
        assert shared and {f: magic[f] for f in shared} == {f: command[f] for f in shared}
        # A flag may be spelled alike in both with a meaning of each host's own (--tp: torchrun's ranks, N processes).
        in_magic = {o.flags[-1] for o in declared if "magic" in o.hosts}
        for option in declared:
            doc = shell.find_magic(name, kind).__doc__
            assert (option.flags[-1] in in_magic) == (option.flags[-1] in doc)
    in_command = {o.spelling("cli")[-1] for o in (*LOAD_OPTIONS, *BENCH_OPTIONS) if "cli" in o.hosts}
    for option in (*LOAD_OPTIONS, *BENCH_OPTIONS):
        assert (option.spelling("cli")[-1] in in_command) == (option.spelling("cli")[-1] in command)


def test_every_option_only_the_notebook_has_is_named_with_what_the_command_does_instead():
    """A new notebook-only option fails here until the command says what it offers in its place."""
    from kvmagic.frontends.cli import _notebook_only, parser
    from kvmagic.frontends.options import BENCH_OPTIONS

    known = {flag for action in parser()._actions for flag in action.option_strings}
    only = [flag for o in BENCH_OPTIONS if "cli" not in o.hosts for flag in o.flags if flag not in known]
    assert {"-o", "-v", "--plot", "--expand"} <= set(only)
    for flag in only:
        assert _notebook_only([flag, "hi"]).startswith(f"{flag} is the notebook's (%%kvbench), not the command's: ")
