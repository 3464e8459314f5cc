"""--frontier: how long a context and how large a batch each strategy holds in the memory free, and a check run."""

from __future__ import annotations

import math

import pytest
from IPython.core.error import UsageError

from kvmagic import BenchmarkResult, KVMagicError, run_benchmark
from kvmagic.addons.frontier.frontier_table import FRONTIER_COLUMNS, frontier_table
from kvmagic.core.strategy import DYNAMIC
from kvmagic.results.caution import caution_notes
from kvmagic.runner import plan, rounds

from .conftest import PROMPT


def test_predicted_frontier_of_each_strategy(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=4, warmup_tokens=0, frontier="predict")
    table = frontier_table(result)
    assert list(table.columns) == list(FRONTIER_COLUMNS) and table["strategy"].tolist() == ["uncached", "cached"]
    assert (table["max_context"] == 2048).all() and (table["limited_by"] == "positions").all()  # tiny: 2048
    assert table["kv_bytes_per_token"].tolist() == [0.0, 2048.0]  # 2 x 4 layers x 2 KV heads x 32 x 4 bytes
    assert (table["max_batch"] > 1).all() and result.frontier.checks == []
    assert [n for n in result.notes() if n not in caution_notes(result)][-1].startswith("frontier (")
    again = BenchmarkResult.from_json(result.to_json())
    assert again.frontier == result.frontier and frontier_table(again).equals(table)


def test_a_check_runs_the_cached_strategies_at_their_frontier(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=4, warmup_tokens=0, frontier="check")
    (check,) = result.frontier.checks
    assert check.strategy == DYNAMIC and check.prompt_tokens + check.new_tokens == 2048
    assert abs(check.error) < 0.05 and check.fitted  # tensors against the prediction; the process within free memory
    assert any(n.startswith("frontier check, cached at ") for n in result.notes())
    assert math.isnan(frontier_table(result)["check_error"].iloc[0])  # the uncached run to 2048 is not made


def test_a_check_past_the_budget_is_not_run(tiny, monkeypatch) -> None:
    monkeypatch.setattr(plan, "first_call", lambda *args: 0.001)  # the run itself fits its budget
    real = rounds.timed_generate

    def slow(model, inputs, config, devices, **kwargs):
        output, seconds = real(model, inputs, config, devices, **kwargs)
        return output, 100.0 if config.max_new_tokens == 4 else seconds  # 25 s a token: 2044 would take hours

    monkeypatch.setattr(rounds, "timed_generate", slow)
    result = run_benchmark(tiny, PROMPT, new_tokens=4, warmup_tokens=0, frontier="check")
    assert result.frontier.checks == [] and list(result.frontier.unchecked) == [DYNAMIC]
    assert result.frontier.unchecked["dynamic"] == result.frontier.unchecked[DYNAMIC] > 0  # found by name too
    assert any(n.startswith("frontier check, cached: not run, it would take about ") for n in result.notes())


def test_the_flag_alone_predicts_and_check_also_runs(shell) -> None:
    predicted = shell.run_cell_magic("kvbench", "-n 2 -w 0 -o --frontier", PROMPT)
    assert predicted.spec.frontier == "predict" and predicted.frontier
    with pytest.raises(UsageError, match=r"%kvbench: --frontier: expected nothing or 'check', got 'maybe'"):
        shell.run_cell_magic("kvbench", "-n 2 --frontier maybe", PROMPT)
    with pytest.raises(KVMagicError, match=r"^frontier is predict or check \(or None\), got 'maybe'$"):
        run_benchmark(shell.magics_manager.registry["KVMagics"].loaded, PROMPT, frontier="maybe")
