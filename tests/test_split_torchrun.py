"""``--tp`` for real: torchrun starting two ranks (gloo on this CPU) of the command, on tiny and on the
published Llama-3.2-1B shape cut to two layers with random weights, and the refusals a rank gives.

Each torchrun start costs seconds (two processes importing torch and transformers), so every run here is
a few tokens long and each test checks all it can of one run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvmagic.addons.random_weights.random_build import shipped_config
from kvmagic.core.strategy import Strategy
from kvmagic.results.result import BenchmarkResult

from .conftest import PROMPT, said

ROOT = Path(__file__).resolve().parent.parent
SHORT = ("-n", "4", "-w", "0", "-r", "2")


def torchrun(*args: str, ranks: int = 2, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``torchrun --standalone --nproc-per-node RANKS -m kvmagic ARGS`` as a user types it (a free port each time)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks)]
    return subprocess.run([*command, "-m", "kvmagic", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300, stdin=subprocess.DEVNULL)  # fmt: skip


def errors(run: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in said(run.stderr).splitlines() if line.startswith("kvbench: error:")]


def test_two_ranks_print_one_table_with_the_same_tokens_on_both(tmp_path: Path) -> None:
    run = torchrun(
        "-m", "tiny", "--tp", "-n", "16", "-r", "3", "--save", "run.json", PROMPT, cwd=tmp_path
    )  # as issue 23 asks
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [line.split()[:3] for line in lines if "prompt_tokens" in line] == [
        ["prompt_tokens", "new_tokens", "uncached_s"]
    ]
    assert lines[1].split()[-2] == "True"  # identical
    assert run.stderr.count("split over 2 ranks (gloo)") == 1  # the summary, from rank 0 alone
    result = BenchmarkResult.read_json(tmp_path / "run.json")  # written once, by rank 0
    assert any("every rank generated the same tokens" in note for note in result.notes())  # --wide's, past the three
    assert result.split is not None and (result.split.size, result.split.backend) == (2, "gloo")
    off, dynamic = result.measurements
    for m in (off, dynamic):
        assert m.ranks is not None and m.ranks.agree and len(set(m.ranks.tokens)) == 1 and len(m.ranks.tokens) == 2
        assert m.ranks.collectives > 0 and all(0 < s < m.ranks.profiled_s for s in m.ranks.communication_s)
    assert dynamic.ranks is not None and dynamic.kv_bytes == sum(dynamic.ranks.kv_bytes)
    assert dynamic.ranks.kv_bytes[0] == dynamic.ranks.kv_bytes[1] == dynamic.kv_bytes // 2  # 2 KV heads, one each
    sizes = result.facts.kv_sizes
    assert sizes is not None and dynamic.kv_bytes == sizes.after(*dynamic.config)
    frame = result.to_dataframe()
    assert frame["ranks"][0] == 2 and bool(frame["ranks_identical"][0])
    assert frame["cached_comm_ms"][0] > 0 and 0 < frame["cached_comm_share"][0] < 1


def test_a_comparison_of_strategies_is_one_table_timed_by_the_slowest_rank(tmp_path: Path) -> None:
    run = torchrun("-m", "tiny", "--tp", "-n", "8", "-r", "3", "--cache", "off,dynamic,static", "--save", "run.json",
                   PROMPT, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    headers = [line.split()[:3] for line in lines if "prompt_tokens" in line]
    assert headers == [["prompt_tokens", "new_tokens", "strategy"]]
    assert [line.split()[2] for line in lines[1:4]] == ["off", "dynamic", "static"] and "[95% CI]" in lines[0]
    result = BenchmarkResult.read_json(tmp_path / "run.json")
    assert any("every rank generated the same tokens" in note for note in result.notes())
    assert [str(m.strategy) for m in result.measurements] == ["off", "dynamic", "static"] and result.identical
    for m in result.measurements:
        assert m.ranks is not None and m.ranks.agree and len(m.ranks.tokens) == len(m.ranks.seconds) == 2
        assert m.seconds == tuple(map(max, *m.ranks.seconds))  # each run the slowest rank's own seconds
    own = [times for m in result.measurements if m.ranks for times in zip(*m.ranks.seconds)]
    assert any(min(times) < max(times) for times in own)  # so the fastest rank's would have read otherwise
    frame = result.to_dataframe()
    assert list(frame["ranks"]) == [2, 2, 2] and frame["ranks_identical"].all() and (frame["comm_ms"] > 0).all()
    static = result.measurements[2]
    assert static.ranks is not None and static.ranks.kv_bytes[0] == static.ranks.kv_bytes[1] > 0


def test_quality_a_quantized_width_and_a_reused_prefix_run_split(tmp_path: Path) -> None:
    (tmp_path / "text.txt").write_text("The cache keeps the keys and values of every token it has seen.")
    run = torchrun("-m", "tiny", "--tp", *SHORT, "--cache", "dynamic,quantized:quanto", "--kv-bits", "4", "--prefix",
                   "4", "--quality-text", "text.txt", "--format", "json", PROMPT, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    result = BenchmarkResult.from_dict(json.loads(run.stdout))
    ran = {str(m.strategy): m for m in result.measurements}
    assert list(ran) == ["off", "dynamic", "quantized:quanto", "dynamic+prefix"], result.skipped
    assert all(m.ranks is not None and m.ranks.agree for m in ran.values())
    quantized = ran["quantized:quanto"]
    assert quantized.quality is not None and quantized.quality.steps > 4  # along the text, not the 4 new tokens
    assert quantized.kv_bytes is not None and 0 < quantized.kv_bytes < ran["dynamic"].kv_bytes  # 4 bits
    assert result.prefix_tokens == 4 and "copied" in result.skipped["quantized:quanto+prefix"]
    # read back at the width the run chose: a quantized cache at 4 bits is not the one at its default
    assert quantized.strategy.bits == 4 and Strategy.of("quantized:quanto+prefix", 4) in result.skipped


def test_the_same_tokens_as_one_process(tiny) -> None:
    from kvmagic import run_benchmark

    run = torchrun("-m", "tiny", "--tp", *SHORT, "--format", "json", PROMPT)
    assert run.returncode == 0, run.stderr
    split = BenchmarkResult.from_dict(json.loads(run.stdout))  # one JSON document: rank 0's alone
    whole = run_benchmark(tiny, PROMPT, new_tokens=4, warmup_tokens=0)
    assert [m.generated_ids for m in split.measurements] == [m.generated_ids for m in whole.measurements]


def test_a_published_shape_with_random_weights_splits(tmp_path: Path) -> None:
    data = shipped_config("meta-llama/Llama-3.2-1B")
    assert data is not None
    data["num_hidden_layers"] = 2  # every width and the vocabulary as published: 32 heads, 8 KV heads
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text(json.dumps(data))
    run = torchrun("-m", str(tmp_path / "llama"), "--random-weights", "--tp", "-n", "2", "-w", "0", "--format", "json",
                   "The KV cache")  # fmt: skip
    assert run.returncode == 0, run.stderr
    result = BenchmarkResult.from_dict(json.loads(run.stdout))
    assert result.identical and all(m.ranks is not None and m.ranks.agree for m in result.measurements)
    dynamic = result.measurements[1]
    assert dynamic.ranks is not None and len(dynamic.ranks.kv_bytes) == 2
    assert dynamic.ranks.kv_bytes[0] == dynamic.kv_bytes // 2  # 4 of the 8 KV heads on each rank
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("kvmagic-random-*"))  # the built copy is removed


def test_a_model_without_a_plan_is_refused_by_every_rank_in_one_line(tmp_path: Path) -> None:
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 32, "n_head": 2, "n_layer": 1,
              "n_positions": 64, "vocab_size": 300}  # fmt: skip
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps(config))
    run = torchrun("-m", str(tmp_path / "gpt2"), "--random-weights", "--tp", "-n", "2", "hi")
    assert run.returncode != 0 and run.stdout == ""
    assert len(errors(run)) == 1, run.stderr  # rank 0's; torchrun then reports the ranks' status itself
    assert "has no tensor-parallel plan" in errors(run)[0] and "--tp" in errors(run)[0], errors(run)


def test_heads_the_ranks_do_not_divide_are_refused_in_one_line() -> None:
    run = torchrun("-m", "tiny", "--tp", "-n", "2", "hi", ranks=3)
    assert run.returncode != 0 and run.stdout == ""
    said_ = "'tiny' has 8 attention heads and 2 KV heads, which 3 ranks cannot share equally under --tp: use 2 ranks"
    assert errors(run) == [f"kvbench: error: {said_}"], run.stderr


@pytest.mark.parametrize("option", ["--predict", "--device-map cpu"])
def test_an_option_of_one_device_is_refused_by_the_ranks_before_loading(option: str) -> None:
    run = torchrun("-m", "tiny", "--tp", *option.split(), "-n", "2", "hi")
    assert run.returncode != 0 and len(errors(run)) == 1, run.stderr
    assert option.split()[0] in errors(run)[0] and "--tp" in errors(run)[0] and "drop one" in errors(run)[0]
    assert "tiny: Exaone4ForCausalLM" not in run.stderr  # refused before any weight loaded
