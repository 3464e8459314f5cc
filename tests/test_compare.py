"""--compare: per-row change against a saved run, judged against both runs' spread; metadata differences shown."""

from __future__ import annotations

import math
import re

import pytest
from IPython.core.error import UsageError

from kvmagic.addons.baseline.compare import COMPARED, compare
from kvmagic.core.config import Config
from kvmagic.core.strategy import parse_list
from kvmagic.results.caution import caution_notes
from kvmagic.results.columns import names
from kvmagic.results.measurement import Measurement
from kvmagic.results.records import RunFacts
from kvmagic.results.report import COLUMNS
from kvmagic.results.result import BenchmarkResult

from .conftest import PROMPT, said
from .records import rounds


def _measurement(pairs: list[tuple[float, float]], new_tokens: int = 16) -> list[Measurement]:
    return rounds((8, new_tokens), pairs)


def _result(*measurements: list[Measurement], facts: RunFacts | None = None, **metadata: object) -> BenchmarkResult:
    found = [m for pair in measurements for m in pair]
    return BenchmarkResult(model="tiny", measurements=found, metadata=dict(metadata), facts=facts or RunFacts())


def test_change_and_significance_against_hand_computed_numbers():
    was = _result(_measurement([(2.0, 1.0), (2.2, 1.0)]), _measurement([(2.0, 1.0), (2.2, 1.0)], new_tokens=32))
    now = _result(_measurement([(3.0, 1.0), (3.2, 1.0)]), _measurement([(2.1, 1.0), (2.4, 1.0)], new_tokens=32))
    frame = compare(now, was).to_dataframe()
    assert list(frame.columns) == [*COLUMNS, *names(COMPARED)]
    assert frame.speedup_was.tolist() == pytest.approx([2.1, 2.1])
    assert frame.speedup_change.tolist() == pytest.approx([3.1 / 2.1 - 1, 2.25 / 2.1 - 1])
    # Two pairs a run: Welch's t on the log ratios. ln 3, ln 3.2 against ln 2, ln 2.2: t = 6.78 on 1.76
    # degrees of freedom, p = 0.029; ln 2.1, ln 2.4 against them: t = 0.83, p = 0.50.
    assert frame.significant.tolist() == [True, False]
    assert compare(now, was, "base.json").notes() == [
        (
            "against base.json (2 rounds saved, 2 now): the speed-up rose beyond noise at 8+16 tokens 2.10 -> 3.10 "
            "(+48%); 1 other row within noise"
        ),
        *caution_notes(now),
    ]


def test_single_round_has_no_verdict_and_says_why():
    was = _result(_measurement([(2.0, 1.0)]))
    now = _result(_measurement([(4.0, 1.0), (4.0, 1.0)]))
    comparison = compare(now, was)
    row = comparison.rows()[0]
    assert row["significant"] is None and row["speedup_change"] == pytest.approx(1.0)
    assert comparison.notes() == [
        (
            "against the saved run (1 round saved, 2 now): 1 row timed in one round on a side, which cannot tell a "
            "change from noise: time both runs with -r 2 or more"
        ),
        *caution_notes(now),
    ]


def test_metadata_differences_and_unmatched_rows_are_notes():
    was = _result(_measurement([(2.0, 1.0)] * 2), _measurement([(2.0, 1.0)] * 2, new_tokens=64), dtype="float32",
                  torch="2.13.0", device="cpu",
                  facts=RunFacts(prompt_sha256="a" * 64, estimated_s=1.0, stopped="interrupted"))  # fmt: skip
    now = _result(_measurement([(2.0, 1.0)] * 2), _measurement([(2.0, 1.0)] * 2, new_tokens=32), dtype="bfloat16",
                  torch="2.13.0", transformers="5.24.0",
                  facts=RunFacts(prompt_sha256="b" * 64, estimated_s=2.0))  # fmt: skip
    now.model = "other"
    comparison = compare(now, was)
    assert comparison.notes() == [
        "against the saved run (2 rounds saved, 2 now): the speed-up moved 2.00 -> 2.00 (+0%), within noise",
        (
            "differs from the saved run: model: 'tiny' saved, 'other' now; dtype: 'float32' saved, 'bfloat16' now; "
            "the prompt differs (its SHA-256 does not match); device: 'cpu' saved, not recorded now; transformers: "
            "not recorded in the saved run, '5.24.0' now"
        ),
        *caution_notes(now),
        "no saved row to compare with for 8+32 tokens",
        "saved rows not measured now: 8+64 tokens",
        "the saved run was interrupted: it has only the rows it finished",
    ]
    unmatched = comparison.rows()[1]
    assert math.isnan(unmatched["speedup_was"]) and unmatched["significant"] is None
    assert math.isnan(unmatched["speedup_change"])


def test_magic_compares_two_saved_runs(shell, tmp_path, capsys):
    base = tmp_path / "base.json"
    shell.run_cell_magic("kvbench", f"-n 3 -w 1 -r 2 -q --save {base}", PROMPT)
    saved = BenchmarkResult.read_json(base)
    same = shell.run_cell_magic("kvbench", f"-n 3 -w 1 -r 2 --compare {base}", PROMPT)
    assert list(same.columns) == [*COLUMNS, *names(COMPARED)]
    assert same.speedup_was[0] == pytest.approx(saved.speedup)
    assert same.speedup_change[0] == pytest.approx(same.speedup[0] / saved.speedup - 1)
    assert "differs" not in capsys.readouterr().out  # same settings, same prompt: nothing to report
    changed = shell.run_cell_magic("kvbench", f"-n 3 -w 0 -r 2 -o --compare {base}", PROMPT)
    assert changed.notes()[1:] == [
        "differs from the saved run: warmup_tokens: 1 saved, 0 now",
        *caution_notes(changed.result),
    ]
    assert changed.notes()[0].startswith(f"against {base} (2 rounds saved, 2 now): ")
    assert changed.baseline == saved and changed.result.configs[0].new_tokens == 3


def test_magic_says_where_it_saved_and_keeps_a_result_it_could_not_save(shell, tmp_path, capsys, monkeypatch):
    import shutil

    import kvmagic.runner.benchmark

    shell.run_cell_magic("kvbench", f"-n 2 -w 0 --save {tmp_path / 'run.json'}", PROMPT)
    assert capsys.readouterr().out == f"saved {tmp_path / 'run.json'}\n"  # one line, where it wrote
    shell.run_cell_magic("kvbench", f"-n 2 -w 0 -q --save {tmp_path / 'quiet.json'}", PROMPT)
    assert capsys.readouterr().out == "" and (tmp_path / "quiet.json").is_file()  # -q prints nothing
    folder, measure = tmp_path / "gone", kvmagic.runner.benchmark.run_benchmark
    folder.mkdir()

    def run_then_lose_the_folder(*args, **kwargs):
        found = measure(*args, **kwargs)
        shutil.rmtree(folder)
        return found

    monkeypatch.setattr(kvmagic.runner.benchmark, "run_benchmark", run_then_lose_the_folder)
    table = shell.run_cell_magic("kvbench", f"-n 2 -w 0 -v kept --save {folder / 'run.json'}", PROMPT)
    assert table.new_tokens.tolist() == [2] and shell.user_ns["kept"] is table.result  # nothing measured is lost
    err = capsys.readouterr().err
    assert said(err).splitlines()[-1] == f"UsageError: cannot write '{folder / 'run.json'}': No such file or directory"


def test_magic_reads_the_baseline_before_running(shell, tmp_path):
    (tmp_path / "table.json").write_text('{"rows": []}')
    for path, message in [
        (tmp_path / "missing.json", f"cannot read '{tmp_path / 'missing.json'}': No such file or directory"),
        (tmp_path / "table.json", "this is not a kvmagic benchmark: save one with --save PATH (a .json name)"),
    ]:
        with pytest.raises(UsageError) as caught:
            shell.run_cell_magic("kvbench", f"-n 2000 --compare {path}", PROMPT)  # -n 2000 would fail later
        assert said(caught.value) == message
    with pytest.raises(UsageError) as caught:  # a folder that takes no file is found before the run, too
        shell.run_cell_magic("kvbench", "-n 2000 --save /proc/kvmagic-run.json", PROMPT)
    assert said(caught.value) == (
        "cannot write '/proc/kvmagic-run.json': No such file or directory; name a file in a folder you can write to"
    )


def test_each_setting_a_comparison_reads_is_recorded_under_its_own_name():
    from kvmagic.core.spec import BenchSpec

    base = {"chat": False, "warmup_tokens": 4, "repeat": 1, "steps": False}
    assert BenchSpec().recorded() == base
    auto = BenchSpec.of(chat=True, warmup_tokens=2, repeat="auto", ci_target=0.1, auto_cap=20, predict=True,
                        max_seconds=30, steps=True)  # fmt: skip
    assert auto.recorded() == {"chat": True, "warmup_tokens": 2, "repeat": "auto", "steps": True, "ci_target": 0.1,
                               "auto_cap": 20, "max_seconds": 30}  # fmt: skip
    lossy = BenchSpec.of(cache="off,quantized:quanto", kv_bits=4, quality=False, prefix=4)
    assert lossy.recorded() == {**base, "kv_bits": 4, "quality": "off", "prefix": 4}
    assert BenchSpec(cache="off,static", quality_text="x").recorded() == {**base, "kv_bits": None, "quality": "text"}
    assert BenchSpec(cache="off,static").recorded()["quality"] == "greedy"
    was, now = _result(_measurement([(2.0, 1.0)] * 2)), _result(_measurement([(2.0, 1.0)] * 2))
    now.spec = BenchSpec(repeat=2, warmup_tokens=1)
    assert compare(now, was).differences() == ["repeat: 1 saved, 2 now", "warmup_tokens: 4 saved, 1 now"]


def test_a_configuration_names_its_batch_only_beyond_one_sequence():
    from kvmagic.core.config import Config

    assert (str(Config(16, 64)), str(Config(16, 64, 2))) == ("16+64 tokens", "16+64 tokens x 2 sequences")


def test_a_comparison_of_strategies_matches_each_strategy_and_leaves_the_reference_row_empty():
    from kvmagic.core.spec import BenchSpec

    from .records import timed

    def strategies(static: list[float], quantized: list[float]) -> BenchmarkResult:
        found = [timed((8, 16), "off", [2.0, 2.2, 2.4]), timed((8, 16), "static", static),
                 timed((8, 16), "quantized:quanto", quantized)]  # fmt: skip
        return BenchmarkResult("tiny", found, spec=BenchSpec(cache="off,static,quantized:quanto"),
                               strategies=["off", "static", "quantized:quanto"])  # fmt: skip

    was, now = strategies([1.0, 1.1, 1.2], [2.0, 2.2, 2.4]), strategies([1.0, 1.1, 1.2], [1.0, 1.1, 1.2])
    comparison = compare(now, was)
    rows = {str(row["strategy"]): row for row in comparison.rows()}
    assert list(rows) == ["off", "static", "quantized:quanto"]
    assert math.isnan(rows["off"]["speedup_was"]) and rows["off"]["significant"] is None  # the reference itself
    assert rows["static"]["speedup_was"] == pytest.approx(2.0) and rows["static"]["speedup_change"] == pytest.approx(0)
    assert rows["quantized:quanto"]["speedup_was"] == pytest.approx(1.0)
    assert rows["quantized:quanto"]["speedup_change"] == pytest.approx(1.0)
    assert set(comparison.saved_rows()) == {(Config(8, 16), s) for s in parse_list("off,static,quantized:quanto")}
    # an empty verdict on the reference's own row is no single round: the verdict counts only the rows compared
    assert comparison.notes() == [
        (
            "against the saved run (3 rounds saved, 3 now): the speed-up rose beyond noise at quantized:quanto at "
            "8+16 tokens 1.00 -> 2.00 (+100%); 1 other row within noise"
        ),
        *now.notes(),
    ]
    frame = comparison.to_dataframe()
    assert list(frame.columns) == [*now.to_dataframe().columns, *names(COMPARED)]
    assert frame["speedup_was"].tolist()[1:] == pytest.approx([2.0, 1.0])
    # a strategy the baseline did not run has no row to compare with
    fewer = BenchmarkResult("tiny", was.measurements[:2], spec=BenchSpec(cache="off,static"),
                            strategies=["off", "static"])  # fmt: skip
    quantized = [r for r in compare(now, fewer).rows() if str(r["strategy"]) == "quantized:quanto"]
    assert math.isnan(quantized[0]["speedup_was"]) and quantized[0]["significant"] is None
    assert compare(now, fewer).notes()[-1] == "no saved row to compare with for quantized:quanto at 8+16 tokens"
    assert compare(fewer, now).notes()[-1] == "saved rows not measured now: quantized:quanto at 8+16 tokens"


def test_facts_of_the_run_itself_are_no_difference_and_numbers_are_shown_as_written():
    was = _result(_measurement([(2.0, 1.0)] * 2), facts=RunFacts(configurations=2, estimated_s=1.0, stopped="x"),
                  threads=4, cuda=None)  # fmt: skip
    now = _result(_measurement([(2.0, 1.0)] * 2), facts=RunFacts(configurations=3, estimated_s=2.0), threads=8)
    assert compare(now, was).differences() == ["threads: 4 saved, 8 now", "cuda: None saved, not recorded now"]
    assert compare(was, now).differences() == [
        "threads: 8 saved, 4 now",
        "cuda: not recorded in the saved run, None now",
    ]
    same = compare(now, now, "before.json")
    assert same.differences() == [] and repr(same) == f"<Comparison of {now!r} with before.json>"


def test_a_comparison_shows_itself_as_its_table_and_notes():
    from IPython.lib.pretty import pretty

    was = _result(_measurement([(2.0, 1.0)]), dtype="float32")
    comparison = compare(_result(_measurement([(3.0, 1.0)]), dtype="bfloat16"), was)
    text = str(comparison)
    assert "speedup saved -> now significant" in text.splitlines()[0]
    assert text.splitlines()[1].split()[4:8] == ["2.00", "->", "3.00", "(+50%)"]
    assert "differs from the saved run: dtype: 'float32' saved, 'bfloat16' now" in said(text)
    assert pretty(comparison) == f"{comparison!r}\n{text}"  # -o: what it is, then what it shows
    html = comparison._repr_html_()
    assert "differs from the saved run: dtype" in html and "<code>&lt;Comparison of" in html
    assert re.search(r">model</th><td[^>]*>tiny<", html) and re.search(r">dtype</th><td[^>]*>bfloat16<", html)


def test_a_run_with_no_row_still_has_every_column_of_a_comparison():
    """Interrupted before its first configuration: the table is empty, but a script reading it finds its columns."""
    empty = BenchmarkResult(model="tiny", measurements=[])
    frame = compare(empty, _result(_measurement([(2.0, 1.0)] * 2))).to_dataframe()
    assert frame.empty and list(frame.columns) == [*COLUMNS, *names(COMPARED)]


def test_every_unmatched_configuration_is_named_once_in_one_note():
    was = _result(_measurement([(2.0, 1.0)] * 2), _measurement([(2.0, 1.0)] * 2, new_tokens=64),
                  _measurement([(2.0, 1.0)] * 2, new_tokens=128))  # fmt: skip
    now = _result(_measurement([(2.0, 1.0)] * 2), _measurement([(2.0, 1.0)] * 2, new_tokens=32),
                  _measurement([(2.0, 1.0)] * 2, new_tokens=48))  # fmt: skip
    notes = compare(now, was).notes()
    assert notes[-2:] == [
        "no saved row to compare with for 8+32 tokens, 8+48 tokens",
        "saved rows not measured now: 8+64 tokens, 8+128 tokens",
    ]


def test_a_plot_saved_with_the_baseline_is_no_difference(shell, tmp_path, monkeypatch):
    """--plot turns on steps: one hooked run after the timed rounds, which a later run without it timed alike."""
    monkeypatch.setattr("IPython.display.display", lambda *objs, **kw: None)
    base = tmp_path / "base.json"
    shell.run_cell_magic("kvbench", f"-n 2,3 -w 0 -r 2 -q --plot --save {base}", PROMPT)
    assert BenchmarkResult.read_json(base).spec.steps
    compared = shell.run_cell_magic("kvbench", f"-n 2,3 -w 0 -r 2 -o --compare {base}", PROMPT)
    assert compared.notes()[1:] == compared.result.notes()  # the verdict alone: no difference
    assert compare(compared.baseline, compared.result).differences() == []  # nor the other way round


def test_settings_that_add_only_untimed_runs_are_no_difference():
    from kvmagic.core.spec import BenchSpec

    was, now = _result(_measurement([(2.0, 1.0)] * 2)), _result(_measurement([(2.0, 1.0)] * 2))
    was.spec, now.spec = BenchSpec(cache="off,static"), BenchSpec(cache="off,static", quality=False, steps=True)
    assert compare(now, was).differences() == []
    now.spec = BenchSpec(cache="off,static", quality_text="a text", steps=True, warmup_tokens=1)
    assert compare(now, was).differences() == ["warmup_tokens: 4 saved, 1 now"]  # a timed setting still is one


def test_the_plain_run_and_off_dynamic_measured_the_same_rows(shell, tmp_path):
    """The plain run is off,dynamic shown as one row: either against the other, the comparison adds nothing."""
    plain, pair = tmp_path / "plain.json", tmp_path / "pair.json"
    shell.run_cell_magic("kvbench", f"-n 3 -w 1 -r 2 -q --save {plain}", PROMPT)
    shell.run_cell_magic("kvbench", f"-n 3 -w 1 -r 2 -q --cache off,dynamic --save {pair}", PROMPT)
    for line in (f"--cache off,dynamic --compare {plain}", f"--compare {pair}"):
        compared = shell.run_cell_magic("kvbench", f"-n 3 -w 1 -r 2 -o {line}", PROMPT)
        assert compared.notes()[1:] == compared.result.notes(), line  # the verdict alone: no unmatched row
        assert "(2 rounds saved, 2 now)" in compared.notes()[0]
        assert compared.to_dataframe()["speedup_was"].notna().sum() == 1  # its dynamic row, against the saved one


def test_unmatched_rows_name_their_strategy_beside_a_comparison_of_strategies():
    from kvmagic.core.spec import BenchSpec

    from .records import timed

    def strategies(*names: str) -> BenchmarkResult:
        found = [timed((8, 16), name, [2.0, 2.2]) for name in names]
        return BenchmarkResult("tiny", found, spec=BenchSpec(cache=",".join(names)), strategies=list(names))

    plain = _result(_measurement([(2.0, 1.0)] * 2))
    assert compare(plain, strategies("off", "static")).notes()[-2:] == [
        "no saved row to compare with for dynamic at 8+16 tokens",
        "saved rows not measured now: static at 8+16 tokens",  # not off: the plain row holds it
    ]
    assert compare(strategies("off", "dynamic", "static"), plain).notes()[-1] == (
        "no saved row to compare with for static at 8+16 tokens"  # not off: the saved plain row holds it
    )


def test_a_setting_unset_on_one_side_and_absent_on_the_other_is_no_difference():
    from kvmagic.core.spec import BenchSpec

    plain, pair = _result(_measurement([(2.0, 1.0)] * 2)), _result(_measurement([(2.0, 1.0)] * 2))
    pair.spec = BenchSpec(cache="off,dynamic")
    assert pair.setup()["kv_bits"] is None and "kv_bits" not in plain.setup()
    assert compare(plain, pair).differences() == [] and compare(pair, plain).differences() == []
    pair.spec = BenchSpec(cache="off,quantized:quanto", kv_bits=2)
    assert compare(plain, pair).differences() == ["kv_bits: 2 saved, not recorded now"]  # a width chosen is one
