"""--fail-on: thresholds read and judged by hand-checked numbers; the command's exit status on injected runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from kvmagic.addons.baseline.compare import compare
from kvmagic.addons.baseline.gate import Threshold, fail_on_form, gate, judge, parse_fail_on
from kvmagic.core.config import Config
from kvmagic.errors import KVMagicError
from kvmagic.frontends import cli
from kvmagic.results.measurement import Measurement
from kvmagic.results.result import BenchmarkResult

from .conftest import said
from .records import rounds

ROOT = Path(__file__).resolve().parent.parent


def _measurement(pairs: list[tuple[float, float]], prompt_tokens: int = 8, new_tokens: int = 16) -> list[Measurement]:
    return rounds((prompt_tokens, new_tokens), pairs)


def _result(*measurements: list[Measurement]) -> BenchmarkResult:
    return BenchmarkResult(model="tiny", measurements=[m for pair in measurements for m in pair])


# Five rounds each: a speed-up of 2.0 (per-round 1.96 to 2.04) before.
BASE = [(1.96, 1.0), (2.0, 1.0), (2.04, 1.0), (2.0, 1.0), (1.98, 1.0)]
SAME = BASE
SLOWER_CACHE = [(1.96, 1.2), (2.0, 1.2), (2.04, 1.2), (2.0, 1.2), (1.98, 1.2)]  # speed-up 1.667: -16.7%
INSIDE_NOISE = [(1.6, 1.0), (2.4, 1.0), (1.9, 1.0), (1.7, 1.0), (2.3, 1.0)]  # median 1.9 (-5%... but overlapping)


def test_reads_each_form():
    assert parse_fail_on("speedup:-5%") == (Threshold("speedup", -0.05),)
    assert parse_fail_on(["cached_s:+10%, uncached_s:+12.5%", " speedup : - 0.5 % "]) == (
        Threshold("cached_s", 0.10),
        Threshold("uncached_s", 0.125),
        Threshold("speedup", -0.005),
    )
    assert str(Threshold("speedup", -0.05)) == "speedup:-5%" and str(Threshold("cached_s", 0.1)) == "cached_s:+10%"


@pytest.mark.parametrize("spec", ["speedup:5%", "speedup:-5", "speed:-5%", "tok_s:+1%", "speedup-5%", "", "a,,b"])
def test_a_bad_spec_names_the_accepted_form(spec):
    with pytest.raises(KVMagicError) as raised:
        parse_fail_on(spec)
    assert said(raised.value).endswith(f"write {fail_on_form()}") and "\n" not in said(raised.value)


def test_a_strategy_comparison_is_judged_on_the_metrics_its_rows_have():
    """A --cache comparison has one row per strategy: seconds and speedup, no uncached_s or cached_s."""
    assert parse_fail_on("seconds:+10%,speedup:-5%", strategies=True) == (
        Threshold("seconds", 0.10),
        Threshold("speedup", -0.05),
    )
    with pytest.raises(KVMagicError) as raised:
        parse_fail_on("cached_s:+10%", strategies=True)
    assert "one of speedup, seconds" in said(raised.value)
    saved = {(Config(8, 16), "static"): {"seconds": 1.0, "speedup": 2.0}}
    rows = [{"prompt_tokens": 8, "new_tokens": 16, "strategy": "static", "seconds": 1.3, "speedup": 1.6,
             "significant": True}]  # fmt: skip
    verdict = judge(rows, saved, parse_fail_on("seconds:+10%", strategies=True))
    assert verdict.failed == ["8+16 tokens, static: seconds 1 -> 1.3 (+30.0%, past seconds:+10%) and significant"]


def test_crossing_is_strictly_past_the_threshold():
    drop = Threshold("speedup", -0.05)
    assert not drop.crossed(1.9, 2.0)  # exactly -5%: not past it
    assert drop.crossed(1.89, 2.0) and not drop.crossed(2.5, 2.0)
    rise = Threshold("cached_s", 0.10)
    assert not rise.crossed(1.1, 1.0) and rise.crossed(1.11, 1.0) and not rise.crossed(0.5, 1.0)


def test_judge_fails_only_significant_rows_past_a_threshold():
    saved = {(Config(8, 16), "dynamic"): {"speedup": 2.0, "cached_s": 1.0},
             (Config(8, 32), "dynamic"): {"speedup": 2.0, "cached_s": 1.0}}  # fmt: skip
    rows = [
        {"prompt_tokens": 8, "new_tokens": 16, "speedup": 1.5, "cached_s": 1.3, "significant": True},
        {"prompt_tokens": 8, "new_tokens": 32, "speedup": 1.5, "cached_s": 1.3, "significant": False},
        {"prompt_tokens": 8, "new_tokens": 64, "speedup": 0.1, "cached_s": 9.0, "significant": True},  # unsaved
    ]
    verdict = judge(rows, saved, parse_fail_on("speedup:-5%,cached_s:+10%"))
    assert verdict.failed == [
        "8+16 tokens: speedup 2 -> 1.5 (-25.0%, past speedup:-5%) and significant",
        "8+16 tokens: cached_s 1 -> 1.3 (+30.0%, past cached_s:+10%) and significant",
    ]
    assert verdict.undecided == [] and not verdict.passed


def test_judge_without_a_verdict_or_a_matching_row_cannot_pass():
    saved = {(Config(8, 16), "dynamic"): {"speedup": 2.0}}
    unknown = [{"prompt_tokens": 8, "new_tokens": 16, "speedup": 1.0, "significant": None}]
    verdict = judge(unknown, saved, parse_fail_on("speedup:-5%"))
    assert verdict.failed == []
    (line,) = verdict.undecided
    assert line == (
        "8+16 tokens: speedup 2 -> 1 (-50.0%, past speedup:-5%), but the comparison has no verdict on whether "
        "that is noise"
    )
    within = [{"prompt_tokens": 8, "new_tokens": 16, "speedup": 1.99, "significant": None}]
    assert judge(within, saved, parse_fail_on("speedup:-5%")).passed  # no verdict needed inside the threshold
    elsewhere = [{"prompt_tokens": 9, "new_tokens": 16, "speedup": 2.0, "significant": False}]
    assert not judge(elsewhere, saved, parse_fail_on("speedup:-5%")).passed


def test_gate_over_a_comparison_of_injected_runs():
    base = _result(_measurement(BASE))
    assert gate(compare(_result(_measurement(SAME)), base), parse_fail_on("speedup:-5%")).passed
    slower = gate(compare(_result(_measurement(SLOWER_CACHE)), base), parse_fail_on("cached_s:+10%,speedup:-5%"))
    assert [line.split(" (")[0] for line in slower.failed] == [
        "8+16 tokens: cached_s 1 -> 1.2",
        "8+16 tokens: speedup 2 -> 1.667",
    ]
    noisy = compare(_result(_measurement(INSIDE_NOISE)), base)
    assert noisy.rows()[0]["significant"] is False
    assert gate(noisy, parse_fail_on("speedup:-3%")).passed  # -5% is past -3%, but inside the noise


@pytest.fixture
def injected(monkeypatch, tmp_path):
    """The command with its model and measurement replaced: the run 'now' has the times the test picks."""
    import kvmagic.model.loading
    import kvmagic.runner.benchmark

    now: dict[str, BenchmarkResult] = {}
    monkeypatch.setattr(kvmagic.model.loading, "load_model", lambda **_: SimpleNamespace(summary=lambda: "injected"))
    monkeypatch.setattr(kvmagic.runner.benchmark, "run_benchmark", lambda *_, **__: now["result"])
    base = tmp_path / "base.json"
    _result(_measurement(BASE)).save(base)

    def run(pairs: list[tuple[float, float]] | BenchmarkResult, *spec: str) -> int:
        now["result"] = pairs if isinstance(pairs, BenchmarkResult) else _result(_measurement(pairs))
        return cli.main(["-m", "tiny", "--compare", str(base), *spec, "prompt"])

    return run


def test_exit_status_of_the_gate(injected, capsys):
    assert injected(SAME, "--fail-on", "speedup:-5%") == 0
    assert injected(INSIDE_NOISE, "--fail-on", "speedup:-3%") == 0
    capsys.readouterr()
    assert injected(SLOWER_CACHE, "--fail-on", "uncached_s:+10%", "--fail-on", "cached_s:+10%") == 1
    stderr = capsys.readouterr().err.splitlines()
    assert [line for line in stderr if line.startswith("kvbench: regression")] == [
        "kvbench: regression: 8+16 tokens: cached_s 1 -> 1.2 (+20.0%, past cached_s:+10%) and significant"
    ]
    assert injected(SLOWER_CACHE, "-q", "--fail-on", "speedup:-5%") == 1  # quiet still gates
    assert injected(SLOWER_CACHE, "--fail-on", "speedup:-20%") == 0


def test_single_rounds_cannot_be_judged(injected, capsys):
    assert injected(SLOWER_CACHE[:1], "--fail-on", "speedup:-5%") == 2
    err = said(capsys.readouterr().err)
    assert err.splitlines()[-1] == (
        "kvbench: error: --fail-on cannot judge a change timed in one round: time both runs with -r 2 or more"
    )
    assert injected(SLOWER_CACHE[:1], "-q", "--fail-on", "speedup:-5%") == 2
    assert capsys.readouterr().err.splitlines() == [err.splitlines()[-1]]  # one line, nothing that repeats it


def test_a_run_that_matches_no_saved_row_says_to_time_what_the_saved_one_did(injected, capsys):
    """-n 32 against a baseline timed at -n 16: no row to judge, which more rounds would not change."""
    assert injected(_result(_measurement(SAME, new_tokens=32)), "-q", "--fail-on", "speedup:-10%") == 2
    assert capsys.readouterr().err == (
        "kvbench: error: --fail-on matches no saved row: give the saved run's prompt, -n, -p, -b and --cache\n"
    )


def test_a_metric_the_saved_rows_lack_is_one_line_not_a_traceback(injected, capsys):
    """A comparison of strategies has seconds and no cached_s; the plain run the other way round."""
    from kvmagic.core.spec import BenchSpec

    from .records import timed

    found = [timed((8, 16), "off", [u for u, _ in BASE]), timed((8, 16), "dynamic", [c for _, c in BASE])]
    strategies = BenchmarkResult("tiny", found, spec=BenchSpec(cache="off,dynamic"))
    assert injected(strategies, "-q", "--cache", "off,dynamic", "--fail-on", "seconds:+10%") == 2
    assert capsys.readouterr().err == (
        "kvbench: error: --fail-on cannot judge seconds, which the saved run's rows lack: judge speedup\n"
    )
    assert injected(strategies, "-q", "--cache", "off,dynamic", "--fail-on", "speedup:-10%") == 0  # both have it
    plain = _result(_measurement(BASE))
    assert gate(compare(plain, strategies), parse_fail_on("cached_s:+10%")).fix == (
        "cannot judge cached_s, which the saved run's rows lack: judge speedup"
    )


MISUSE = [
    (["--fail-on", "speedup:-5%"], "--fail-on judges a change against a saved run: add --compare BASE.json"),
    (["--compare", "b.json", "--fail-on", "speedup<5%"], f"cannot read --fail-on 'speedup<5%': write {fail_on_form()}"),
    (
        ["--cache", "off,dynamic", "--compare", "b.json", "--fail-on", "cached_s:+5%"],
        f"cannot read --fail-on 'cached_s:+5%': write {fail_on_form(strategies=True)}",
    ),
]


@pytest.mark.parametrize(("args", "message"), MISUSE)
def test_misuse_is_one_message_and_exit_status_2(args, message, capsys):
    assert cli.main(["-m", "tiny", *args, "prompt"]) == 2
    assert said(capsys.readouterr().err) == f"kvbench: error: {message}\n"


def test_as_git_bisect_run_would_call_it(tmp_path):
    """A real run on tiny against baselines no plausible measurement comes near: 1000x (regressed) and 0.001x."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    statuses = {}
    for name, uncached in (("regressed", 1000.0), ("improved", 0.001)):
        pairs = [(uncached * (1 + i / 100), 1.0) for i in range(5)]
        _result(_measurement(pairs, prompt_tokens=5, new_tokens=2)).save(tmp_path / f"{name}.json")
        command = [sys.executable, "-m", "kvmagic", "-m", "tiny", "-n", "2", "-w", "0", "-r", "5",
                   "-q", "--compare", str(tmp_path / f"{name}.json"), "--fail-on", "speedup:-5%", "hello"]  # fmt: skip
        run = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
                             stdin=subprocess.DEVNULL)  # fmt: skip
        statuses[name] = run.returncode
        assert ("kvbench: regression: 5+2 tokens: speedup" in run.stderr) == (name == "regressed"), run.stderr
    assert statuses == {"regressed": 1, "improved": 0}


def test_the_accepted_form_names_every_metric_and_an_example_of_each_kind():
    assert fail_on_form() == (
        "METRIC:+N% or METRIC:-N% with METRIC one of speedup, uncached_s, cached_s, e.g. speedup:-5% or "
        "cached_s:+10%; several comma-separated"
    )
    assert fail_on_form(strategies=True) == (
        "METRIC:+N% or METRIC:-N% with METRIC one of speedup, seconds, e.g. speedup:-5% or seconds:+10%; several "
        "comma-separated (a comparison of strategies has one row per strategy, with its seconds)"
    )
    with pytest.raises(KVMagicError) as raised:
        parse_fail_on([])  # a repeated flag given no time at all
    assert said(raised.value) == f"fail_on is empty: write {fail_on_form()}"
    with pytest.raises(KVMagicError) as raised:
        parse_fail_on(" tok_s :+1% ")
    assert said(raised.value) == f"cannot read fail_on 'tok_s :+1%': write {fail_on_form()}"


def test_a_threshold_of_no_change_fails_any_rise_and_no_fall():
    """``cached_s:+0%``: any slower cached run past float noise; a faster one is never a regression."""
    (still,) = parse_fail_on("cached_s:+0%")
    assert still == Threshold("cached_s", 0.0) and str(still) == "cached_s:+0%"
    assert still.crossed(1.01, 1.0) and not still.crossed(0.5, 1.0) and not still.crossed(1.0, 1.0)
    assert str(Threshold("speedup", -0.125)) == "speedup:-12.5%"


def test_a_metric_a_row_lacks_is_undecided_and_the_others_are_still_judged():
    saved = {(Config(8, 16), "static"): {"seconds": 1.0, "speedup": 2.0}}
    rows = [{"prompt_tokens": 8, "new_tokens": 16, "strategy": "static", "seconds": 1.3, "speedup": 1.6,
             "significant": True}]  # fmt: skip
    verdict = judge(rows, saved, (Threshold("cached_s", 0.1), Threshold("speedup", -0.05)))
    assert verdict.undecided == ["8+16 tokens, static: no cached_s to judge"]
    assert verdict.fix == "cannot judge cached_s, which this run's rows lack: judge speedup"
    assert verdict.failed == ["8+16 tokens, static: speedup 2 -> 1.6 (-20.0%, past speedup:-5%) and significant"]
    nothing = judge(rows, {}, (Threshold("speedup", -0.05),))
    assert nothing.failed == [] and nothing.undecided == [
        "no row matches a saved row (the same prompt_tokens, new_tokens, batch and strategy): nothing to judge"
    ]
    assert not nothing.passed and judge(rows, saved, (Threshold("seconds", 0.5),)).passed
