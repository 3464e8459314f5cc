"""A batch of the same prompt: the cross product, identity per sequence, bytes of the whole batch, the plot."""

from __future__ import annotations

import pytest

from kvmagic import KVMagicError, run_benchmark
from kvmagic.addons.predict.budget import plan_within_budget, round_seconds
from kvmagic.core.config import Config
from kvmagic.core.lengths import configurations
from kvmagic.core.spec import BenchSpec
from kvmagic.results.measurement import Measurement
from kvmagic.results.notes import notes
from kvmagic.results.records import Mismatch
from kvmagic.results.report import COLUMNS
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.rows import short_mismatch
from kvmagic.results.shown import shown_text

from .conftest import PROMPT
from .forcing import FlipCachedStep
from .records import pair


def test_configurations_keep_the_order_prompt_new_batch() -> None:
    assert configurations([8, 32], [4], [1, 2]) == [(8, 4, 1), (8, 4, 2), (32, 4, 1), (32, 4, 2)]
    assert configurations([8], [4, 16]) == [(8, 4, 1), (8, 16, 1)]


def test_a_record_without_a_batch_is_of_one_sequence() -> None:
    from types import SimpleNamespace

    assert Config.of({"prompt_tokens": 8, "new_tokens": 4}) == Config(8, 4, 1)
    assert Config.of(SimpleNamespace(prompt_tokens=8, new_tokens=4)) == Config(8, 4, 1)
    assert Config.of(SimpleNamespace(prompt_tokens=8, new_tokens=4, batch=3)) == Config(8, 4, 3)


def test_the_batch_takes_the_length_grammar_and_refuses_zero() -> None:
    assert BenchSpec(batch="1-4*2").batch == (1, 2, 4)
    assert BenchSpec(batch=2).batch == (2,)
    with pytest.raises(KVMagicError) as caught:
        BenchSpec(batch=[1, 0])
    assert str(caught.value) == "batch must be a whole number >= 1, got 0"


def test_the_budget_counts_a_batch_as_that_many_sequences() -> None:
    class Flat:
        def generate_seconds(self, prompt_tokens: int, new_tokens: int, *, use_cache: bool) -> float:
            return 1.0 if use_cache else 3.0

    flat = Flat()
    assert round_seconds(flat, 8, 4, batch=4) == 4 * round_seconds(flat, 8, 4)  # type: ignore[arg-type]
    # two rounds per configuration, one warm-up round (a single sequence) per prompt length: 8 + 4, then 24
    configs = [Config(8, 4, 1), Config(8, 4, 3)]
    fits = [plan_within_budget(flat, configs, repeat=2, warmup_tokens=1, max_seconds=s) for s in (36, 35.9)]  # type: ignore[arg-type]
    assert fits == [[True, True], [True, False]]


def test_every_sequence_generates_the_same_tokens_and_bytes_scale_with_the_batch(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=4, warmup_tokens=0, batch=(1, 2))
    one, two = (result.measurement("dynamic", config) for config in result.configs)
    assert (one.config.batch, two.config.batch) == (1, 2) and result.identical
    assert two.kv_bytes == 2 * one.kv_bytes
    frame = result.to_dataframe()
    assert frame["kv_predicted_mib"][1] == 2 * frame["kv_predicted_mib"][0]
    assert list(frame["batch"]) == [1, 2] and list(frame.columns) == list(COLUMNS)
    assert BenchmarkResult.from_json(result.to_json()).configs[1].batch == 2


def test_a_difference_in_the_second_sequence_is_reported_as_such(tiny, monkeypatch) -> None:
    honest = run_benchmark(tiny, PROMPT, new_tokens=4, warmup_tokens=0).measurements[0]
    target = 100 if honest.generated_ids[2] != 100 else 101
    monkeypatch.setattr(tiny.model, "forward", FlipCachedStep(tiny.model.forward, step=2, target=target, row=1))
    result = run_benchmark(tiny, PROMPT, new_tokens=4, warmup_tokens=0, batch=2)
    reference, cached = result.measurements
    mismatch = cached.mismatch
    assert not result.identical and reference.identical
    assert (mismatch.run, mismatch.sequence, mismatch.position, mismatch.actual_id) == (0, 1, 2, target)
    assert "(id 100) in the cached run, sequence 2 of its batch" in notes(result)[0].replace(f"id {target}", "id 100")
    assert reference.generated_ids == honest.generated_ids  # the first sequence is the reference


def test_the_positions_are_checked_for_every_batch_before_anything_runs(tiny) -> None:
    with pytest.raises(KVMagicError, match=r"plus 3000 new tokens exceeds the 2048 positions"):
        run_benchmark(tiny, PROMPT, new_tokens=3000, batch=(1, 2), max_seconds=0)


def _measurement(batch: int, uncached: float, cached: float) -> list[Measurement]:
    off = {"kv_bytes": 0, "peak_bytes": batch * 2**21}
    return pair((8, 4, batch), [uncached], [cached], off=off, dynamic={"kv_bytes": batch * 2**20,
                "peak_bytes": batch * 3 * 2**20})  # fmt: skip


def _lines(axis) -> dict[str, tuple[list, list]]:
    lines = axis.get_lines()
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in lines}


def test_the_plot_shows_speedup_and_memory_against_the_batch() -> None:
    result = BenchmarkResult("tiny", [*_measurement(4, 4.0, 1.0), *_measurement(1, 2.0, 1.0)])
    speedups, memory = result.plot().axes
    assert speedups.get_xlabel() == memory.get_xlabel() == "batch"
    assert _lines(speedups)["cached speed-up"] == ([1, 4], [2.0, 4.0])
    found = _lines(memory)
    assert found["cached KV cache"] == ([1, 4], [1.0, 4.0])
    assert found["uncached peak"] == ([1, 4], [2.0, 8.0]) and found["cached peak"] == ([1, 4], [3.0, 12.0])


def test_the_shown_table_has_a_batch_column_only_when_some_batch_is_over_one() -> None:
    single = BenchmarkResult("tiny", _measurement(1, 2.0, 1.0))
    batched = BenchmarkResult("tiny", [*_measurement(1, 2.0, 1.0), *_measurement(2, 3.0, 1.0)])
    assert "batch" not in shown_text(single.to_dataframe()).splitlines()[0]
    assert "batch" in shown_text(batched.to_dataframe()).splitlines()[0]
    assert "batch" in single.to_dataframe().columns


def test_a_mismatch_cell_names_the_sequence() -> None:
    mismatch = Mismatch(run=1, position=2, expected_id=3, actual_id=4, expected_token="a", actual_token="b", sequence=1)
    assert short_mismatch(mismatch) == "2: 'a' (id 3) vs 'b' (id 4) in sequence 2"


def test_the_magic_sweeps_the_batch(shell) -> None:
    frame = shell.run_cell_magic("kvbench", "-n 3 -w 0 -b 1,2 -q", PROMPT)
    assert frame is None
    result = shell.run_cell_magic("kvbench", "-n 3 -w 0 -b 1,2 -o -q", PROMPT)
    assert [c.batch for c in result.configs] == [1, 2] and result.identical


def test_the_magic_names_its_flag_in_a_batch_mistake(shell) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match=r"-b"):
        shell.run_cell_magic("kvbench", "-n 3 -b 0", PROMPT)
