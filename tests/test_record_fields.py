"""What a result answers of itself: each strategy's per-step times, its pairs, its setup, its one-line summary."""

from __future__ import annotations

import pytest

from kvmagic.addons.split.split_records import Split
from kvmagic.core.config import Config
from kvmagic.core.intervals import speedup_interval
from kvmagic.core.sequential import auto_interval
from kvmagic.core.spec import BenchSpec
from kvmagic.errors import KVMagicError
from kvmagic.results.records import RunFacts, StepProfile
from kvmagic.results.result import BenchmarkResult

from .records import pair, timed


def _profile(*step_s: float) -> StepProfile:
    return StepProfile(step_s, (1.0,) * len(step_s), (1,) * len(step_s), 10, 4)


def test_steps_are_each_strategys_hooked_run_at_that_configuration_indexed_by_position():
    short, long = Config(4, 2), Config(6, 3)
    measurements = [
        *pair(short, [1.0], [0.5], off={"profile": _profile(0.4, 0.6)}, dynamic={"profile": _profile(0.3, 0.2)}),
        *pair(long, [2.0], [1.0], off={"profile": _profile(0.7, 0.8, 0.9)}),  # the cached side was not hooked
    ]
    result = BenchmarkResult("tiny", measurements, spec=BenchSpec(steps=True))
    steps = result.steps(short)
    assert steps.index.name == "position" and steps.index.tolist() == [4, 5]  # the new tokens' positions
    assert steps.to_dict("list") == {"uncached_s": [0.4, 0.6], "cached_s": [0.3, 0.2]}
    assert result.steps(long).to_dict("list") == {"uncached_s": [0.7, 0.8, 0.9]}
    assert result.steps(long).index.tolist() == [6, 7, 8]
    strategies = BenchmarkResult(
        "tiny", [timed(short, "off", [1.0], profile=_profile(0.4, 0.6)), timed(short, "static", [0.5])],
        spec=BenchSpec(cache="off,static"), strategies=["off", "static"],
    )  # fmt: skip
    assert strategies.steps().to_dict("list") == {"off_s": [0.4, 0.6]}  # a comparison names them as they are


def test_a_run_counted_by_its_times_gets_the_anytime_interval():
    """``-r auto`` stopped on the times themselves: past 10 pairs its interval is the anytime one, wider."""
    times = [2.0 + i / 20 for i in range(12)], [1.0 + (i % 5) / 20 for i in range(12)]
    auto = BenchmarkResult("tiny", pair((4, 2), *times), spec=BenchSpec(repeat="auto"))
    fixed = BenchmarkResult("tiny", pair((4, 2), *times), spec=BenchSpec(repeat=12))
    assert auto.pair().interval == pytest.approx(auto_interval(*times))
    assert fixed.pair().interval == pytest.approx(speedup_interval(*times))
    assert auto.pair().interval[0] < fixed.pair().interval[0] and auto.pair().interval[1] > fixed.pair().interval[1]


def test_setup_names_a_split_only_when_there_was_one():
    plain = BenchmarkResult("tiny", pair((4, 2), [1.0], [0.5]), metadata={"device": "cpu"})
    assert "split" not in plain.setup() and plain.setup()["device"] == "cpu"
    split = BenchmarkResult("tiny", pair((4, 2), [1.0], [0.5]), addons={"split": Split("gloo", ("cpu (a)", "cpu (b)"))})
    assert split.setup()["split"] == "2 ranks by tensor parallelism (gloo, cpu)"
    assert BenchmarkResult("tiny", [], facts=RunFacts(prompt_sha256="ab")).setup()["prompt_sha256"] == "ab"


def test_a_question_with_no_single_answer_says_which_to_name():
    sweep = BenchmarkResult("tiny", [*pair((4, 2), [1.0], [0.5]), *pair((4, 8), [2.0], [0.5])])
    with pytest.raises(KVMagicError) as raised:
        sweep.steps()
    assert str(raised.value) == "this result has 2 configurations: name one (result.configs lists them)"
    three = BenchmarkResult(
        "tiny", [timed((4, 2), "off", [1.0]), timed((4, 2), "static", [0.5]), timed((4, 2), "sink", [0.8])],
        spec=BenchSpec(cache="off,static,sink"), strategies=["off", "static", "sink"],
    )  # fmt: skip
    with pytest.raises(KVMagicError) as raised:
        three.pair()
    assert str(raised.value) == "a comparison of strategies has a speed-up per strategy: name one of static, sink"
    assert three.pair(strategy="sink").speedup == pytest.approx(1.25)
    assert repr(three) == "<BenchmarkResult tiny: 1 configuration x strategies off, static, sink; identical=True>"


def test_a_mismatch_names_each_token_by_its_text_and_id_even_the_first_id():
    from kvmagic.results.records import Mismatch

    mismatch = Mismatch(0, 3, 0, -1, "<pad>", "")
    assert mismatch.expected == "'<pad>' (id 0)"  # id 0 is a token like any other
    assert mismatch.actual == "no token (its run had ended)"
    assert Mismatch(0, 3, 5, 6, "a", "\ufffd").actual == "'\ufffd' (id 6, part of a character)"


def test_the_summary_line_names_a_batch_and_a_partial_run():
    batched = BenchmarkResult("tiny", pair((4, 2, 2), [1.0], [0.5]), facts=RunFacts(stopped="interrupted"))
    assert repr(batched) == "<BenchmarkResult tiny: 4+2x2 tokens: 2.00x; identical=True; partial>"
    sweep = BenchmarkResult("tiny", [*pair((4, 2), [1.0], [0.25]), *pair((4, 8), [3.0], [1.0])])
    assert repr(sweep) == "<BenchmarkResult tiny: 4+2 tokens: 4.00x, 4+8 tokens: 3.00x; identical=True>"


class _Printer:
    """What IPython's pretty printer is handed."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def text(self, value: str) -> None:
        self.said.append(value)


def test_a_result_prints_as_its_summary_then_its_table_and_as_its_summary_inside_itself():
    from kvmagic.addons.baseline.compare import compare

    result = BenchmarkResult("tiny", pair((4, 2), [1.0], [0.5]))
    for shown in (result, compare(result, result)):
        printer = _Printer()
        shown._repr_pretty_(printer, False)
        shown._repr_pretty_(printer, True)  # a cycle: the one-line summary, not the table again
        assert printer.said == [f"{shown!r}\n{shown}", repr(shown)]  # -o: what it is, then what it shows


def test_the_facts_a_setup_lists_leave_out_the_empty_ones_and_the_caches_sizes():
    from kvmagic.core.kvbytes import KVSizes

    assert RunFacts().setup() == {"prompt_stretched": False, "configurations": 0}
    facts = RunFacts(prompt_sha256="ab", stopped="interrupted", kv_sizes=KVSizes(64, (None,)), estimated_s=10)
    assert facts.setup() == {"prompt_sha256": "ab", "prompt_stretched": False, "configurations": 0,
                             "estimated_s": 10, "stopped": "interrupted"}  # fmt: skip


def test_a_split_names_each_kind_of_device_once():
    split = Split("nccl", ("cuda:0 (H100)", "cuda:1 (H100)", "cpu (x)"))
    assert str(split) == "3 ranks by tensor parallelism (nccl, cuda:0, cuda:1, cpu)"
    assert str(Split("gloo", ("cpu (a)", "cpu (b)"))) == "2 ranks by tensor parallelism (gloo, cpu)"


def test_models_side_by_side_name_the_models_there_when_asked_for_another():
    from kvmagic.addons.models.models_record import ModelsRecord

    record = ModelsRecord([BenchmarkResult("a", pair((4, 2), [1.0], [0.5])), BenchmarkResult("b", [])])
    assert record.result("b").model == "b"
    with pytest.raises(KVMagicError) as raised:
        record.result("c")
    assert str(raised.value) == "no model 'c' was measured here: name one of a, b"


def test_a_strategy_given_by_its_spelling_is_read_once_and_the_html_names_the_model():
    import re

    from kvmagic.results.measurement import Measurement

    compiled = Measurement(Config(4, 2), "static+compile", (1.0,))
    assert compiled.strategy.compiled and compiled.strategy.static and str(compiled.strategy) == "static+compile"
    html = BenchmarkResult("tiny", pair((4, 2), [1.0], [0.5]), metadata={"dtype": "float32"})._repr_html_()
    assert re.search(r">model</th><td[^>]*>tiny<", html) and re.search(r">dtype</th><td[^>]*>float32<", html)
