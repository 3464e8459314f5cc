"""The cost model and -r auto on the tiny model: predictions beside measurements, predicted-only rows, auto repeats."""

from __future__ import annotations

import math

import pytest
from IPython.core.error import UsageError

from kvmagic import KVMagicError, run_benchmark
from kvmagic.addons.predict import costmodel
from kvmagic.addons.predict.costmodel_probe import probe
from kvmagic.core import sequential, stats
from kvmagic.core.intervals import speedup_estimate
from kvmagic.core.sequential import first_stop
from kvmagic.core.spec import MIN_AUTO_PAIRS
from kvmagic.results.report import added
from kvmagic.results.result import BenchmarkResult
from kvmagic.runner import benchmark, rounds
from kvmagic.runner.prompt import stretch_prompt

from .conftest import PROMPT

PREDICTED_COLUMNS = added("--predict").pair


def test_probe_keeps_every_round_and_fits_positive_curves_on_a_real_model(tiny) -> None:
    inputs = stretch_prompt(tiny, PROMPT, 8)
    probes = probe(tiny, inputs, 8, 40, repeat=2)
    lengths = costmodel.probe_lengths(8, 40)
    assert list(probes.prefill) == lengths and all(len(times) == 2 for times in probes.prefill.values())
    assert list(probes.decode) == [length + 0.5 for length in lengths]  # two steps from each length, each round
    assert all(len(times) == 2 * costmodel.DECODE_STEPS for times in probes.decode.values())
    assert len(probes.overheads) == len(probes.rounds_s) == 2 and probes.probe_s >= sum(probes.rounds_s) > 0
    for model in (probes.typical(), probes.fastest()):
        assert model.prefill(8) > 0 and model.prefill(40) > 0 and model.decode(20) > 0
        assert model.step_overhead_s >= 0 and model.probe_s == probes.probe_s
    assert run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0).identical  # the probes left the model as it was


def test_probe_visits_every_length_once_per_round(tiny) -> None:
    # rounds, not one length after another: a machine slowing down midway then slows every length alike
    uncached: list[int] = []

    def record(module, args, kwargs) -> None:
        if kwargs.get("use_cache") is False:
            uncached.append(kwargs["input_ids"].shape[-1])

    hook = tiny.model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        probe(tiny, stretch_prompt(tiny, PROMPT, 8), 8, 40, repeat=2)
    finally:
        hook.remove()
    assert uncached == costmodel.probe_lengths(8, 40) * 2


def test_predictions_sit_beside_the_measurements_of_their_own_row(tiny) -> None:
    # How close prediction and measurement come depends on how busy the machine is while each runs,
    # so that is benchmarks/cost_model.py's to measure; here, that each row carries what the fitted model
    # predicts for exactly its lengths and strategy.
    result = run_benchmark(
        tiny, PROMPT, new_tokens=[16, 32], prompt_tokens=[8], warmup_tokens=2, repeat=3, predict=True
    )
    frame = result.to_dataframe()
    assert list(frame.columns[-4:]) == list(PREDICTED_COLUMNS)
    assert list(frame["measured"]) == [True, True]
    model = result.cost_model
    for (_, row), measured in zip(frame.iterrows(), result.pairs(), strict=True):
        assert (row["prompt_tokens"], row["new_tokens"]) == measured.config[:2]
        assert (row["uncached_s"], row["cached_s"]) == (measured.reference.median_s, measured.other.median_s)
        for strategy, use_cache in (("uncached", False), ("cached", True)):
            predicted = model.generate_seconds(8, measured.config.new_tokens, use_cache=use_cache)
            assert row[f"predicted_{strategy}_s"] == pytest.approx(predicted) and predicted > 0, row
        assert row["predicted_speedup"] == pytest.approx(row["predicted_uncached_s"] / row["predicted_cached_s"])
    # 16 more steps cost more in the model, whatever the machine's speed when it was fitted
    assert frame["predicted_uncached_s"].diff().iloc[1] > 0 and frame["predicted_cached_s"].diff().iloc[1] > 0
    notes = result.notes()
    stretched = [i for i, n in enumerate(notes) if n.startswith("prompt stretched: ")]
    assert len(stretched) == 1 and notes[stretched[0] + 1].startswith("cost model: prefill F(L) = ")
    assert any(n.startswith("KV cache at 39 tokens: ") for n in notes)
    assert result.weight_bytes == sum(p.numel() * p.element_size() for p in tiny.model.parameters())
    again = BenchmarkResult.from_json(result.to_json())
    assert again.predictions == result.predictions and again.cost_model == result.cost_model
    assert again.to_dataframe().equals(frame)


def test_rows_past_the_budget_are_predicted_only(tiny, monkeypatch) -> None:
    measured: list[int] = []
    real = benchmark.measure_rounds
    monkeypatch.setattr(benchmark, "measure_rounds", lambda *a, **k: measured.append(k["new_tokens"]) or real(*a, **k))
    result = run_benchmark(tiny, PROMPT, new_tokens=[2, 3], warmup_tokens=0, max_seconds=1e-9, predict=True)
    assert measured == [] and result.measurements == []
    frame = result.to_dataframe()
    assert list(frame["measured"]) == [False, False]
    assert frame["uncached_s"].isna().all() and (frame["predicted_speedup"] > 0).all()
    natural = frame["prompt_tokens"][0]
    assert result.notes()[0] == (
        f"predicted only (measured=False): {natural}+2 tokens, {natural}+3 tokens; measuring them would pass the 1e-09 s "
        "budget (--max-seconds)"
    )


def test_without_predict_there_are_no_prediction_columns(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0)
    assert result.predictions == [] and result.cost_model is None
    assert not set(PREDICTED_COLUMNS) & set(result.to_dataframe().columns)


def _auto_note(result: BenchmarkResult) -> str:
    (note,) = [n for n in result.notes() if n.startswith("-r auto: ")]
    return note


def test_auto_repeat_stops_at_the_minimum_when_the_cap_is_zero(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, repeat="auto", ci_target=1e-9, auto_cap=0)
    assert (
        len(list(result.measurement("dynamic").seconds))
        == len(list(result.measurement("off").seconds))
        == MIN_AUTO_PAIRS
    )
    assert result.spec.repeat == "auto" and result.spec.auto_cap == 0
    assert _auto_note(result).endswith("the 0 s cap (--auto-cap) came first")


def test_auto_repeat_stops_at_its_first_interval_when_the_target_is_loose(tiny, monkeypatch) -> None:
    # The interval depends on the timings' spread: scripted times keep it the same on any machine. Pair
    # speed-ups around 2 lie well within ±99%, so the rule stops at the first count where its anytime
    # interval exists; one pair more would find no scripted time.
    first = first_stop()
    uncached = iter([2.0, 2.2, 1.8, 2.1, 1.9] * (first // 5 + 1))
    scripted_times = [next(uncached) for _ in range(first)]
    times = iter(scripted_times)
    real = rounds.timed_generate

    def scripted(model, inputs, config, devices, **kwargs):
        output, seconds = real(model, inputs, config, devices, **kwargs)
        if config.max_new_tokens != 3:  # not a timed run: the budget's estimate, the time to first token
            return output, seconds
        return output, 1.0 if config.use_cache else next(times)

    monkeypatch.setattr(rounds, "timed_generate", scripted)
    result = run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0, repeat="auto", ci_target=0.99, auto_cap=60)
    assert first == 10 and len(list(result.measurement("dynamic").seconds)) == first
    assert (
        list(result.measurement("off").seconds) == scripted_times
        and list(result.measurement("dynamic").seconds) == [1.0] * first
    )
    assert _auto_note(result).endswith("within the ±99% target")


def test_auto_repeat_terminates_with_the_target_met_or_the_cap_hit(tiny, monkeypatch) -> None:
    checks: list[bool] = []
    real = sequential.auto_should_stop
    monkeypatch.setattr(sequential, "auto_should_stop", lambda *a: checks.append(real(*a)) or checks[-1])
    result = run_benchmark(tiny, PROMPT, new_tokens=4, warmup_tokens=0, repeat="auto", ci_target=0.05, auto_cap=3)
    pairs = len(list(result.measurement("dynamic").seconds))
    assert pairs >= MIN_AUTO_PAIRS and pairs == len(list(result.measurement("off").seconds))
    low, high = result.pair().interval
    middle = speedup_estimate(list(result.measurement("off").seconds), list(result.measurement("dynamic").seconds))
    width = stats.relative_half_width(middle, low, high)
    note = _auto_note(result)
    assert note.startswith(f"-r auto: {result.config.prompt_tokens}+4 tokens took {pairs} pairs; ")
    # The cap is checked first, so the stopping rule ran at most once per pair past the minimum and said yes at most last.
    assert len(checks) <= pairs - MIN_AUTO_PAIRS + 1 and not any(checks[:-1])
    if checks and checks[-1]:
        assert width <= 0.05 and note.endswith("within the ±5% target")
    elif width > 0.05:
        assert note.endswith("the 3 s cap (--auto-cap) came first")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"repeat": "often"}, "repeat must be a whole number >= 1 or 'auto', got 'often'"),
        ({"ci_target": 0}, "ci_target must be a fraction between 0 and 1, e.g. 0.05 for ±5%, got 0"),
        ({"auto_cap": -1}, "auto_cap must be a number of seconds >= 0, got -1"),
    ],
)
def test_bad_auto_arguments_are_refused(tiny, kwargs: dict, message: str) -> None:
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, new_tokens=2, **kwargs)
    assert str(caught.value) == message


def test_the_magic_takes_auto_and_predict(shell, capsys) -> None:
    result = shell.run_cell_magic("kvbench", "-n 2 -w 0 -r AUTO --ci-target 0.99 --auto-cap 5 --predict -o", PROMPT)
    assert result.spec.repeat == "auto" and result.spec.ci_target == 0.99
    assert len(result.predictions) == 1 and not math.isnan(result.to_dataframe()["predicted_speedup"][0])
    with pytest.raises(UsageError, match="expected a whole number or auto, got 'sometimes'"):
        shell.run_cell_magic("kvbench", "-r sometimes", PROMPT)
