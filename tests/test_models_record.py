"""Models side by side as data, on injected results (no model loads): the one table, each shape's row and sentence,
the notes shared once, the settings that differ, and the file it is kept in."""

from __future__ import annotations

import dataclasses

import pytest

import kvmagic
from kvmagic.addons.models.models_columns import SHAPE_COLUMNS
from kvmagic.addons.models.models_result import ModelsResult
from kvmagic.addons.models.models_table import shape_values
from kvmagic.core.shape import ModelShape
from kvmagic.errors import KVMagicError
from kvmagic.results.records import RunFacts
from kvmagic.results.result import BenchmarkResult

from .records import pair

# 4 layers, the middle two over a window of 16; 8 heads sharing 2 KV heads of 8, float32: 2 * 2 * 8 * 4 = 128 bytes
# a position and layer, 512 a token over all layers, 256 past the window (the two full-attention layers').
SLIDING = ModelShape(4, 64, 128, 8, 2, 8, 512, 4, 0, windows=(None, 16, 16, None))
FULL = ModelShape(
    2, 64, 128, 4, 4, 16, 512, 2, 0
)  # every head its own KV head, float16: 2 * 4 * 16 * 2 = 256 a layer, 512 a token


def _models(stopped: str = "", left: tuple[str, ...] = ()) -> ModelsResult:
    one = BenchmarkResult("org/one", pair((8, 4), [2.0, 2.2, 2.1], [1.0, 1.1, 1.0]), metadata={"dtype": "float32"})
    two = BenchmarkResult("two", pair((8, 4), [3.0, 3.3, 3.1], [1.0, 1.0, 1.1]), metadata={"dtype": "float16"})
    return ModelsResult([one, two], {"org/one": SLIDING, "two": FULL}, stopped, list(left))


def test_the_table_leads_each_models_rows_with_its_name() -> None:
    frame = _models().to_dataframe()
    assert frame["model"].tolist() == ["org/one", "two"] and list(frame.columns[:2]) == ["model", "prompt_tokens"]
    assert frame["speedup"].tolist() == pytest.approx([2.1, 3.1])


def test_a_shape_row_counts_the_sliding_layers_and_the_bytes_a_token_adds() -> None:
    row = shape_values("org/one", SLIDING, "float32")
    assert row == {"model": "org/one", "layers": 4, "sliding_layers": "1-2", "sliding_window": 16, "heads": 8,
                   "kv_heads": 2, "group_size": 4, "head_dim": 8, "dtype": "float32", "token_kv_bytes": 512,
                   "windowed_token_kv_bytes": 256}  # fmt: skip
    unwindowed = shape_values("x", ModelShape(**{**SLIDING.__dict__, "cache_windows": False}), "float32")
    assert unwindowed["windowed_token_kv_bytes"] == 512  # the cache keeps every position of a sliding layer
    plain = shape_values("two", FULL, "float16")
    assert (plain["sliding_layers"], plain["sliding_window"], plain["group_size"]) == ("", None, 1)


def test_the_notes_give_each_shape_then_a_note_all_share_once() -> None:
    notes = _models("interrupted", ("three",)).notes()
    assert notes[:2] == [
        (
            "org/one: 4 layers, 2 of them over a sliding window of 16 (layers 1-2); 8 attention heads share 2 KV "
            "heads (groups of 4), head size 8; float32: 512 KV bytes per token, 256 past the window (the "
            "full-attention layers')"
        ),
        "two: 2 layers; 4 attention heads, each with its own KV head, head size 16; float16: 512 KV bytes per token",
    ]
    assert notes[-1] == "interrupted: three not measured"
    assert not any(note.startswith(("org/one: org/one", "two: two")) for note in notes)


def test_settings_every_model_shares_are_said_once_and_others_per_model() -> None:
    setup = _models().setup()
    assert setup["dtype"] == {"org/one": "float32", "two": "float16"} and setup["repeat"] == 1
    assert repr(_models()) == "<ModelsResult org/one, two: 4 measurements; identical=True>"
    assert repr(_models("interrupted")).endswith("; partial>")


def test_the_file_reads_back_whole_and_refuses_what_it_is_not(tmp_path) -> None:
    models = _models("interrupted", ("three",))
    back = ModelsResult.from_dict(models.to_dict())
    assert back.to_dict() == models.to_dict() and back.shapes == models.shapes and back.left == ["three"]
    with pytest.raises(KVMagicError, match="not a run of several models"):
        ModelsResult.from_dict({"format": "other"})
    with pytest.raises(KVMagicError, match=r"saved by a newer kvmagic \(format 2\): upgrade kvmagic"):
        ModelsResult.from_dict({**models.to_dict(), "version": 2})


def test_the_table_numbers_its_rows_afresh_and_leaves_out_a_model_without_rows() -> None:
    frame = _models().to_dataframe()
    assert frame.index.tolist() == [0, 1]  # not each model's own 0: .loc[1] is the second model's row
    empty = BenchmarkResult("none", [], metadata={"dtype": "float32"})
    models = ModelsResult([empty, *_models().results], {})
    assert models.to_dataframe()["model"].tolist() == ["org/one", "two"]
    assert ModelsResult([]).to_dataframe().columns.tolist() == ["model"] and ModelsResult([]).notes() == []


def test_the_shape_table_has_a_row_per_model_with_a_shape_and_its_window_or_none() -> None:
    models = _models()
    models.results[1].metadata.pop("dtype")  # a file from before the dtype was kept
    models.results.append(BenchmarkResult("unshaped", pair((8, 4), [2.0], [1.0])))
    shapes = models.shape_table()
    assert shapes.columns.tolist() == list(SHAPE_COLUMNS) and shapes["model"].tolist() == ["org/one", "two"]
    assert shapes["sliding_window"].tolist() == [16, None]  # a window in tokens, not 16.0 beside a NaN
    assert shapes["dtype"].tolist() == ["float32", ""]  # unknown, not "None"
    assert shapes["token_kv_bytes"].tolist() == [512, 512] and shapes["windowed_token_kv_bytes"].tolist() == [256, 512]
    assert "two: 2 layers; 4 attention heads, each with its own KV head, head size 16; : 512" in models.notes()[1]
    unshaped = ModelsResult(models.results, {}).shape_table()  # a file saved without shapes: the columns all the same
    assert unshaped.columns.tolist() == list(SHAPE_COLUMNS) and unshaped.empty


def test_windows_of_several_sizes_and_runs_of_sliding_layers_are_listed() -> None:
    shape = ModelShape(8, 64, 128, 8, 1, 8, 512, 4, 0, windows=(16, 16, 16, None, 32, None, 16, 16))
    row = shape_values("mixed", shape, "bfloat16")
    assert (row["sliding_layers"], row["sliding_window"]) == ("0-2, 4, 6-7", "16, 32")
    assert row["group_size"] == 8


def test_a_sentence_says_every_layer_one_shared_kv_head_and_a_cache_that_keeps_every_position() -> None:
    every = ModelShape(2, 64, 128, 8, 1, 8, 512, 4, 0, windows=(64, 64), cache_windows=False)
    models = ModelsResult([BenchmarkResult("m", pair((8, 4), [2.0], [1.0]), metadata={"dtype": "float32"})],
                          {"m": every})  # fmt: skip
    assert models.notes()[0] == (
        "m: 2 layers, 2 of them over a sliding window of 64 (every layer); 8 attention heads share 1 KV head (a "
        "group of 8), head size 8; float32: 128 KV bytes per token at any length: the installed transformers keeps "
        "every position of a sliding layer"
    )


def test_a_note_every_model_has_is_said_once_and_one_model_s_own_note_is_led_by_its_name() -> None:
    ships = RunFacts(model_generation_settings={"top_p": 0.9})
    one = BenchmarkResult("org/one", pair((8, 4), [2.0, 2.2, 2.1], [1.0, 1.1, 1.0]), facts=ships)
    unsure = BenchmarkResult("two", pair((8, 4), [1.0, 1.1, 0.9], [1.0, 1.05, 0.95]), facts=ships)  # holds 1
    shipped = "the model ships top_p=0.9: turned off here, so its own defaults generate differently"
    notes = ModelsResult([one, unsure], {}, "", ["three", "four"]).notes()
    assert notes[0] == shipped and notes.count(shipped) == 1
    assert notes[1].startswith("two: cached: the 95% interval [") and "holds 1" in notes[1]
    assert len(notes) == 4 and notes[2].startswith("warning: times vary (IQR over 10% of the median) for two (")
    assert notes[3] == "stopped: three, four not measured"  # left without a reason given
    assert ModelsResult([one], {}).notes() == [shipped]  # one model's notes are all its own, said plainly


def test_times_that_vary_in_several_models_are_one_warning_naming_each_model_s() -> None:
    """One warning, as one model's run says it: a line per model would bury the other notes."""
    wide, steady = [1.0, 1.5, 2.0, 1.2, 1.8], [1.0, 1.01, 1.02, 1.0, 1.01]
    first = BenchmarkResult("first", pair((8, 4), wide, steady), metadata={"device": "cpu", "threads": 2})
    second = BenchmarkResult("second", pair((8, 4), steady, steady))
    third = BenchmarkResult("third", pair((8, 4), steady, wide))
    notes = ModelsResult([first, second, third], {}).notes()
    warned = [note for note in notes if "times vary" in note]
    assert warned == [
        (
            "warning: times vary (IQR over 10% of the median) for first (uncached 40%), third (cached 40%): close "
            "other work, use --threads 1, or raise -r for more pairs before trusting the speed-ups"
        )
    ]
    assert not [note for note in ModelsResult([second], {}).notes() if "times vary" in note]
    alone = [note for note in ModelsResult([first], {}).notes() if "times vary" in note]
    assert alone == [note for note in first.notes() if "times vary" in note]  # one model's, as its own run says it
    assert alone[0].startswith("warning: times vary (IQR over 10% of the median) for uncached 40%: ")


def test_the_text_and_the_page_show_the_table_and_the_notes() -> None:
    models = _models()
    text, page = str(models), models._repr_html_()
    assert text.splitlines()[1].split()[:2] == ["one", "8"] and text.endswith("(+1 note: --wide or .notes())")
    assert all(note in " ".join(models.notes()) for note in ("two: 2 layers;", "float16: 512 KV bytes per token"))
    assert "<p>two: 2 layers;" in page and 'row1 col0" >two</td>' in page  # the notes beneath the rows
    assert "org/one=float32, two=float16</td>" in page  # the settings that differ, per model

    class Printer:
        def text(self, said: str) -> None:
            self.said = said

    printer = Printer()
    models._repr_pretty_(printer, cycle=False)
    assert printer.said == f"{models!r}\n{text}"
    models._repr_pretty_(printer, cycle=True)
    assert printer.said == repr(models)


def test_the_file_says_its_version_and_an_older_file_reads_as_complete() -> None:
    data = _models().to_dict()
    assert data["version"] == 1
    older = {key: value for key, value in data.items() if key not in ("version", "stopped", "left")}
    back = ModelsResult.from_dict(older)
    assert back.stopped == "" and back.left == [] and not back.partial
    with pytest.raises(KVMagicError, match=r"^this is not a run of several models: read one model's with "
                                           r"BenchmarkResult\.read_json$"):  # fmt: skip
        ModelsResult.from_dict([])


def test_what_one_model_s_result_answers_is_answered_here_or_refused_in_one_line_that_says_where() -> None:
    """Every field, method and add-on attribute of one model's result: the models answer it together, or refuse it
    in one line that names a model's result to ask (``choice()`` was missing, an AttributeError, before)."""
    models = _models()
    from kvmagic.core.addon import addons

    names = {f.name for f in dataclasses.fields(BenchmarkResult)} | {n for a in addons() for n in a.attributes}
    names |= {name for name in dir(BenchmarkResult) if not name.startswith("_")}
    refused: dict[str, str] = {}
    for name in sorted(names):
        try:
            getattr(models, name)
        except KVMagicError as error:
            refused[name] = str(error)
            assert not hasattr(models, name)  # still an attribute the models lack, for getattr(x, name, default)
            getattr(models.result("org/one"), name)  # where the refusal sends a reader, the name is answered
    assert refused["choice"] == (
        "choice() is one model's: name that model's result, e.g. models.result('org/one').choice() (models.models "
        "lists them)"
    )
    assert refused["limits"].startswith("limits is one model's: name that model's result, e.g. ")
    assert all(said.count("\n") == 0 and said.startswith(f"{name}") for name, said in refused.items())
    assert sorted(names - set(refused)) == [
        "from_dict", "from_json", "identical", "measurements", "model", "notes", "partial", "plot", "read_json",
        "save", "setup", "to_csv", "to_dataframe", "to_dict", "to_json", "to_markdown",
    ]  # fmt: skip
    with pytest.raises(AttributeError, match="'ModelsResult' has no attribute 'nothing'"):
        models.nothing  # noqa: B018 - a name no result has is no mistake of this kind


def test_a_comparison_refuses_models_on_either_side_in_one_line() -> None:
    models = _models()
    one = models.results[0]
    for result, baseline, side in ((one, models, "baseline"), (models, one, "result")):
        with pytest.raises(KVMagicError) as raised:
            kvmagic.compare(result, baseline)
        assert str(raised.value) == (
            f"compare sets one run against another: the {side} is a ModelsResult, not one run's BenchmarkResult: "
            "pass one of the runs it holds"
        )
    assert kvmagic.compare(one, models.results[1]).result is one
