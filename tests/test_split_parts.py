"""The parts of ``--tp`` that need no ranks: time covered by collectives, a request as the command's words, the
ranks' views put together, the columns and notes, torchrun's report read, and the command's refusals."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest

from kvmagic.addons.random_weights.random_build import config_from_dict, shipped_config
from kvmagic.addons.split import process_group, split_rank
from kvmagic.addons.split.split_launch import failure, outcome, root_cause
from kvmagic.addons.split.split_loading import check_split
from kvmagic.addons.split.split_probe import covered_seconds, is_collective
from kvmagic.addons.split.split_records import Ranks, Split
from kvmagic.addons.split.split_request import bench_words, check_split_request, load_words
from kvmagic.addons.split.split_run import merged, tokens_digest
from kvmagic.core.config import Config
from kvmagic.core.quality import Quality
from kvmagic.core.spec import BenchSpec
from kvmagic.core.stop import FixedRounds
from kvmagic.core.strategy import REFERENCE, Strategy
from kvmagic.errors import KVMagicError
from kvmagic.frontends.cli import main, parser
from kvmagic.frontends.options import bench_spec, defaults
from kvmagic.measure import lockstep
from kvmagic.measure.strategies import Setup
from kvmagic.results.measurement import Measurement
from kvmagic.results.result import BenchmarkResult
from kvmagic.runner.plan import Plan

from .conftest import said
from .records import pair

# torchrun's report of a rank killed by SIGKILL, as torch 2.13 prints it (the other rank then stopped by it).
REPORT = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
kvmagic FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_21:40:02
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 4242)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4242
============================================================"""


def test_covered_seconds_counts_nested_and_overlapping_spans_once() -> None:
    assert covered_seconds([]) == 0
    assert covered_seconds([(0, 1), (0.2, 0.5), (2, 3)]) == pytest.approx(2.0)  # nested inside (0, 1)
    assert covered_seconds([(2, 4), (0, 1), (3, 6)]) == pytest.approx(5.0)  # overlapping, out of order
    assert covered_seconds([(0, 1), (1, 2)]) == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("name", "collective"),
    [("gloo:all_reduce", True), ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", True), ("c10d::allreduce_", True),
     ("_c10d_functional::wait_tensor", True), ("aten::mm", False), ("kvmagic.generate", False)],
)  # fmt: skip
def test_what_counts_as_a_collective(name: str, collective: bool) -> None:
    assert is_collective(name) is collective


@pytest.mark.parametrize(
    "changes",
    [{}, {"new_tokens": (2, 3), "repeat": "auto", "ci_target": 0.5, "auto_cap": 1.0}, {"prompt_tokens": (4, 8)},
     {"chat": True, "steps": True, "threads": 1, "batch": (2,), "max_seconds": 0.0, "warmup_tokens": 0},
     {"quality": False}, {"prefix": 4, "cache": ("off", "dynamic")}, {"prefix": "marked"}],
)  # fmt: skip
def test_a_request_as_the_command_words_reads_back_the_same(changes: dict) -> None:
    spec = BenchSpec.of(**changes)
    args = parser().parse_args([*bench_words(spec), "a prompt"])
    assert bench_spec(args, defaults()) == spec


def test_the_load_words_leave_the_device_map_to_the_ranks() -> None:
    load = {"name": "tiny", "dtype": "auto", "device_map": "cpu", "revision": None, "gguf_file": None,
            "attn_implementation": "eager", "trust_remote_code": False, "random_weights": False}  # fmt: skip
    assert load_words(load) == ["-m", "tiny", "--dtype", "auto", "--attn-implementation", "eager"]


def test_a_split_is_checked_against_the_config() -> None:
    llama = config_from_dict(shipped_config("meta-llama/Llama-3.2-1B") or {})
    check_split("meta-llama/Llama-3.2-1B", llama, 8)  # 32 heads and 8 KV heads: 2, 4 or 8 ranks
    with pytest.raises(KVMagicError, match=r"32 attention heads and 8 KV heads, which 3 ranks .*: use 2 or 4 or 8"):
        check_split("meta-llama/Llama-3.2-1B", llama, 3)
    gpt2 = config_from_dict({"model_type": "gpt2"})
    with pytest.raises(KVMagicError, match=r"^'gpt2' \(GPT2Config\) has no tensor-parallel plan"):
        check_split("gpt2", gpt2, 2)


ONE_DEVICE = {"predict": True, "limits": True, "frontier": "predict"}


@pytest.mark.parametrize("name", list(ONE_DEVICE))
def test_options_of_one_device_are_refused_with_a_split(name: str) -> None:
    """Each as the parsed options have it and as the request holds it; a comparison of strategies runs split."""
    for request in (argparse.Namespace(tp=True, **{name: ONE_DEVICE[name]}), BenchSpec.of(**{name: ONE_DEVICE[name]})):
        with pytest.raises(KVMagicError) as caught:
            check_split_request(request)
        assert caught.value.params == (name, "tp")
    compared = BenchSpec.of(cache="off,static,quantized:quanto", kv_bits=4, compile=True, prefix=4, quality_text="x")
    check_split_request(compared)
    check_split_request(BenchSpec(steps=True, repeat="auto", batch=(2,), quality=False))


def test_a_strategy_that_failed_on_another_rank_is_skipped_on_this_one(monkeypatch) -> None:
    """Every rank takes the same decision: this rank's run passed, rank 1's failed, so this rank skips it too."""
    monkeypatch.setattr(lockstep, "everyone", lambda said: [said, "failed: RuntimeError: rank 1's"])
    static = Setup(Strategy.of("static"))
    plan = Plan(None, BenchSpec(cache="off,static"), {}, 0, [], [Setup(REFERENCE), static])  # type: ignore[arg-type]
    assert plan.attempt(static, lambda: 1.5) is None
    assert plan.skipped == {static.strategy: "failed: RuntimeError: rank 1's"} and plan.runnable == [Setup(REFERENCE)]
    monkeypatch.setattr(lockstep, "everyone", lambda said: [said, ""])
    assert plan.attempt(Setup(REFERENCE), lambda: 2.5) == 2.5


def test_torchruns_report_names_the_rank_and_its_signal(tmp_path: Path) -> None:
    assert root_cause(REPORT) == (1, -9)
    assert root_cause("no report") is None
    (tmp_path / "torchrun.log").write_text(f"some output\n{REPORT}\n")
    error = failure(tmp_path, 2, 1)
    assert said(str(error)) == (
        "tp 2: rank 1 was killed by signal 9 (SIGKILL: often the system out of memory); every rank was stopped: "
        "run the cell again once that is fixed"
    )
    (tmp_path / "torchrun.log").write_text(REPORT.replace("-9 (pid", "1 (pid"))
    (tmp_path / "rank1.err").write_text("Traceback (most recent call last):\n  ...\nRuntimeError: gloo timed out\n")
    assert "rank 1 failed (exit status 1): RuntimeError: gloo timed out;" in str(failure(tmp_path, 2, 1))


def test_a_rank_that_fails_after_the_result_is_written_is_said_and_the_result_kept(tmp_path: Path, capsys) -> None:
    """Every rank took part in a result written; a rank gloo aborts while leaving its group costs no measurement."""
    with pytest.raises(KVMagicError, match="rank 1 was killed by signal 6"):  # no result: the failure, as before
        (tmp_path / "torchrun.log").write_text(REPORT.replace("-9 (pid", "-6 (pid"))
        outcome(tmp_path, 2, 1)
    written = BenchmarkResult("tiny", pair((8, 2), [1.0, 1.1], [0.5, 0.6]))
    written.to_json(tmp_path / "result.json")
    assert outcome(tmp_path, 2, 1).to_dict() == written.to_dict()
    assert capsys.readouterr().err == (
        "kvbench --tp 2: rank 1 was killed by signal 6 (SIGABRT) after the result was complete; the result stands\n"
    )
    assert outcome(tmp_path, 2, 0).to_dict() == written.to_dict() and capsys.readouterr().err == ""


def test_a_rank_that_fails_while_leaving_after_every_rank_was_done_is_not_said(tmp_path: Path, capsys) -> None:
    """gloo can abort a rank that closes its connections under load: once every rank has said it was done, that
    costs neither the result nor a word; a rank that had not, or was done with a failing status, is said."""
    (tmp_path / "torchrun.log").write_text(REPORT.replace("-9 (pid", "-6 (pid"))
    written = BenchmarkResult("tiny", pair((8, 2), [1.0, 1.1], [0.5, 0.6]))
    written.to_json(tmp_path / "result.json")
    (tmp_path / "rank0.done").write_text("0")
    for rank1 in (None, "1", "0"):
        if rank1 is not None:
            (tmp_path / "rank1.done").write_text(rank1)
        assert outcome(tmp_path, 2, 1).to_dict() == written.to_dict()
        err = capsys.readouterr().err
        assert ("after the result was complete" in err) is (rank1 != "0"), (rank1, err)


def test_a_ranks_refusal_comes_back_as_its_template(tmp_path: Path) -> None:
    (tmp_path / "rank1.json").write_text(json.dumps({"template": "{new_tokens} too many", "params": ["new_tokens"]}))
    (tmp_path / "rank0.json").write_text(json.dumps({"template": "{tp} cannot", "params": ["tp"]}))
    error = failure(tmp_path, 2, 1)
    assert (error.template, error.params) == ("{tp} cannot", ("tp",))  # rank 0's first


def _ranks(kv: int, seconds: float, digest: str = "a") -> Ranks:
    return Ranks((kv,), (seconds,), 0.5, 24, (digest,), ((0.4, 0.5),))


def _result(views: list[tuple[Ranks, Ranks]]) -> BenchmarkResult:
    config = Config(10, 4, 1)
    own = [Measurement(config, "off", (0.4, 0.5), kv_bytes=0, peak_bytes=100, addons={"split": views[0][0]}),
           Measurement(config, "dynamic", (0.2, 0.25), kv_bytes=3 * 2**20, peak_bytes=100,
                       addons={"split": views[0][1]})]  # fmt: skip
    result = BenchmarkResult("tiny", own, metadata={"device": "cpu (x)"})
    rows = [{"device": "cpu (x)", "rows": [{"ranks": a, "peak_bytes": 100 + i}, {"ranks": b, "peak_bytes": 90}]}
            for i, (a, b) in enumerate(views)]  # fmt: skip
    return merged(result, "gloo", rows)


def test_the_ranks_views_make_one_result_with_its_columns_and_note() -> None:
    mib = 2**20
    result = _result([(_ranks(0, 0.2), _ranks(3 * mib, 0.1)), (_ranks(0, 0.25), _ranks(3 * mib, 0.05))])
    off, dynamic = result.measurements
    assert dynamic.kv_bytes == 6 * mib and off.peak_bytes == 101  # the ranks' shares summed; the fullest rank's peak
    assert dynamic.ranks == Ranks((3 * mib, 3 * mib), (0.1, 0.05), 0.5, 24, ("a", "a"), ((0.4, 0.5), (0.4, 0.5)))
    row = result.to_dataframe().iloc[0]
    assert (row["ranks"], row["kv_rank_mib"], row["kv_cache_mib"], bool(row["ranks_identical"])) == (2, 3, 6, True)
    assert row["uncached_comm_ms"] == pytest.approx(1e3 * 0.25 / 4) and row["cached_comm_ms"] == pytest.approx(25)
    assert row["uncached_comm_share"] == pytest.approx(0.5) and row["cached_comm_share"] == pytest.approx(0.2)
    notes = [note for note in result.notes() if not note.startswith("2 pairs: no interval")]
    assert notes[0] == (
        "split over 2 ranks by tensor parallelism (gloo, cpu); times are the slowest rank's; every rank generated "
        "the same tokens"
    )
    assert "collectives took 50% of an uncached run (62.5 ms per step) and 20% of a cached one (25 ms" in notes[1]
    assert "the KV cache is 3 MiB per rank, 6 MiB in all" in notes[1]
    back = BenchmarkResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert [m.ranks for m in back.measurements] == [m.ranks for m in result.measurements]
    assert back.split == result.split == Split("gloo", ("cpu (x)", "cpu (x)")) and back.split.size == 2
    assert "rank_devices" not in back.metadata and back.setup()["split"] == "2 ranks by tensor parallelism (gloo, cpu)"


def test_a_file_that_kept_the_split_in_its_metadata_still_reads() -> None:
    """Before the split had a record of its own, format 3 kept it in the metadata beside the environment."""
    result = _result([(_ranks(0, 0.2), _ranks(3, 0.1)), (_ranks(0, 0.25), _ranks(3, 0.05))])
    older = {**result.to_dict(), "split": None}
    older["metadata"] = {**older["metadata"], "world_size": 2, "backend": "gloo", "rank_devices": ["cpu (x)"] * 2}
    back = BenchmarkResult.from_dict(json.loads(json.dumps(older)))
    assert back.split == Split("gloo", ("cpu (x)", "cpu (x)")) and back.metadata == {"device": "cpu (x)"}
    assert any(note.startswith("split over 2 ranks by tensor parallelism (gloo, cpu)") for note in back.notes())


def test_a_result_file_keeps_the_ranks_beside_quality_and_the_prefix() -> None:
    """What a launch reads back: a measurement's ranks and its quality, and the run's reused prefix, all kept."""
    mib = 2**20
    result = _result([(_ranks(0, 0.2), _ranks(3 * mib, 0.1)), (_ranks(0, 0.25), _ranks(3 * mib, 0.05))])
    judged = dataclasses.replace(result.measurements[1], quality=Quality(4, 0.75, 0.125, 1.5))
    result = dataclasses.replace(
        result, measurements=[result.measurements[0], judged], addons={**result.addons, "prefix": 3}
    )
    back = BenchmarkResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert back.measurements[1].quality == judged.quality and back.measurements[1].ranks == judged.ranks
    assert back.measurements[0].quality is None and back.prefix_tokens == 3


def test_a_rank_with_other_tokens_is_named() -> None:
    result = _result([(_ranks(0, 0.2), _ranks(1, 0.1)), (_ranks(0, 0.2, digest="b"), _ranks(1, 0.1))])
    assert not bool(result.to_dataframe().iloc[0]["ranks_identical"])
    assert "10+4 tokens: rank 1 generated other tokens than rank 0 (off)" in result.notes()
    assert "10+4 tokens: rank 1 generated other tokens than rank 0 (dynamic)" not in result.notes()
    assert not result.notes()[0].endswith("the same tokens")


def test_the_digest_sees_every_sequence_of_every_run() -> None:
    runs = [[[1, 2], [1, 2]], [[1, 2], [1, 2]]]
    assert tokens_digest(runs) == tokens_digest(json.loads(json.dumps(runs)))
    assert tokens_digest(runs) != tokens_digest([[[1, 2], [1, 2]], [[1, 2], [1, 3]]])


def test_outside_a_process_group_the_lockstep_is_the_identity() -> None:
    assert lockstep.world() is None
    assert lockstep.slowest(1.5) == 1.5 and lockstep.slowest_each([1.0, 2.0]) == [1.0, 2.0]
    assert lockstep.everyone("x") == ["x"] and lockstep.from_first(3) == 3
    assert lockstep.any_reason("") == "" and lockstep.any_reason("why") == "why"
    rule = FixedRounds(2)
    assert lockstep.lockstep(rule) is rule
    lockstep.barrier()


def test_tp_without_torchrun_says_the_command_to_run(monkeypatch, capsys) -> None:
    for name in process_group.LAUNCH_ENV:
        monkeypatch.delenv(name, raising=False)
    assert main(["-m", "tiny", "--tp", "-n", "16", "The KV cache"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and said(err) == (
        "kvbench: error: --tp splits the model over the ranks torchrun starts, one per device: run it as torchrun "
        "--nproc-per-node N -m kvmagic -m tiny --tp -n 16 'The KV cache' (N: the number of devices)\n"
    )


@pytest.mark.parametrize("rank", ["0", "1"])
def test_rank_0_prints_a_refusal_at_once_and_a_quiet_rank_only_if_rank_0_has_not(rank, monkeypatch, capsys) -> None:
    # torchrun ends every rank once one exits: a quiet rank that left first could end rank 0 before it spoke.
    slept: list[float] = []
    monkeypatch.setattr(split_rank.time, "sleep", slept.append)  # as if torchrun had not ended this rank
    for name in process_group.LAUNCH_ENV:
        monkeypatch.setenv(name, {"RANK": rank, "WORLD_SIZE": "2"}.get(name, "1"))
    assert main(["-m", "tiny", "--tp", "--predict", "-n", "2", "hi"]) == 2
    assert slept == ([] if rank == "0" else [split_rank.SPEAKER_GRACE_S])
    err = said(capsys.readouterr().err)
    assert err.startswith("kvbench: error: ") and err.count("\n") == 1 and "--predict" in err


def test_loading_split_outside_torchrun_or_with_a_device_map_is_refused(monkeypatch) -> None:
    from kvmagic import load_split_model

    for name in process_group.LAUNCH_ENV:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(KVMagicError, match=r"^a split model needs the ranks torchrun starts: run this under torchrun"):
        load_split_model("tiny")
    with pytest.raises(KVMagicError, match=r"^device_map places a whole model; split, each rank places its share"):
        load_split_model("tiny", device_map="cpu")
    with pytest.raises(KVMagicError, match=r"^tiny already has seeded random weights: drop random_weights$"):
        load_split_model("tiny", random_weights=True)
    with pytest.raises(
        KVMagicError, match=r"^random_weights builds from a config, not from gguf_file: drop one of them"
    ):
        load_split_model("Qwen/Qwen2.5-0.5B", random_weights=True, gguf_file="q4.gguf")  # as unsplit, not ignored


def test_a_split_runs_notes_follow_the_note_on_how_quality_was_read() -> None:
    """As before ``--tp`` was an add-on: how every row ran is said after what the rows found."""
    mib = 2**20
    result = _result([(_ranks(0, 0.2), _ranks(3 * mib, 0.1)), (_ranks(0, 0.25), _ranks(3 * mib, 0.05))])
    judged = dataclasses.replace(result.measurements[1], quality=Quality(4, 0.75, 0.125, 1.5))
    result = dataclasses.replace(result, measurements=[result.measurements[0], judged])
    notes = result.notes()
    quality = next(i for i, note in enumerate(notes) if note.startswith("quality: "))
    split = next(i for i, note in enumerate(notes) if note.startswith("split over 2 ranks"))
    assert quality < split
