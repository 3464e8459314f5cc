"""--replay FILE: a saved run's request rerun and compared with it in one step, on tiny. Every assertion is on
structure (rows, the request, the lines said), never on a time."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvmagic.addons.baseline.compare import Comparison
from kvmagic.frontends.cli import main
from kvmagic.results.result import BenchmarkResult

from .conftest import raises_usage, said

DATA = Path(__file__).resolve().parent / "data"
PROMPT = "The KV cache"  # the prompt the older files in tests/data were saved with (their SHA-256 says so)
SHORT = ["-w", "0", "--threads", "1", "-q"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, tiny) -> Path:
    """A comparison of strategies on tiny, two rounds, saved as the current format."""
    from kvmagic import run_benchmark

    path = tmp_path_factory.mktemp("replay") / "run.json"
    run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, repeat=2, cache="off,dynamic", quality=False).save(path)
    return path


def _json(path: Path, capsys: pytest.CaptureFixture[str], *words: str) -> tuple[dict, str]:
    capsys.readouterr()
    status = main(["--replay", str(path), "-m", "tiny", "--format", "json", *words])
    out, err = capsys.readouterr()
    assert status == 0, err
    return json.loads(out), err


def test_a_saved_run_replays_and_compares_in_one_step(saved: Path, capsys) -> None:
    data, _ = _json(saved, capsys, "-w", "0", "--threads", "1")
    old = BenchmarkResult.read_json(saved)
    again = BenchmarkResult.from_dict(data)
    assert again.spec.cache == old.spec.cache and again.spec.new_tokens == old.spec.new_tokens
    assert again.spec.repeat == old.spec.repeat == 2 and again.facts.prompt == PROMPT
    assert [(m.config, str(m.strategy)) for m in again.measurements] == [
        (m.config, str(m.strategy)) for m in old.measurements
    ]
    compared = data["comparison"]
    assert [row["strategy"] for row in compared["rows"]] == ["off", "dynamic"]
    assert {"speedup_was", "speedup_change", "significant"} <= set(compared["rows"][1])
    assert compared["notes"][0].startswith(f"against {saved} (2 rounds saved, 2 now)")


def test_an_option_given_beside_it_overrides_the_files(saved: Path, capsys) -> None:
    data, _ = _json(saved, capsys, "-r", "1", "-n", "3", "-w", "0")
    again = BenchmarkResult.from_dict(data)
    assert again.spec.repeat == 1 and again.spec.new_tokens == (3,)
    assert again.spec.cache == BenchmarkResult.read_json(saved).spec.cache  # what was not given is the file's
    notes = data["comparison"]["notes"]
    assert "no saved row to compare with for off at 12+3 tokens, dynamic at 12+3 tokens" in notes


def test_a_strategy_that_cannot_run_here_is_said_in_one_line_and_the_rest_runs(saved: Path, tmp_path, capsys) -> None:
    data = json.loads(saved.read_text())
    data["spec"]["cache"] += ["madeup_cache", "quantized:bogus"]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    found, err = _json(edited, capsys, "-w", "0", "-r", "1")
    lines = [line for line in said(err).splitlines() if "madeup_cache" in line]
    assert len(lines) == 1 and lines[0].startswith("not replayed here: ") and "quantized:bogus" in lines[0]
    assert sum("not replayed here" in line for line in err.splitlines()) == 1
    assert [str(s) for s in BenchmarkResult.from_dict(found).strategies] == ["off", "dynamic"]


def test_a_missing_backend_is_named_as_not_installed(saved: Path, tmp_path, capsys) -> None:
    import importlib.util

    if importlib.util.find_spec("hqq") is not None:
        pytest.skip("hqq is installed here: quantized:hqq runs")
    data = json.loads(saved.read_text())
    data["spec"]["cache"].append("quantized:hqq")
    edited = tmp_path / "hqq.json"
    edited.write_text(json.dumps(data))
    _, err = _json(edited, capsys, "-w", "0", "-r", "1")
    assert "not replayed here: quantized:hqq (hqq is not installed)" in said(err)


def test_an_older_format_replays_with_its_prompt_given(tmp_path, capsys) -> None:
    old = tmp_path / "format2.json"
    shutil.copy(DATA / "format2_plain.json", old)
    capsys.readouterr()
    assert main(["--replay", str(old), "-m", "tiny", *SHORT]) == 2  # it kept only the prompt's SHA-256
    assert "was saved before kvmagic kept prompts: give the prompt it ran" in said(capsys.readouterr().err)
    data, _ = _json(old, capsys, "-n", "2", "-r", "1", "--no-steps", "-w", "0", PROMPT)
    again = BenchmarkResult.from_dict(data)
    assert again.plain and again.facts.prompt == PROMPT and data["comparison"]["rows"][0]["speedup_was"] > 0
    assert main(["--replay", str(old), "-m", "tiny", *SHORT, "another prompt"]) == 2
    assert "the one given differs: drop it" in said(capsys.readouterr().err)


def test_a_report_page_replays_as_its_json(saved: Path, tmp_path, capsys) -> None:
    page = tmp_path / "report.html"
    BenchmarkResult.read_json(saved).save(page)
    data, _ = _json(page, capsys, "-w", "0", "-r", "1")
    assert data["comparison"]["notes"][0].startswith(f"against {page}")
    (tmp_path / "other.html").write_text("<html>not a report</html>")
    assert main(["--replay", str(tmp_path / "other.html"), "-m", "tiny"]) == 2
    assert "holds no kvmagic run: replay the run's JSON" in said(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["--replay", "nope.json"], "--replay cannot read 'nope.json': No such file or directory: give a run saved"),
        (["--replay", "pyproject.toml"], "is not JSON: give a run saved with --save PATH.json"),
        (["--replay", "RUN", "--compare", "RUN"], "--replay compares with the run it reruns: drop --compare"),
        (["--replay", "RUN", "-m", "tiny,tiny"], "--replay reruns one model's run: name one model with -m"),
        (["--replay", "RUN", "-m", "tiny", "another prompt"], "the one given differs: drop it"),
    ],
)
def test_bad_input_is_one_line_that_says_the_fix(words: list[str], message: str, saved: Path, capsys) -> None:
    capsys.readouterr()
    assert main([str(saved) if word == "RUN" else word for word in words]) == 2
    err = capsys.readouterr().err
    assert message in said(err) and len(said(err).splitlines()) == 1, err


def test_a_model_not_here_says_to_pass_m(saved: Path, tmp_path, capsys) -> None:
    data = json.loads(saved.read_text())
    data["model"] = "nobody/no-such-model"
    edited = tmp_path / "elsewhere.json"
    edited.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["--replay", str(edited), *SHORT]) == 2
    err = said(capsys.readouterr().err)
    assert "model 'nobody/no-such-model' is not here" in err and "pass -m MODEL to replay it on another" in err


def test_another_device_is_said_and_the_run_is_here(saved: Path, tmp_path, capsys) -> None:
    data = json.loads(saved.read_text())
    data["metadata"]["device"] = "cuda:0 (NVIDIA H100 80GB HBM3)"
    data["metadata"]["dtype"] = "float16"
    edited = tmp_path / "gpu.json"
    edited.write_text(json.dumps(data))
    found, err = _json(edited, capsys, "-w", "0", "-r", "1")
    from kvmagic.addons.replay.here import here_device

    if here_device() != "cuda":
        assert f"saved on cuda:0 (NVIDIA H100 80GB HBM3), replayed on {here_device()}" in said(err)
        assert found["metadata"]["dtype"] == "float32"  # auto here, not the GPU's float16


def test_the_magic_replays_on_the_model_loaded(shell, saved: Path) -> None:
    comparison = shell.run_line_magic("kvbench", f"--replay {saved} -o -w 0")
    assert isinstance(comparison, Comparison) and comparison.name == str(saved)
    assert comparison.result.spec.cache == comparison.baseline.spec.cache and comparison.result.facts.prompt == PROMPT
    again = shell.run_cell_magic("kvbench", f"--replay {saved} -o -r 1 -w 0", f"{PROMPT}\n")  # the saved prompt
    assert again.result.spec.repeat == 1
    with raises_usage(r"^%?.*--replay reruns the prompt it saved, and the one given differs"):
        shell.run_cell_magic("kvbench", f"--replay {saved}", "another prompt\n")
    with raises_usage(r"--replay compares with the run it reruns: drop --compare"):
        shell.run_line_magic("kvbench", f"--replay {saved} --compare {saved}")
