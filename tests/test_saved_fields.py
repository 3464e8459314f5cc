"""Every field a saved file holds comes back under its own name: each set to a value no other field has.

A file read back with one key misread (a margin taken from the wrong mismatch, a run's seconds given to the
other strategy, a limit's uncached side read as its cached) shows a wrong number in the table, or none. So each
format (the current one, format 2 with one record per configuration, format 1 with the strategies in the
metadata, format 3 before ``result.split``) is written here by hand with distinct values and read back whole.
"""

from __future__ import annotations

import json
import math

import pytest

from kvmagic import addons as registry
from kvmagic.addons.frontier.reach import FitCheck, Frontier, FrontierRow
from kvmagic.addons.limits.bounds import Hardware, Limits, StrategyLimit
from kvmagic.addons.limits.limits_table import Bounds
from kvmagic.addons.predict.costmodel import CostModel
from kvmagic.addons.predict.predictions import Predicted, Prediction
from kvmagic.addons.split.split_records import Ranks, Split
from kvmagic.core.addon import AddOn
from kvmagic.core.config import Config
from kvmagic.core.curves import Polynomial
from kvmagic.core.kvbytes import KVSizes, SlidingKeep
from kvmagic.core.quality import Quality
from kvmagic.core.spec import BenchSpec
from kvmagic.core.strategy import DYNAMIC, OFF, parse, parse_list
from kvmagic.errors import KVMagicError
from kvmagic.results.measurement import Measurement
from kvmagic.results.records import Mismatch, RunFacts, StepProfile
from kvmagic.results.result import BenchmarkResult

from .conftest import said

NAN_FIELDS = ("ttft_s", "compile_s")


def _limit(base: float, governs: str) -> StrategyLimit:
    return StrategyLimit(base, base + 0.1, base + 0.2, base + 0.3, governs, int(base * 10))


def _everything() -> BenchmarkResult:
    """A comparison of strategies with every field of every record set, no two alike."""
    profile = StepProfile(step_s=(0.5, 0.25), margins=(1.5, 2.5), generated_ids=(7, 8), peak_bytes=900, kv_bytes=90)
    off = Measurement(
        Config(16, 2, 2), "off", (3.0, 3.5, 4.0), generated_ids=(7, 8), generated_text="hi there", ttft_s=0.75,
        kv_bytes=0, peak_bytes=1000, peak_source="process peak RSS", profile=profile,
        addons={"split": Ranks((10, 11), (0.01, 0.02), 0.3, 24, ("a", "b"), ((3.0, 3.5, 4.0), (2.9, 3.4, 3.9)))},
    )  # fmt: skip
    static = Measurement(
        Config(16, 2, 2), "static+compile", (1.0, 1.25, 1.5), generated_ids=(7, 9), generated_text="hi you",
        mismatch=Mismatch(2, 1, 8, 9, "there", "you", 0.125, 1), ttft_s=0.2, kv_bytes=4096, peak_bytes=2000,
        peak_source="cuda", compile_s=12.5, quality=Quality(3, 0.5, 0.0625, 1.25, "text", (1.125, 1.375)),
    )  # fmt: skip
    hardware = Hardware(bandwidth_bytes_s=5e10, flops_s=2e12, device="cpu (x)", dtype="float32", probe_s=0.4)
    limits = Limits(16, 2, 2, _limit(1.0, "compute"), _limit(2.0, "memory"), compute_bound_from=4096, weights_share=0.6)
    frontier = Frontier(
        rows=[FrontierRow("off", 16, 2, 2, 0.0, 1e6, 100, 200, 30, "memory"),
              FrontierRow("static+compile", 17, 3, 1, 2048.0, 2e6, 400, 500, 60, "positions")],
        checks=[FitCheck("off", 16, 300, 2, 8e9, 7e9, 6e9, 5e9)],
        free_bytes=2.5e10,
        unchecked={"static+compile": 42.0},
    )  # fmt: skip
    predicted = Predicted(
        CostModel(Polynomial((0.1, 0.01)), Polynomial((0.2, 0.02, 0.002)), 0.003, 0.004, 1.5),
        (Prediction(16, 2, 3.25, 1.125, 8192, 2), Prediction(32, 2, 6.5, 2.25, None, 1)),
        weight_bytes=123456,
    )
    return BenchmarkResult(
        model="tiny",
        measurements=[off, static],
        spec=BenchSpec(cache="off,static+compile,quantized:quanto", kv_bits=4, repeat=3, new_tokens=(2,),
                       batch=(2,), warmup_tokens=1, chat=True, steps=True, quality_text="a text"),
        strategies=["off", "static+compile", "quantized:quanto"],
        skipped={"quantized:quanto": "needs optimum-quanto"},
        remarks={"static+compile": "compiled once"},
        metadata={"device": "cpu (x)", "dtype": "float32"},
        facts=RunFacts(prompt_sha256="ab" * 32, natural_prompt_tokens=12, prompt_stretched=True,
                       configurations=3, estimated_s=9.5, stopped="out of accelerator memory",
                       kv_sizes=KVSizes(2048, (None, 64), SlidingKeep(True, 3, True, 512)),
                       model_generation_settings={"temperature": 0.7}),
        addons={"limits": Bounds(hardware, (limits,)), "frontier": frontier, "prefix": 4,
                "split": Split("gloo", ("cpu (x)", "cpu (y)")),
                "predict": predicted},
    )  # fmt: skip


def _fields(result: BenchmarkResult) -> dict[str, object]:
    names = ("model", "measurements", "spec", "strategies", "skipped", "remarks", "metadata", "facts", "predictions",
             "cost_model", "weight_bytes", "hardware", "limits", "prefix_tokens", "frontier", "split")  # fmt: skip
    return {name: getattr(result, name) for name in names}


def test_every_field_of_the_current_format_reads_back_under_its_own_name():
    saved = _everything()
    again = BenchmarkResult.from_json(saved.to_json())
    assert _fields(again) == _fields(saved)
    assert again.partial and again.setup()["split"] == "2 ranks by tensor parallelism (gloo, cpu)"


def test_missing_numbers_read_back_as_nan_and_missing_records_as_none():
    bare = BenchmarkResult(
        "tiny", [Measurement(Config(4, 2), "off", (1.0,)), Measurement(Config(4, 2), "dynamic", (0.5,))]
    )
    data = json.loads(bare.to_json())
    assert data["measurements"][0]["ttft_s"] is None and data["measurements"][0]["compile_s"] is None
    again = BenchmarkResult.from_dict(data)
    for m in again.measurements:
        assert all(math.isnan(getattr(m, name)) for name in NAN_FIELDS)
        assert (m.mismatch, m.profile, m.quality, m.ranks) == (None, None, None, None)
    assert (again.cost_model, again.hardware, again.frontier, again.split) == (None, None, None, None)
    assert again.facts == RunFacts() and again.limits == [] and again.predictions == []
    # a limit without the weights' share, a quality without an interval, a hardware figure JSON kept as null
    full = _everything().to_dict()
    full["limits"][0]["weights_share"] = None
    full["limits"][0]["cached"]["first_token_s"] = None
    full["hardware"]["flops_s"] = None
    full["measurements"][1]["quality"]["ppl_interval"] = None
    full["frontier"]["checks"][0]["tensor_bytes"] = None
    full["predictions"][0]["cached_s"] = None
    read = BenchmarkResult.from_dict(full)
    assert math.isnan(read.limits[0].weights_share) and read.limits[0].uncached == _limit(1.0, "compute")
    assert math.isnan(read.limits[0].cached.first_token_s) and read.limits[0].cached.seconds == 2.0
    assert math.isnan(read.hardware.flops_s) and read.hardware.bandwidth_bytes_s == 5e10
    assert read.measurements[1].quality.ppl_interval is None and read.measurements[1].quality.ppl_ratio == 1.25
    assert math.isnan(read.frontier.checks[0].tensor_bytes) and read.frontier.checks[0].measured_bytes == 6e9
    assert math.isnan(read.predictions[0].cached_s) and read.predictions[0].kv_bytes == 8192


def test_a_profile_and_ranks_keep_their_missing_numbers_as_nan():
    data = _everything().to_dict()
    data["measurements"][0]["profile"]["margins"] = [None, 2.5]
    data["measurements"][0]["ranks"]["communication_s"] = [None, 0.02]
    data["measurements"][0]["ranks"]["seconds"] = [[None, 3.5, 4.0], [2.9, 3.4, 3.9]]
    data["measurements"][0]["ranks"]["identical"] = [True, True]  # an older file's own check per rank: dropped
    off = BenchmarkResult.from_dict(data).measurements[0]
    assert math.isnan(off.profile.margins[0]) and off.profile.margins[1:] == (2.5,)
    assert off.profile.step_s == (0.5, 0.25) and isinstance(off.profile.generated_ids, tuple)
    assert math.isnan(off.ranks.communication_s[0]) and off.ranks.communication_s[1:] == (0.02,)
    assert math.isnan(off.ranks.seconds[0][0]) and off.ranks.seconds[1] == (2.9, 3.4, 3.9)
    assert off.ranks.kv_bytes == (10, 11) and off.ranks.tokens == ("a", "b")
    del data["measurements"][0]["ranks"]["seconds"], data["measurements"][0]["ranks"]["identical"]
    assert BenchmarkResult.from_dict(data).measurements[0].ranks.seconds == ()  # an older file kept none


def test_a_current_file_before_the_sizes_per_layer_and_before_result_split():
    data = _everything().to_dict()
    del data["facts"]["kv_sizes"], data["split"]
    data["facts"]["kv_position_bytes"] = 3072
    data["metadata"] = {**data["metadata"], "world_size": 2, "backend": "nccl", "rank_devices": ["cuda:0 (H)"] * 2}
    read = BenchmarkResult.from_dict(data)
    assert read.facts.kv_sizes == KVSizes(3072, (None,))
    assert read.split == Split("nccl", ("cuda:0 (H)", "cuda:0 (H)"))
    assert read.metadata == {"device": "cpu (x)", "dtype": "float32"}  # the ranks' keys live in the split now
    data["facts"]["kv_position_bytes"] = 0  # nothing measured: no sizes rather than a cache of no bytes
    assert BenchmarkResult.from_dict(data).facts.kv_sizes is None
    data["facts"]["kv_sizes"] = {"position_bytes": 1024, "windows": [8, None]}  # before the sliding layers' keep
    assert BenchmarkResult.from_dict(data).facts.kv_sizes == KVSizes(1024, (8, None), SlidingKeep())


# Format 2: a plain run, one record per configuration, the strategies' runs interleaved, dicts by strategy.
def _format_2() -> dict[str, object]:
    first = {
        "prompt_tokens": 12, "new_tokens": 3, "batch": 2,
        "runs": ["uncached", "cached", "cached", "uncached", "uncached", "cached"],
        "seconds": [6.0, 2.0, 2.5, 6.5, 7.0, 3.0],
        "generated_ids": [5, 6, 7], "generated_text": "abc",
        "mismatch": {"run": 2, "position": 1, "expected_id": 6, "actual_id": 9, "expected_token": "b",
                     "actual_token": "z", "margin": 0.75, "sequence": 1},
        "mismatches": {"cached": {"run": 2, "position": 1, "expected_id": 6, "actual_id": 9, "expected_token": "b",
                                  "actual_token": "z", "margin": None, "sequence": 1},
                       "uncached": {"run": 4, "position": 2, "expected_id": 7, "actual_id": 8,
                                    "expected_token": "c", "actual_token": "y", "margin": 0.125, "sequence": 0}},
        "profiles": {"cached": {"step_s": [0.5, 0.25, 0.125], "margins": [1.0, 2.0, 3.0], "generated_ids": [5, 6, 7],
                                "peak_bytes": 800, "kv_bytes": 80}},
        "ttft_s": {"uncached": 0.0625}, "kv_bytes": {"uncached": 0}, "peak_bytes": {"uncached": 700},
        "peak_source": "process peak RSS", "compile_s": {"cached": 4.5},
        "kv_predicted_bytes": 26624, "sequential": False,
    }  # fmt: skip
    second = {
        "prompt_tokens": 12, "new_tokens": 4,
        "runs": ["cached", "uncached", "cached", "uncached"],
        "seconds": [1.5, 5.0, 1.75, 5.5],
        "generated_ids": [5, 6, 7, 8], "generated_text": "abcd",
        "mismatch": {"run": 1, "position": 3, "expected_id": 8, "actual_id": 2, "margin": 0.5},
        "kv_position_bytes": 4096,
    }  # fmt: skip
    return {
        "format": "kvmagic-benchmark", "version": 2, "model": "tiny", "partial": True,
        "spec": {"new_tokens": [3, 4], "repeat": 3, "steps": True, "warmup_tokens": 0},
        "strategies": ["uncached", "cached"],
        "metadata": {"torch": "2.13.0", "device": "cpu (x)", "prompt_sha256": "cd" * 32, "natural_prompt_tokens": 12,
                     "prompt_stretched": True, "configurations": 3, "estimated_s": 1.5, "chat": False,
                     "warmup_tokens": 0, "repeat": 3, "steps": True, "compiled": False, "ci_target": 0.1, "auto_cap": 30,
                     "max_seconds": 60, "kv_bits": None, "profile": "fast",
                     "frontier_free_bytes": 3.5e10, "frontier_unchecked": {"cached": 8.0}},
        "measurements": [first, second],
        "predictions": [{"prompt_tokens": 12, "new_tokens": 3, "uncached_s": 6.25, "cached_s": None, "batch": 2}],
        "frontier": [{"strategy": "uncached", "prompt_tokens": 12, "new_tokens": 3, "batch": 1,
                      "kv_bytes_per_token": 0.0, "peak_bytes": 2.0e5, "max_new_tokens": 30, "max_prompt": 40,
                      "max_batch": 50, "limited_by": "memory"},
                     {"strategy": "cached", "prompt_tokens": 12, "new_tokens": 3, "batch": 1,
                      "kv_bytes_per_token": 2048.0, "peak_bytes": 2.5e5, "max_new_tokens": 60, "max_prompt": 70,
                      "max_batch": 80, "limited_by": "positions"}],
        "frontier_checks": [{"strategy": "cached", "prompt_tokens": 12, "new_tokens": 60, "batch": 1,
                             "budget_bytes": 9e9, "predicted_bytes": 8e9, "measured_bytes": 7e9,
                             "tensor_bytes": 6e9}],
    }  # fmt: skip


def test_every_field_of_a_format_2_plain_run_reads_back_by_strategy():
    result = BenchmarkResult.from_dict(_format_2())
    assert result.model == "tiny" and result.strategies == [OFF, DYNAMIC] and result.plain
    assert result.spec == BenchSpec(new_tokens=(3, 4), repeat=3, steps=True, warmup_tokens=0)
    wide, long = Config(12, 3, 2), Config(12, 4)
    assert result.configs == [wide, long]
    profile = StepProfile((0.5, 0.25, 0.125), (1.0, 2.0, 3.0), (5, 6, 7), 800, 80)
    assert result.measurements[:2] == [
        Measurement(wide, "off", (6.0, 6.5, 7.0), generated_ids=(5, 6, 7), generated_text="abc",
                    mismatch=Mismatch(2, 2, 7, 8, "c", "y", 0.125, 0), ttft_s=0.0625, kv_bytes=0, peak_bytes=700,
                    peak_source="process peak RSS"),
        # its mismatch is the file's first: the margin the file kept with that one
        Measurement(wide, "dynamic", (2.0, 2.5, 3.0), mismatch=Mismatch(1, 1, 6, 9, "b", "z", 0.75, 1),
                    ttft_s=0.5, kv_bytes=80, peak_bytes=800, compile_s=4.5, profile=profile),
    ]  # fmt: skip
    dynamic, off = result.measurements[2:]  # in the order they first ran: the cached side first
    assert dynamic.strategy == DYNAMIC and dynamic.seconds == (1.5, 1.75)
    assert dynamic.generated_ids == (5, 6, 7, 8) and dynamic.generated_text == "abcd" and dynamic.mismatch is None
    assert off.strategy == OFF and off.seconds == (5.0, 5.5) and (off.generated_ids, off.generated_text) == ((), "")
    # the only mismatch this configuration kept is the first one: the uncached side's first run
    assert off.mismatch == Mismatch(0, 3, 8, 2, margin=0.5)
    for m in (dynamic, off):
        assert math.isnan(m.ttft_s) and math.isnan(m.compile_s) and m.config.batch == 1
        assert (m.kv_bytes, m.peak_bytes, m.peak_source, m.profile) == (None, None, "", None)
    # 4096 bytes a position over the first configuration's 2 sequences
    assert result.facts == RunFacts(prompt_sha256="cd" * 32, natural_prompt_tokens=12, prompt_stretched=True,
                                    configurations=3, estimated_s=1.5, stopped="interrupted",
                                    kv_sizes=KVSizes(2048, (None,)))  # fmt: skip
    assert result.partial and result.metadata == {"torch": "2.13.0", "device": "cpu (x)"}
    (prediction,) = result.predictions
    assert (prediction.config, prediction.uncached_s, prediction.kv_bytes) == (wide, 6.25, None)
    assert math.isnan(prediction.cached_s)
    frontier = result.frontier
    assert frontier.rows == [FrontierRow("off", 12, 3, 1, 0.0, 2.0e5, 30, 40, 50, "memory"),
                             FrontierRow("dynamic", 12, 3, 1, 2048.0, 2.5e5, 60, 70, 80, "positions")]  # fmt: skip
    assert frontier.checks == [FitCheck("dynamic", 12, 60, 1, 9e9, 8e9, 7e9, 6e9)]
    assert frontier.free_bytes == 3.5e10 and frontier.unchecked == {DYNAMIC: 8.0}  # named as its rows are
    # the plain run's strategy a check was not run for, shown in the plain run's word
    assert "frontier check, cached: not run, it would take about 8 s, past max_seconds" in result.notes()


def test_a_format_2_run_keeps_the_weights_bytes_its_metadata_kept_for_the_cost_model():
    data = _format_2()
    data["metadata"] = {**data["metadata"], "weight_bytes": 777}
    result = BenchmarkResult.from_dict(data)
    assert result.weight_bytes == 777 and "weight_bytes" not in result.metadata
    assert result.setup()["weight_bytes"] == 777 and result.facts == BenchmarkResult.from_dict(_format_2()).facts


def test_a_format_2_run_keeps_why_it_stopped_and_reads_without_a_frontier():
    data = _format_2()
    data["metadata"] = {**data["metadata"], "stopped": "out of accelerator memory"}
    del data["frontier"], data["frontier_checks"], data["metadata"]["frontier_free_bytes"]
    result = BenchmarkResult.from_dict(data)
    assert result.facts.stopped == "out of accelerator memory" and result.frontier is None
    data["partial"] = False
    del data["metadata"]["stopped"]
    assert BenchmarkResult.from_dict(data).facts.stopped == "" and not BenchmarkResult.from_dict(data).partial
    data["frontier"] = _format_2()["frontier"]  # no checks, and a free memory the file did not keep
    frontier = BenchmarkResult.from_dict(data).frontier
    assert frontier.checks == [] and math.isnan(frontier.free_bytes) and list(frontier.unchecked.values()) == [8.0]
    del data["metadata"]["frontier_unchecked"]
    assert BenchmarkResult.from_dict(data).frontier.unchecked == {}


def test_an_add_on_takes_its_data_out_of_an_older_format_before_the_centre_converts_the_rest(monkeypatch):
    """The seam's ``upgrade``: an add-on reads a format 2 file as written (its data where that format kept it, here
    the metadata, which the centre would otherwise keep as the environment's) and ``load`` reads what it made of it;
    a file of the current format is read as it is."""
    upgraded = []

    class Tally(AddOn):
        name = "tally"

        def upgrade(self, saved):
            upgraded.append(saved["version"])
            metadata = dict(saved["metadata"])
            return {**saved, "metadata": metadata, "tally": metadata.pop("tally_count")}

        def load(self, saved):
            return saved.get("tally")

    monkeypatch.setattr(registry, "ADDONS", (*registry.ADDONS, Tally()))
    old = _format_2()
    old["metadata"]["tally_count"] = 7
    result = BenchmarkResult.from_dict(old)
    assert result.addons["tally"] == 7 and result.metadata == {"torch": "2.13.0", "device": "cpu (x)"}
    assert BenchmarkResult.from_dict({**_everything().to_dict(), "tally": 3}).addons["tally"] == 3
    assert upgraded == [2]


def test_a_format_2_comparison_of_strategies_keeps_each_strategys_dicts():
    old = {
        "prompt_tokens": 8, "new_tokens": 2,
        "runs": ["uncached", "static", "uncached", "static"], "seconds": [4.0, 1.0, 4.5, 1.5],
        "generated_ids": [1, 2], "generated_text": "xy",
        "ttft_s": {"uncached": 0.25, "static": 0.125}, "kv_bytes": {"uncached": 0, "static": 512},
        "peak_bytes": {"static": 600}, "peak_source": "cuda", "compile_s": {"static": 9.5},
        "mismatches": {"static": {"run": 3, "position": 1, "expected_id": 2, "actual_id": 3, "margin": 0.375}},
        "kv_position_bytes": 512,
    }  # fmt: skip
    row = {
        "prompt_tokens": 8,
        "new_tokens": 2,
        "batch": 1,
        "kv_bytes_per_token": 512.0,
        "peak_bytes": 1e5,
        "max_new_tokens": 90,
        "max_prompt": 91,
        "max_batch": 92,
        "limited_by": "memory",
    }
    check = {
        "prompt_tokens": 8,
        "new_tokens": 90,
        "batch": 1,
        "budget_bytes": 4e9,
        "predicted_bytes": 3e9,
        "measured_bytes": 2e9,
        "tensor_bytes": 1e9,
    }
    data = {"format": "kvmagic-benchmark", "version": 2, "model": "m", "strategies": ["uncached", "static", "sink"],
            "skipped": {"sink": "needs a newer transformers"}, "metadata": {"frontier_free_bytes": 5e9},
            "measurements": [old], "frontier": [{**row, "strategy": "uncached"}, {**row, "strategy": "static"}],
            "frontier_checks": [{**check, "strategy": "static"}]}  # fmt: skip
    result = BenchmarkResult.from_dict(data)
    assert result.strategies == list(parse_list("off,static,sink"))
    assert result.skipped == {parse("sink"): "needs a newer transformers"}
    off, static = result.measurements
    assert (off.ttft_s, off.kv_bytes, off.peak_bytes, off.peak_source) == (0.25, 0, None, "")
    assert (static.ttft_s, static.kv_bytes, static.peak_bytes, static.peak_source) == (0.125, 512, 600, "cuda")
    assert static.compile_s == 9.5 and math.isnan(off.compile_s)
    assert static.mismatch == Mismatch(1, 1, 2, 3, margin=0.375) and off.mismatch is None
    assert static.seconds == (1.0, 1.5) and (static.generated_ids, off.generated_ids) == ((), (1, 2))
    assert result.facts == RunFacts(kv_sizes=KVSizes(512, (None,)))  # one sequence: a position's bytes as kept
    assert [r.strategy for r in result.frontier.rows] == [OFF, parse("static")] and not result.partial
    assert result.frontier.checks == [FitCheck("static", 8, 90, 1, 4e9, 3e9, 2e9, 1e9)]


def test_format_1_kept_the_strategies_and_what_was_skipped_in_the_metadata():
    old = {"prompt_tokens": 8, "new_tokens": 2, "runs": ["uncached", "quantized:quanto"], "seconds": [4.0, 2.0],
           "generated_ids": [1, 2], "peak_bytes": {"uncached": 500}}  # fmt: skip
    data = {"format": "kvmagic-benchmark", "version": 1, "model": "m", "measurements": [old],
            "metadata": {"strategies": ["uncached", "quantized:quanto", "sink"], "skipped": {"sink": "too old"},
                         "dtype": "float16"}}  # fmt: skip
    result = BenchmarkResult.from_dict(data)
    assert result.strategies == list(parse_list("off,quantized:quanto,sink"))
    assert result.skipped == {parse("sink"): "too old"}
    assert result.metadata == {"dtype": "float16"} and result.spec == BenchSpec()
    off, quantized = result.measurements
    assert (off.generated_ids, off.generated_text, quantized.generated_ids) == ((1, 2), "", ())
    assert (off.peak_bytes, off.peak_source) == (500, "")  # a peak from before its source was kept
    del data["metadata"]["strategies"]
    assert BenchmarkResult.from_dict(data).strategies == [OFF, DYNAMIC]  # the plain run, when none is named


MODELS = (
    "this holds several models side by side, not one model's run: read it with ModelsResult.read_json, or save one "
    "model's run with result.save(PATH)"
)
NOT_ONE = "this is not a kvmagic benchmark: save one with result.save(PATH) (a .json name)"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"format": "kvmagic-models", "version": 1}, MODELS),
        ({"format": "kvmagic", "version": 3}, NOT_ONE),
        ([], NOT_ONE),
        (
            {"format": "kvmagic-benchmark", "version": 4},
            "this benchmark was saved by a newer kvmagic (format 4): upgrade kvmagic",
        ),
        (
            {"format": "kvmagic-benchmark", "version": 3, "model": "m"},
            "this kvmagic benchmark is incomplete: 'measurements'",
        ),
        (
            {"format": "kvmagic-benchmark", "version": 3, "measurements": []},
            "this kvmagic benchmark is incomplete: 'model'",
        ),
    ],
)
def test_a_file_that_is_not_one_runs_benchmark_says_what_it_is(data, message):
    with pytest.raises(KVMagicError) as raised:
        BenchmarkResult.from_dict(data)
    assert said(raised.value) == message


def test_a_file_with_only_what_it_must_have_reads_with_every_other_field_empty():
    """Only the model, the strategies and the measurements: what every format has kept since the first."""
    only = {"config": {"prompt_tokens": 4, "new_tokens": 2}, "strategy": "off", "seconds": [1.0]}
    data = {"format": "kvmagic-benchmark", "version": 3, "model": "m", "strategies": ["off"], "measurements": [only]}
    result = BenchmarkResult.from_dict(data)
    (m,) = result.measurements
    assert (m.config, m.strategy, m.seconds, m.mismatch, m.profile, m.quality, m.ranks) == (
        Config(4, 2), OFF, (1.0,), None, None, None, None
    )  # fmt: skip
    assert math.isnan(m.ttft_s) and math.isnan(m.compile_s)
    assert (result.skipped, result.remarks, result.metadata, result.facts) == ({}, {}, {}, RunFacts())
    assert (result.predictions, result.limits, result.frontier, result.split) == ([], [], None, None)
    assert (result.spec, result.cost_model, result.hardware) == (BenchSpec(), None, None)


def test_a_file_without_a_version_is_read_as_the_oldest_format():
    old = {"prompt_tokens": 8, "new_tokens": 2, "runs": ["uncached", "cached"], "seconds": [4.0, 2.0],
           "generated_ids": [1, 2]}  # fmt: skip
    result = BenchmarkResult.from_dict({"format": "kvmagic-benchmark", "model": "m", "measurements": [old]})
    assert [(m.strategy, m.seconds) for m in result.measurements] == [(OFF, (4.0,)), (DYNAMIC, (2.0,))]


def test_the_current_format_is_written_under_its_own_name_and_number():
    data = json.loads(_everything().to_json())
    assert (data["format"], data["version"]) == ("kvmagic-benchmark", 3)
    assert data["skipped"] == {"quantized:quanto": "needs optimum-quanto"}
    assert data["remarks"] == {"static+compile": "compiled once"}
    assert data["split"] == {"backend": "gloo", "devices": ["cpu (x)", "cpu (y)"]}
    assert [m["strategy"] for m in data["measurements"]] == ["off", "static+compile"]
    assert data["measurements"][0]["config"] == {"prompt_tokens": 16, "new_tokens": 2, "batch": 2}
    assert data["frontier"]["unchecked"] == {"static+compile": 42.0}
    assert [r["strategy"] for r in data["frontier"]["rows"]] == ["off", "static+compile"]
    assert data["frontier"]["checks"][0]["strategy"] == "off" and data["frontier"]["free_bytes"] == 2.5e10


def test_a_measurement_with_a_field_no_one_reads_is_refused_as_incomplete():
    """The fields an add-on writes on each measurement are its own; any other the file holds is not a benchmark's."""
    data = _everything().to_dict()
    data["measurements"][0]["rank"] = 3
    with pytest.raises(KVMagicError, match=r"^this kvmagic benchmark is incomplete: .*'rank'"):
        BenchmarkResult.from_dict(data)
