"""Does the test suite catch the bugs a person would write in the judging code? A fresh list, run one bug at a time.

``benchmarks/planted_bugs.json`` holds one-line slips in the code that judges measurements (intervals, ``-r auto``'s
stop rule, the trade-off frontier, the choice and the verdict, the comparison with a baseline, the regression gate,
models side by side), written from the code and ``docs/`` by a reviewer who had not read the tests. For each bug this
script copies the repository (without ``.venv`` and ``.git``) to one folder, applies the change (its ``original`` line
must occur exactly once), and runs:

1. ``mypy`` (the strict configuration in ``pyproject.toml``) in the copy: would ``make check`` reject it?
2. the fast unit tests of the judging layers (``[tool.mutmut]``'s test selection, its ``--deselect`` included, plus
   ``test_compare_words.py``, ``test_verdict.py`` and ``test_models.py``), ``-x``;
3. where those pass, the whole suite (``-n auto -x``).

A failure counts only where the test, run by itself three times over, fails with the bug and passes with the line
put back: one that does not (a test of timing, on a machine other work keeps busy) is set aside and the run repeated
without it, and the result names it (``set_aside``).

Each test run is the worktree's Python in the copy's root, so that the copy's ``kvmagic`` is the one imported
(``--check`` shows that it is, and that a bug planted there fails a test). Results are appended, one JSON object a
line, to ``benchmarks/planted_bugs.results.jsonl`` (``--results`` to change it): a bug already there is skipped, so
an interrupted run goes on where it stopped. The summary says how many of the bugs marked visible the tests caught,
with an exact (Clopper-Pearson) 95% interval, how many more mypy alone would reject, and the survivors.

    nice .venv/tf5/bin/python benchmarks/planted_bugs.py            # every bug not yet in the results
    .venv/tf5/bin/python benchmarks/planted_bugs.py --check         # the copy's kvmagic is the one tested
    .venv/tf5/bin/python benchmarks/planted_bugs.py --baseline      # the unchanged copy passes both stages
    .venv/tf5/bin/python benchmarks/planted_bugs.py --summary       # the figure, from the results so far
    .venv/tf5/bin/python benchmarks/planted_bugs.py --only B07,B12  # some bugs only
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUGS = ROOT / "benchmarks" / "planted_bugs.json"
RESULTS = ROOT / "benchmarks" / "planted_bugs.results.jsonl"
COPY = Path(os.environ.get("PLANTED_COPY", "/tmp/kvmagic-planted/repo"))  # one folder, reused: mypy's cache holds
MYPY_CACHE = COPY.parent / "mypy-cache"
PYTHON = ROOT / ".venv" / "tf5" / "bin" / "python"
MYPY = ROOT / ".venv" / "tf5" / "bin" / "mypy"
EXTRA_TESTS = ["tests/test_compare_words.py", "tests/test_verdict.py", "tests/test_models.py"]
LEFT_OUT = {".venv", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache", "__pycache__", "mutants"}
UNIT_LIMIT_S, SUITE_LIMIT_S, MYPY_LIMIT_S = 40 * 60, 90 * 60, 20 * 60
MOST_ASIDE = 8  # failures set aside in one stage before its answer is given up as undetermined


def unit_selection() -> list[str]:
    """``[tool.mutmut]``'s fast unit tests of the judging layers, with its deselections, and three more files."""
    import tomllib  # Python 3.11: this script runs in the project's environment, the package supports 3.10

    with (ROOT / "pyproject.toml").open("rb") as file:
        chosen = tomllib.load(file)["tool"]["mutmut"]["pytest_add_cli_args_test_selection"]
    return [*chosen, *EXTRA_TESTS]


def fresh_copy() -> Path:
    """The repository as it is, without its environments and history, at :data:`COPY`."""
    if COPY.exists():
        shutil.rmtree(COPY)
    shutil.copytree(ROOT, COPY, ignore=lambda _, names: [n for n in names if n in LEFT_OUT or n.endswith(".egg-info")])
    return COPY


def plant(copy: Path, bug: dict[str, object]) -> None:
    """Replace the bug's ``original`` line, which must occur exactly once, by its ``planted`` one."""
    path = copy / str(bug["file"])
    text = path.read_text()
    original, planted = str(bug["original"]), str(bug["planted"])
    if text.count(original) != 1:
        raise SystemExit(f"{bug['id']}: its original line occurs {text.count(original)} times in {bug['file']}")
    if original == planted:
        raise SystemExit(f"{bug['id']}: planted is the original")
    path.write_text(text.replace(original, planted))


def unplant(copy: Path, bug: dict[str, object]) -> None:
    """Put the bug's original line back: the file as the repository has it."""
    shutil.copy2(ROOT / str(bug["file"]), copy / str(bug["file"]))


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("KVMAGIC_CACHE", str(ROOT / ".venv" / "cache"))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONPATH", None)
    return env


def run(command: list[str], cwd: Path, limit: float) -> tuple[int, str, float]:
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=cwd, env=environment(), capture_output=True, text=True, timeout=limit)
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        code = -1
        output = f"timed out after {limit:.0f} s\n" + (expired.stdout or b"").decode(errors="replace")[-4000:]
    return code, output, time.monotonic() - started


_FAILED = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", re.MULTILINE)


def first_failure(output: str) -> str:
    """The first failing node id in a pytest run's short summary (``-ra``), or its last line where none is named."""
    found = _FAILED.findall(output)
    if found:
        return found[0]
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return f"(no node named) {lines[-1] if lines else ''}"


def pytest(copy: Path, arguments: list[str], limit: float) -> tuple[int, str, float]:
    return run([str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *arguments], copy, limit)


def mypy(copy: Path) -> tuple[bool, str]:
    """Whether ``mypy`` (strict, from pyproject.toml) rejects the copy, and its first error."""
    code, output, _ = run([str(MYPY), "--cache-dir", str(MYPY_CACHE), "--no-warn-unused-ignores"], copy, MYPY_LIMIT_S)
    errors = [line for line in output.splitlines() if ": error:" in line]
    return code != 0, errors[0] if errors else ("" if code == 0 else output.strip().splitlines()[-1:][0])


def alone(cwd: Path, node: str) -> int:
    """A failing test's status run by itself (no workers, no other tests beside it)."""
    return pytest(cwd, [node], UNIT_LIMIT_S)[0]


def confirmed(copy: Path, bug: dict[str, object], node: str) -> bool:
    """Whether ``node`` fails for the bug: by itself, three times over, it fails with the bug and passes with the
    line put back, in the same copy. A test of timing on a machine other work keeps busy fails now and then
    either way, and almost never in that pattern."""
    for _ in range(3):
        if alone(copy, node) == 0:
            return False
        unplant(copy, bug)
        unchanged = alone(copy, node)
        plant(copy, bug)
        if unchanged != 0:
            return False
    return True


def stage(copy: Path, bug: dict[str, object], arguments: list[str], limit: float) -> tuple[int, str, float, list[str]]:
    """One pytest run whose first failure must be :func:`confirmed`; one that is not is set aside and the run
    repeated without it (:data:`MOST_ASIDE` times at most, after which the status is -2: undetermined)."""
    aside: list[str] = []
    took = 0.0
    while True:
        code, output, spent = pytest(copy, [*arguments, *(f"--deselect={node}" for node in aside)], limit)
        took += spent
        node = first_failure(output)
        if code == 0 or node.startswith("(no node named)") or confirmed(copy, bug, node):
            return code, output, took, aside
        aside.append(node)
        if len(aside) > MOST_ASIDE:
            return -2, output, took, aside


def judge(bug: dict[str, object]) -> dict[str, object]:
    """Plant one bug in a fresh copy and run mypy, the unit tests and, where they pass, the whole suite."""
    copy = fresh_copy()
    plant(copy, bug)
    rejected, error = mypy(copy)
    found: dict[str, object] = {"id": bug["id"], "file": bug["file"], "mypy_rejects": rejected, "mypy_error": error}
    code, output, took, aside = stage(copy, bug, unit_selection(), UNIT_LIMIT_S)
    found.update(unit_rc=code, unit_s=round(took))
    where = "unit"
    if code == 0:
        code, output, took, more = stage(copy, bug, ["-n", "auto"], SUITE_LIMIT_S)
        found.update(suite_rc=code, suite_s=round(took))
        aside += more
        where = "suite"
    found["caught"] = None if code == -2 else code != 0  # None: too many failures that were not the bug's
    found["caught_by"] = f"{where}: {first_failure(output)}" if code not in (0, -2) else ""
    if aside:
        found["set_aside"] = aside  # failed, but not for this bug: passed alone, or failed unchanged too
    if code not in (0, 1, 2):  # 1: tests failed (2: -x under workers); anything else is worth a look
        found["note"] = output.strip()[-1500:]
    return found


def done_ids(results: Path) -> dict[str, dict[str, object]]:
    if not results.exists():
        return {}
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return {str(row["id"]): row for row in rows}


def clopper_pearson(caught: int, total: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval of ``caught`` out of ``total``, by bisection on the binomial tail."""

    def at_most(k: int, p: float) -> float:  # P(X <= k)
        return sum(math.comb(total, i) * p**i * (1 - p) ** (total - i) for i in range(k + 1))

    def solve(f: object, target: float) -> float:  # f decreasing in p on [0, 1]
        low, high = 0.0, 1.0
        for _ in range(100):
            middle = (low + high) / 2
            low, high = (middle, high) if f(middle) > target else (low, middle)  # type: ignore[operator]
        return (low + high) / 2

    tail = (1 - confidence) / 2
    lower = 0.0 if caught == 0 else solve(lambda p: at_most(caught - 1, p), 1 - tail)
    upper = 1.0 if caught == total else solve(lambda p: at_most(caught, p), tail)
    return lower, upper


def summary(bugs: list[dict[str, object]], results: dict[str, dict[str, object]]) -> str:
    by_id = {str(b["id"]): b for b in bugs}
    ran = [results[i] for i in by_id if i in results]
    undetermined = [r for r in ran if r["caught"] is None]  # to run again on a quieter machine
    visible = [r for r in ran if by_id[str(r["id"])]["visible"] and r["caught"] is not None]
    caught = [r for r in visible if r["caught"]]
    survivors = [r for r in visible if not r["caught"]]
    mypy_more = [r for r in survivors if r["mypy_rejects"]]
    lines = [f"{len(ran)} of {len(bugs)} bugs run; {len(visible)} marked visible"]
    if visible:
        low, high = clopper_pearson(len(caught), len(visible))
        lines.append(
            f"the tests caught {len(caught)} of {len(visible)} visible bugs: {len(caught) / len(visible):.1%} "
            f"(95% interval {low:.1%} to {high:.1%}, Clopper-Pearson); mypy alone would reject {len(mypy_more)} more"
        )
        unit = sum(1 for r in caught if str(r["caught_by"]).startswith("unit"))
        lines.append(f"caught by the fast unit tests: {unit}; only by the whole suite: {len(caught) - unit}")
    invisible = [r for r in ran if not by_id[str(r["id"])]["visible"]]
    if invisible:
        lines.append(
            f"marked invisible: {len(invisible)}, of which the tests caught {sum(r['caught'] for r in invisible)}"
        )
    aside = sorted({node for r in ran for node in r.get("set_aside", [])})  # type: ignore[attr-defined]
    if aside:
        lines.append(f"set aside as failing without the bug (timing on a busy machine): {', '.join(aside)}")
    rejected = sum(1 for r in ran if r["mypy_rejects"])
    lines.append(f"mypy rejects {rejected} of the {len(ran)} bugs run")
    for row in undetermined:
        lines.append(f"  undetermined (too many failures not the bug's): {row['id']}")
    for row in survivors:
        bug = by_id[str(row["id"])]
        lines.append(f"  survived: {row['id']} {bug['file']}: {bug['what']}")
    return "\n".join(lines)


def check() -> None:
    """The copy's kvmagic is the one the tests import, and a bug planted in it fails them."""
    copy = fresh_copy()
    code, output, _ = run([str(PYTHON), "-c", "import kvmagic; print(kvmagic.__file__)"], copy, 120)
    print("python -c in the copy imports", output.strip())
    probe = copy / "tests" / "test_zz_which_kvmagic.py"
    probe.write_text(
        "import kvmagic\n\n\ndef test_which():\n    print('KVMAGIC_FROM', kvmagic.__file__)\n    "
        f"assert kvmagic.__file__.startswith({str(copy)!r})\n"
    )
    code, output, _ = pytest(copy, ["-s", str(probe.relative_to(copy))], 600)
    print("pytest in the copy imports:", re.findall(r"KVMAGIC_FROM (\S+)", output), "rc", code)
    probe.unlink()
    obvious = {
        "id": "B00",
        "file": "kvmagic/core/intervals.py",
        "original": "    return math.exp(statistics.median(log_speedups(uncached, cached)))",
        "planted": "    return 2 * math.exp(statistics.median(log_speedups(uncached, cached)))",
    }
    plant(copy, obvious)
    code, output, took = pytest(copy, ["tests/test_stats.py", "tests/test_oracles.py"], 1200)
    print(f"an obvious bug in the copy: rc {code} in {took:.0f} s, first failure {first_failure(output)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated bug ids")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--summary", action="store_true", help="print the figure from the results so far")
    parser.add_argument("--check", action="store_true", help="show that the copy's kvmagic is the one tested")
    parser.add_argument("--baseline", action="store_true", help="run both stages on the unchanged copy")
    args = parser.parse_args()
    bugs = json.loads(BUGS.read_text())
    if args.check:
        return check()
    if args.baseline:
        copy = fresh_copy()
        rejected, error = mypy(copy)
        print(f"mypy on the unchanged copy: {'rejects: ' + error if rejected else 'passes'}", flush=True)
        for name, arguments in (("unit", unit_selection()), ("suite", ["-n", "auto"])):
            code, output, took = pytest(copy, arguments, SUITE_LIMIT_S)
            print(f"{name}: rc {code} in {took:.0f} s; {output.strip().splitlines()[-1]}", flush=True)
            if code:
                print(first_failure(output), output[-3000:], flush=True)
        return None
    if not args.summary:
        wanted = set(args.only.split(",")) if args.only else None
        for bug in bugs:
            if (wanted and bug["id"] not in wanted) or bug["id"] in done_ids(args.results):
                continue
            started = time.monotonic()
            found = judge(bug)
            with args.results.open("a") as file:
                file.write(json.dumps(found) + "\n")
            verdict = f"caught by {found['caught_by']}" if found["caught"] else "SURVIVED"
            verdict = "UNDETERMINED" if found["caught"] is None else verdict
            print(
                f"{bug['id']} {bug['file']}: {verdict}; mypy {'rejects' if found['mypy_rejects'] else 'passes'} "
                f"({time.monotonic() - started:.0f} s)",
                flush=True,
            )
    print(summary(bugs, done_ids(args.results)))
    return None


if __name__ == "__main__":
    main()
