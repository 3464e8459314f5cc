"""Models side by side (``-m A,B``): one request on each model in turn, one table with a ``model`` column, each
model's shape beneath it; in the command, the notebook and the API, on tiny and a shipped sliding-window shape."""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path
from typing import Any

import pytest

from kvmagic.addons.models.models_result import ModelsResult
from kvmagic.addons.models.models_run import run_models
from kvmagic.addons.models.models_table import shape_values
from kvmagic.addons.random_weights.random_build import shipped_config
from kvmagic.core.shape import ModelShape
from kvmagic.errors import KVMagicError
from kvmagic.frontends.cli import main
from kvmagic.measure.memory import sliding_keep
from kvmagic.results.result import BenchmarkResult

from .conftest import PROMPT, raises_usage, said
from .model_state import snapshot
from .test_cli import kvbench

GEMMA = "google/gemma-3-270m"
SHORT = ("-n", "8", "-p", "32,128", "-w", "0", "-r", "1", "--max-seconds", "0")  # 0: no estimate, no probes


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Gemma 3 270M cut to one period of its layers (5 sliding, 1 full), its window to 16 and its vocabulary to 512,
    with tiny's tokenizer beside it: 32 + 8 and 128 + 8 tokens pass the window on a CPU. 1 KV head of 256, float32:
    2,048 bytes a position and layer."""
    from transformers import AutoTokenizer

    from kvmagic.model.tiny import tiny_dir

    data = shipped_config(GEMMA)
    assert data is not None
    data.update(num_hidden_layers=6, layer_types=data["layer_types"][:6], sliding_window=16, vocab_size=512)
    path = tmp_path_factory.mktemp("gemma")
    (path / "config.json").write_text(json.dumps(data))
    AutoTokenizer.from_pretrained(tiny_dir()).save_pretrained(path)
    return str(path)


def _gemma_bytes(prompt_tokens: int, new_tokens: int) -> int:
    """What the cut Gemma's cache holds, by hand: each sliding layer its window once the context passes it (and the
    window as an 8-byte tensor) where the installed cache windows it, else every position."""
    positions = prompt_tokens + new_tokens - 1
    if sliding_keep().windowed:
        return (5 * 16 + positions) * 2048 + 5 * 8
    return 6 * positions * 2048


def test_the_command_prints_one_table_with_a_model_column(gemma: str, tmp_path: Path) -> None:
    saved = tmp_path / "models.json"
    run = kvbench("-m", f"tiny,{gemma}", "--random-weights", "--device-map", "cpu", *SHORT, "--wide",
                  "--save", str(saved), PROMPT)  # fmt: skip
    assert run.returncode == 0, run.stderr
    blocks = run.stdout.split("\n\n")
    assert all(block.split()[:3] == ["model", "prompt_tokens", "new_tokens"] for block in blocks[:-1])
    assert [line.split()[0] for line in blocks[0].splitlines()[1:5]] == ["tiny", "tiny", gemma, gemma]
    assert "tiny: Exaone4ForCausalLM" in run.stderr and f"{gemma}: Gemma3ForCausalLM" in run.stderr
    assert f"{gemma}: 6 layers, 5 of them over a sliding window of 16 (layers 0-4); 4 attention heads share 1 KV head" \
        in said(run.stdout)  # fmt: skip
    assert "tiny: 4 layers; 8 attention heads share 2 KV heads (groups of 4), head size 32" in said(run.stdout)
    frame = ModelsResult.read_json(saved).to_dataframe()
    assert frame["model"].tolist() == ["tiny", "tiny", gemma, gemma]
    assert frame["identical"].tolist() == [True] * 4
    counted, predicted = (frame["kv_cache_mib"] * 2**20).tolist(), (frame["kv_predicted_mib"] * 2**20).tolist()
    assert counted == predicted
    assert counted[2:] == [_gemma_bytes(32, 8), _gemma_bytes(128, 8)]
    assert counted[:2] == [4 * 39 * 2 * 2 * 32 * 4, 4 * 135 * 2 * 2 * 32 * 4]  # tiny: 4 layers, 2 KV heads of 32


def test_the_target_command_on_the_shipped_gemma_shape() -> None:
    """The shipped config as published (18 layers, window 512, 262,144 tokens), beside tiny."""
    run = kvbench("-m", f"tiny,{GEMMA}", "--random-weights", "--device-map", "cpu", *SHORT, "--format", "json",
                  PROMPT)  # fmt: skip
    assert run.returncode == 0, run.stderr
    models = ModelsResult.from_dict(json.loads(run.stdout))
    frame = models.to_dataframe()
    assert frame["model"].tolist() == ["tiny", "tiny", GEMMA, GEMMA] and frame["identical"].all()
    assert (frame["kv_cache_mib"] == frame["kv_predicted_mib"]).all()
    shapes = models.shape_table().set_index("model")
    assert shapes.loc[GEMMA, "sliding_layers"] == "0-4, 6-10, 12-16" and shapes.loc[GEMMA, "sliding_window"] == 512
    assert shapes.loc[GEMMA, "token_kv_bytes"] == 18 * 2 * 256 * 4
    assert shapes.loc[GEMMA, "windowed_token_kv_bytes"] == (3 if sliding_keep().windowed else 18) * 2 * 256 * 4


def test_the_magic_leaves_the_loaded_model_and_the_namespace_alone(shell: Any, tiny: Any, gemma: str) -> None:
    magics = shell.magics_manager.registry["KVMagics"]
    before, state = dict(shell.user_ns), snapshot(tiny.model)
    line = f"-m tiny,{gemma} --random-weights -n 4 -p 32 -w 0 --max-seconds 0 -o -q"
    found = shell.run_cell(f"%%kvbench {line}\n{PROMPT}\n").result
    assert isinstance(found, ModelsResult) and found.models == ["tiny", gemma]
    assert magics.loaded is tiny and snapshot(tiny.model) == state
    assert {k: v for k, v in shell.user_ns.items() if not k.startswith("_") and k not in ("In", "Out")} == {
        k: v for k, v in before.items() if not k.startswith("_") and k not in ("In", "Out")
    }
    frame = found.to_dataframe()
    assert frame["model"].tolist() == ["tiny", gemma] and frame["identical"].all()
    assert (frame["kv_cache_mib"] == frame["kv_predicted_mib"]).all()
    figure = found.plot()
    assert len(figure.axes) == 3 and {"tiny, cached", f"{gemma}, cached"} <= {
        text.get_text() for text in figure.axes[1].get_legend().get_texts()
    }


def test_the_magic_shows_one_table_and_keeps_it_in_a_variable(shell: Any, gemma: str) -> None:
    line = f"-m tiny,{gemma} --random-weights -n 4 -p 32 -w 0 --max-seconds 0 -v both"
    table = shell.run_cell(f"%%kvbench {line}\n{PROMPT}\n").result
    stored = shell.user_ns.pop("both")
    assert isinstance(stored, ModelsResult) and table.result is stored
    assert list(table.columns[:2]) == ["model", "prompt_tokens"] and repr(table).split()[0] == "model"
    assert "5 of them over a sliding window of 16" in " ".join(stored.notes())  # one call away: three lines shown
    assert said(repr(table)).endswith("notes: --wide or .notes())")


def test_one_model_named_in_the_magic_is_one_model_s_result(shell: Any, tiny: Any) -> None:
    found = shell.run_cell(f"%%kvbench -m tiny -n 2 -w 0 -o -q\n{PROMPT}\n").result
    assert isinstance(found, BenchmarkResult) and "model" not in found.to_dataframe().columns
    assert shell.magics_manager.registry["KVMagics"].loaded is tiny


def test_each_model_is_released_before_the_next_loads(gemma: str) -> None:
    held: list[weakref.ref[Any]] = []
    alive_at_load: list[bool] = []

    def loaded(model: Any) -> None:
        gc.collect()
        alive_at_load.append(any(ref() is not None for ref in held))
        held.append(weakref.ref(model.model))

    models = run_models(["tiny", gemma], PROMPT, load={"random_weights": True, "device_map": "cpu"}, on_load=loaded,
                        new_tokens=2, warmup_tokens=0, max_seconds=0)  # fmt: skip
    gc.collect()
    assert alive_at_load == [False, False] and all(ref() is None for ref in held)
    assert models.models == ["tiny", gemma] and "model" in models.to_dataframe().columns


def test_the_bar_names_the_model_it_is_measuring(gemma: str, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from kvmagic.runner import benchmark, plan

    monkeypatch.setattr(plan, "first_call", lambda loaded, inputs, new_tokens, strategy: 5.0)  # about 20 s each
    monkeypatch.setattr(benchmark, "PROGRESS_AFTER_S", 0.0)  # a run of that length has lasted past the delay
    run_models(["tiny", gemma], PROMPT, load={"random_weights": True, "device_map": "cpu"}, new_tokens=2,
               warmup_tokens=0, progress=True)  # fmt: skip
    bar = capsys.readouterr().err
    assert "kvbench tiny (model 1/2) 1/1: prompt" in bar
    assert f"kvbench {Path(gemma).name} (model 2/2) 1/1: prompt" in bar


def test_a_saved_run_of_models_reads_back_and_is_no_baseline(gemma: str, tmp_path: Path, capsys: Any) -> None:
    models = run_models(["tiny", gemma], PROMPT, load={"random_weights": True, "device_map": "cpu"},
                        new_tokens=2, warmup_tokens=0, max_seconds=0)  # fmt: skip
    models.save(tmp_path / "models.json")
    back = ModelsResult.read_json(tmp_path / "models.json")
    assert back.to_dataframe().equals(models.to_dataframe()) and back.shapes == models.shapes
    assert back.notes() == models.notes()
    with pytest.raises(KVMagicError, match="holds several models side by side, not one model's run"):
        BenchmarkResult.read_json(tmp_path / "models.json")
    assert main(["-m", "tiny", "--compare", str(tmp_path / "models.json"), PROMPT]) == 2
    assert "kvbench: error: this holds several models side by side" in capsys.readouterr().err
    with pytest.raises(KVMagicError, match="not a run of several models"):
        ModelsResult.from_dict(models.results[0].to_dict())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-m", "tiny,tiny"], "-m names 'tiny' twice: name each model once"),
        (["-m", "tiny,"], "-m holds an empty name: write the models separated by single commas"),
        (["-m", "tiny,no-such-org/no-such-model", "--random-weights"], "no config for 'no-such-org/no-such-model'"),
        (["-m", "tiny,no-such-org/no-such-model"], "cannot download 'no-such-org/no-such-model': the Hugging Face Hub"),
        (["-m", "tiny,other", "--compare", "run.json"],
         "--compare PATH sets one model's run against a saved one, not each of several -m: drop it, or name one"),
        (["-m", "tiny,other", "--tp"],
         "--tp splits one model over its ranks, not each of several -m: drop it, or name one model"),
        (["-m", "tiny,other", "--revision", "main"],
         "--revision belongs to one model's repository, not to each of several -m: drop it, or measure that model"),
    ],
)  # fmt: skip
def test_the_command_refuses_before_any_model_loads(args: list[str], message: str, capsys: Any) -> None:
    assert main([*args, "-n", "2", PROMPT]) == 2
    err = said(capsys.readouterr().err)
    assert err.startswith(f"kvbench: error: {message}") and len(err.strip().splitlines()) == 1, err
    assert "ForCausalLM" not in err  # no model's summary: nothing loaded


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("%%kvbench -m tiny,tiny", r"^-m names 'tiny' twice: name each model once$"),
        ("%%kvbench --random-weights",
         r"^--random-weights builds the models -m names: add -m MODEL, or use %kvload MODEL --random-weights$"),
        ("%%kvbench -m tiny --random-weights", r"^-m tiny has seeded random weights already: drop --random-weights$"),
        ("%%kvbench -m tiny,somewhere/else --tp 2", r"^--tp splits one model over its ranks, not each of several -m"),
        ("%%kvbench -m tiny,no-such-org/no-such-model", r"no-such-org/no-such-model"),
    ],
)  # fmt: skip
def test_the_magic_refuses_in_one_line(shell: Any, tiny: Any, line: str, message: str) -> None:
    with raises_usage(message):
        shell.run_cell_magic("kvbench", line.removeprefix("%%kvbench "), PROMPT)
    assert shell.magics_manager.registry["KVMagics"].loaded is tiny


def test_kvload_takes_one_model(shell: Any, tiny: Any) -> None:
    with raises_usage(r"^%kvload loads one model: to measure several side by side, use %%kvbench -m tiny,other$"):
        shell.run_line_magic("kvload", "tiny,other")
    assert shell.magics_manager.registry["KVMagics"].loaded is tiny


def _gemma_shape(cache_windows: bool) -> ModelShape:
    windows = ((512,) * 5 + (None,)) * 3
    return ModelShape(layers=18, hidden=640, intermediate=2048, heads=4, kv_heads=1, head_dim=256, vocab=262144,
                      dtype_bytes=2, weight_bytes=0, windows=windows, cache_windows=cache_windows)  # fmt: skip


def test_a_shape_is_summarised_by_hand_numbers() -> None:
    row = shape_values(GEMMA, _gemma_shape(cache_windows=True), "bfloat16")
    assert row == {"model": GEMMA, "layers": 18, "sliding_layers": "0-4, 6-10, 12-16", "sliding_window": 512,
                   "heads": 4, "kv_heads": 1, "group_size": 4, "head_dim": 256, "dtype": "bfloat16",
                   "token_kv_bytes": 18 * 2 * 256 * 2, "windowed_token_kv_bytes": 3 * 2 * 256 * 2}  # fmt: skip
    unwindowed = shape_values(GEMMA, _gemma_shape(cache_windows=False), "bfloat16")
    assert unwindowed["windowed_token_kv_bytes"] == unwindowed["token_kv_bytes"] == 18_432


def test_a_config_without_weights_is_refused_before_the_first_model_loads(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "config.json").write_text(json.dumps(shipped_config(GEMMA)))
    assert main(["-m", f"tiny,{tmp_path}", "-n", "2", PROMPT]) == 2
    err = said(capsys.readouterr().err)
    assert err == (
        f"kvbench: error: {str(tmp_path)!r} holds a config but no weights (no .safetensors or .bin file): add "
        "--random-weights to build it with random ones, or save the model's weights there\n"
    )


def test_a_later_model_that_fails_keeps_the_ones_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvmagic.addons.models import models_run

    real = models_run.load_model

    def load(name: str, **keywords: Any) -> Any:
        if name == "second":
            raise KVMagicError("'second' holds no loadable model: it broke")
        return real(name, **keywords)

    monkeypatch.setattr(models_run, "check_model", lambda name, **keywords: None)
    monkeypatch.setattr(models_run, "load_model", load)
    found = run_models(["tiny", "second"], PROMPT, new_tokens=2, warmup_tokens=0, max_seconds=0)
    assert [r.model for r in found.results] == ["tiny"] and found.partial and found.left == ["second"]
    assert "stopped at second ('second' holds no loadable model: it broke): second not measured" in found.notes()


def test_the_shown_table_names_a_model_by_its_last_part_where_that_tells_them_apart() -> None:
    from kvmagic.addons.models.models_columns import short_names as models

    assert models(["tiny", "tiny", "google/gemma-3-270m", "/tmp/cut/smol/"]) == ["tiny", "tiny", "gemma-3-270m", "smol"]
    assert models(["org/model", "other/model"]) == ["org/model", "other/model"]  # the last parts alike: whole names
