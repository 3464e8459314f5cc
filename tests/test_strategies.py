"""--cache: the strategy catalogue under each transformers line, and the side-by-side benchmark on tiny."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch
import transformers

from kvmagic import run_benchmark
from kvmagic.core.config import Config
from kvmagic.core.spec import BenchSpec
from kvmagic.core.strategy import DYNAMIC, OFF, parse_list
from kvmagic.errors import KVMagicError
from kvmagic.measure import capabilities, strategies
from kvmagic.measure.strategies import Setup, checked, resolve, setups
from kvmagic.results.report import COLUMNS, STRATEGY_COLUMNS
from kvmagic.results.report import rows as table_rows
from kvmagic.results.result import BenchmarkResult
from kvmagic.runner import plan, rounds

from .conftest import PROMPT
from .model_state import snapshot

ON_GPU = torch.cuda.is_available()
FP8 = "fp8" in capabilities.quantized_backends()
# The quantized backend each line can run on CPU in the test environment: fp8 needs no package (5.24, not 5.17).
QUANTIZED = "quantized:fp8" if FP8 else "quantized:quanto"


def parse_names(text: str | list[str]) -> list[str]:
    """What ``--cache`` reads, checked against the installed libraries, as its names."""
    return [str(s) for s in checked(parse_list(text))]


def test_names_put_off_first_once_and_keep_the_users_order() -> None:
    assert parse_names("static, dynamic") == ["off", "static", "dynamic"]
    with pytest.raises(KVMagicError, match=r"^cache names static twice: name each strategy once$"):
        parse_names("static, dynamic,static")
    assert parse_names(["dynamic", "off"]) == ["off", "dynamic"]
    assert parse_names("hybrid") == ["off", "hybrid"]  # any cache_implementation the installed transformers has


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (" , ", "cache needs at least one strategy"),
        ("quantized", "'quantized' needs a backend: write quantized:quanto"),
        ("quantized:int3", "unknown quantization backend in 'quantized:int3'"),
        ("dynamc", r"unknown cache strategy 'dynamc': did you mean dynamic\? use off, dynamic, static"),
    ],
)
def test_mistyped_names_say_what_to_write(text: str, message: str) -> None:
    with pytest.raises(KVMagicError, match="^" + message.replace("(", r"\(")):
        parse_names(text)


def test_off_dynamic_and_static_run_here_and_state_their_cache_with_compilation_off(tiny) -> None:
    off = {"use_cache": False, "cache_implementation": None, "disable_compile": True}
    assert resolve(tiny, "off") == Setup(OFF, off)
    dynamic = {"use_cache": True, "cache_implementation": "dynamic", "disable_compile": True}
    assert resolve(tiny, "dynamic") == Setup(DYNAMIC, dynamic)
    static = resolve(tiny, "static")
    assert static.reason == "" and static.settings == {**dynamic, "cache_implementation": "static"}
    compiled = resolve(tiny, "static+compile").settings
    assert compiled["disable_compile"] is False and compiled["compile_config"] is not None


@pytest.mark.skipif(ON_GPU, reason="the reason shows only without a GPU")
@pytest.mark.parametrize("name", ["offloaded", "offloaded_static"])
def test_offloaded_caches_need_a_gpu(tiny, name: str) -> None:
    assert resolve(tiny, name).reason.startswith("needs a GPU (CUDA or XPU)")


@pytest.mark.skipif(ON_GPU, reason="the reason shows only without a GPU")
def test_a_comparison_in_which_only_off_can_run_is_refused_not_shown_empty(tiny) -> None:
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, new_tokens=2, cache="off,offloaded,offloaded_static")
    assert str(caught.value) == (
        "nothing to set against off here: offloaded needs a GPU (CUDA or XPU): it offloads the cache from the "
        "accelerator to CPU memory; add a strategy that runs here to cache, e.g. dynamic"
    )
    shown = run_benchmark(tiny, PROMPT, new_tokens=2, cache="off,dynamic,offloaded")  # one runs: the table says why
    assert shown.measurement("dynamic").seconds and "offloaded" in shown.skipped


def test_fp8_runs_where_the_quantized_cache_takes_it(tiny) -> None:
    fp8 = resolve(tiny, "quantized:fp8")
    if FP8:
        assert fp8.reason == ""
        assert fp8.settings["cache_config"] == {"backend": "fp8"}
    else:
        takes = ", ".join(capabilities.quantized_backends())
        assert fp8.reason == (
            f"transformers {transformers.__version__}'s quantized cache takes {takes}: fp8 is not among them"
        )


@pytest.mark.parametrize("package_there", [True, False])
def test_hqq_is_spelled_per_line_and_a_missing_package_names_the_extra(tiny, monkeypatch, package_there: bool) -> None:
    monkeypatch.setattr(strategies, "_installed", lambda backend: package_there)
    hqq = resolve(tiny, "quantized:hqq", kv_bits=2)
    if package_there:
        spelling = capabilities.quantized_backends()["hqq"]  # "HQQ" in 4.55
        assert hqq.settings["cache_config"] == {"backend": spelling, "nbits": 2}
    else:
        assert hqq.reason == "needs hqq: pip install 'kvmagic[quantized]'"


def test_quanto_is_found_when_installed(tiny) -> None:
    quanto = resolve(tiny, "quantized:quanto", kv_bits=2)
    if importlib.util.find_spec("optimum.quanto") is not None:
        assert quanto.reason == "" and quanto.settings["cache_config"] == {"backend": "quanto", "nbits": 2}
    else:
        assert quanto.reason == "needs optimum-quanto: pip install 'kvmagic[quantized]'"


def test_sliding_window_is_refused_where_it_would_window_full_attention_layers(tiny) -> None:
    reason = resolve(tiny, "sliding_window").reason
    if not capabilities.sliding_window_windows_every_layer():  # 5.x: an alias that follows each layer's type
        assert reason == ""
    else:
        assert "windows every layer with sliding_window" in reason and "full-attention layers" in reason


def test_a_cache_the_installed_transformers_lacks_is_a_note(tiny, monkeypatch) -> None:
    monkeypatch.setattr(capabilities, "cache_implementations", lambda: ("static", "dynamic"))
    reason = resolve(tiny, "offloaded_static").reason
    assert reason == f"transformers {transformers.__version__} has no cache_implementation='offloaded_static'"


@pytest.mark.skipif(ON_GPU, reason="transformers compiles generate on CUDA")
def test_compile_adds_a_static_twin_that_says_why_it_is_not_compiled_on_cpu(tiny) -> None:
    chosen = setups(tiny, parse_list("off,static"), compile=True)
    assert [str(s.strategy) for s in chosen] == ["off", "static", "static+compile"]
    compiled = chosen[-1]
    assert compiled.strategy.compiled and compiled.reason.startswith(
        f"transformers {transformers.__version__} compiles generate only on cuda"
    )
    assert compiled.reason.endswith("not on cpu: not compiled")


@pytest.mark.parametrize(
    ("names", "kwargs", "message"),
    [
        (["off", "dynamic"], {"compile": True}, "compile compiles a static cache: add static to cache"),
        (["off", "quantized:quanto"], {"kv_bits": 3}, "kv_bits 3 is not a width quanto takes: use one of 2, 4"),
        (
            ["off", "static"],
            {"kv_bits": 4},
            "kv_bits is the width of a quanto or hqq cache: add quantized:quanto to cache",
        ),
        (["off", "quantized:fp8"], {"kv_bits": 4}, "kv_bits is the width of a quanto or hqq cache"),
    ],
)
def test_options_that_cannot_apply_say_so(names: list[str], kwargs: dict, message: str) -> None:
    with pytest.raises(KVMagicError, match="^" + message):  # from the request alone: before any model loads
        BenchSpec(cache=names, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"compile": True}, "compile compiles a static cache: add e.g. cache off,static"),
        ({"kv_bits": 4}, "kv_bits is the width of a quantized cache: add e.g. cache off,quantized:quanto"),
        ({"kv_bits": 3}, "kv_bits is the width of a quantized cache: add e.g. cache off,quantized:hqq"),
    ],
)
def test_kv_bits_and_compile_need_cache(tiny, kwargs: dict, message: str) -> None:
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, new_tokens=2, **kwargs)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"predict": True}, "predict compares the cache off against on: drop it, or drop cache"),
        ({"repeat": "auto"}, "repeat auto compares the cache off against on: drop it, or drop cache"),
    ],
)
def test_predict_and_auto_repeat_are_about_off_against_on(tiny, kwargs: dict, message: str) -> None:
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, new_tokens=2, cache="off,dynamic", **kwargs)
    assert str(caught.value) == message


@pytest.fixture(scope="module")
def compared(tiny) -> BenchmarkResult:
    return run_benchmark(
        tiny, PROMPT, new_tokens=[4, 12], warmup_tokens=1, repeat=2,
        cache=f"dynamic,static,{QUANTIZED},offloaded,quantized:hqq",
    )  # fmt: skip


def test_one_row_per_configuration_and_strategy_with_the_reason_for_those_that_cannot_run(compared) -> None:
    frame = compared.to_dataframe()
    names = ["off", "dynamic", "static", QUANTIZED, "offloaded", "quantized:hqq"]
    assert list(frame.columns) == list(STRATEGY_COLUMNS)
    assert list(frame["strategy"]) == names * 2
    assert list(frame["new_tokens"]) == [4] * 6 + [12] * 6
    skipped = compared.skipped
    for _, row in frame.iterrows():
        if row["strategy"] in skipped:
            assert (
                row["note"] == skipped[row["strategy"]] != ""
                and math.isnan(row["seconds"])
                and row["identical"] is None
            )
        else:
            assert row["note"] == "" and row["seconds"] > 0 and row["peak_mib"] > 0
            assert not row["tok_s"] <= 0  # NaN where the median run did not outlast its first token (noise)
    if not ON_GPU:
        assert "offloaded" in skipped


def test_every_runnable_strategy_is_timed_interleaved_against_off(compared) -> None:
    runnable = [n for n in compared.strategies if n not in compared.skipped]
    for config in compared.configs:
        found = {m.strategy: m for m in compared.measurements if m.config == config}
        assert list(found) == runnable and all(len(m.seconds) == 2 for m in found.values())
        rows = {r["strategy"]: r for r in table_rows(compared) if Config.of(r) == config}  # by name, as tables name it
        assert rows["off"]["speedup"] == 1.0 and rows["off"]["kv_cache_mib"] == 0
        for strategy in runnable:  # two runs each: the median is their mean
            row = rows[str(strategy)]
            assert row["seconds"] == pytest.approx(sum(found[strategy].seconds) / 2)
            assert row["speedup"] == pytest.approx(sum(found[OFF].seconds) / sum(found[strategy].seconds))


def test_exact_caches_match_off_and_a_quantized_cache_is_smaller(compared) -> None:
    for config in compared.configs:
        found = {str(m.strategy): m for m in compared.measurements if m.config == config}
        rows = {r["strategy"]: r for r in table_rows(compared) if Config.of(r) == config}
        assert rows["dynamic"]["identical"] and rows["static"]["identical"]  # float32 on CPU: exact
        assert 0 < rows[QUANTIZED]["kv_cache_mib"] < rows["dynamic"]["kv_cache_mib"]
        quantized = found[QUANTIZED].mismatch
        assert rows[QUANTIZED]["identical"] is (quantized is None)
        if quantized is not None:
            assert rows[QUANTIZED]["first_mismatch"].startswith(f"{quantized.position}: ")
            assert quantized.run in (0, 1)  # which of its two timed runs


def test_a_strategy_table_survives_json(compared) -> None:
    again = BenchmarkResult.from_json(compared.to_json())
    assert again.to_dataframe().equals(compared.to_dataframe())
    assert [m.mismatch for m in again.measurements] == [m.mismatch for m in compared.measurements]


def test_without_cache_the_table_is_the_two_condition_one(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=1)
    assert list(result.to_dataframe().columns) == list(COLUMNS)
    assert [m.strategy for m in result.measurements] == [OFF, DYNAMIC]


def test_first_use_costs_land_in_a_warm_up_even_with_w_0(tiny, monkeypatch) -> None:
    calls: list[tuple[object, int]] = []
    real = rounds.timed_generate

    def recording(model, inputs, config, devices, **kwargs):
        calls.append((config.cache_implementation, config.max_new_tokens))
        return real(model, inputs, config, devices, **kwargs)

    monkeypatch.setattr(rounds, "timed_generate", recording)
    run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0, cache=f"static,{QUANTIZED}")
    # Each strategy's first call is one untimed token; then two tokens of each cached strategy project its steps
    # against the budget; only then come the timed runs, interleaved, and last three rounds of one token each for
    # the time to first token.
    firsts = [(None, 1), ("static", 1), ("quantized", 1)]
    probes = [("static", 2), ("quantized", 2)]
    assert calls == [*firsts, *probes, (None, 3), ("static", 3), ("quantized", 3), *firsts * 3]


def test_a_strategy_that_fails_becomes_a_note_and_the_model_stays_usable(tiny, monkeypatch) -> None:
    before = snapshot(tiny.model)
    broken = Setup(
        parse_list("static")[0],
        {"use_cache": True, "cache_implementation": "quantized", "cache_config": {"backend": "nope"}},
    )
    monkeypatch.setattr(plan, "setups", lambda loaded, names, **kwargs: [resolve(loaded, "off"), broken])
    result = run_benchmark(tiny, PROMPT, new_tokens=2, cache="static")
    row = result.to_dataframe().iloc[1]
    assert row["strategy"] == "static" and row["note"].startswith("failed: ") and "nope" in row["note"]
    assert [m.strategy for m in result.measurements] == [OFF]
    assert snapshot(tiny.model) == before


def test_a_comparison_of_strategies_plots_and_compares_as_the_plain_run_does(shell, tmp_path) -> None:
    """--plot and --compare work on strategy rows: a line and a change per strategy."""
    saved = tmp_path / "base.json"
    shell.run_cell_magic("kvbench", f"-n 2,3 -w 0 -r 2 --cache off,dynamic,static -q --save {saved}", PROMPT)
    comparison = shell.run_cell_magic("kvbench", f"-n 2,3 -w 0 -r 2 --cache off,dynamic,static -o --compare {saved}",
                                      PROMPT)  # fmt: skip
    frame = comparison.to_dataframe()
    assert frame["strategy"].tolist() == ["off", "dynamic", "static"] * 2
    assert frame["speedup_was"].isna().tolist() == [True, False, False] * 2  # off is the reference itself
    figure = comparison.result.plot()
    speedups = {line.get_label() for line in figure.axes[1].get_lines() if not line.get_label().startswith("_")}
    assert speedups == {"dynamic speed-up", "static speed-up"}


def test_the_magic_returns_the_strategy_table(shell) -> None:
    frame = shell.run_cell_magic("kvbench", "-n 2 -w 1 --cache dynamic -q -v found", PROMPT)
    assert frame is None  # -q
    result = shell.user_ns["found"]
    assert result.strategies == [OFF, DYNAMIC]
    assert list(result.to_dataframe()["strategy"]) == ["off", "dynamic"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("-n 2 --kv-bits 4", "--kv-bits is the width of a quantized cache: add e.g. --cache off,quantized:quanto"),
        ("-n 2 --cache off,dynamc", "unknown cache strategy 'dynamc'"),
        ("-n 2 --kv-bits 3", "--kv-bits is the width of a quantized cache: add e.g. --cache off,quantized:hqq"),
        ("-n 2 --cache off", "--cache off alone compares nothing: add a strategy to set against it, e.g. off,dynamic"),
    ],
)
def test_the_magic_turns_strategy_mistakes_into_one_line(shell, line: str, message: str) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="^" + message):
        shell.run_cell_magic("kvbench", line, PROMPT)


@pytest.mark.skipif(
    not importlib.util.find_spec("optimum.quanto") is not None, reason="needs optimum-quanto (the test extra)"
)
def test_quantos_packed_tensors_are_counted_through_their_parts(tiny) -> None:
    from kvmagic.measure.memory import cache_nbytes, kv_sizes
    from kvmagic.measure.strategies import strategy_config
    from kvmagic.measure.timing import profiled_generate
    from kvmagic.runner.prompt import encode_prompt

    inputs = encode_prompt(tiny, PROMPT)
    prompt_tokens = inputs["input_ids"].shape[-1]
    config = strategy_config(tiny, 12, resolve(tiny, "quantized:quanto", kv_bits=2))
    cache = profiled_generate(tiny.model, inputs, config, tiny.devices).cache
    # Full-precision leftovers (the residual of recent tokens) are only part of what the cache holds.
    residual = sum(t.nbytes for layer in cache.layers for t in (layer.keys, layer.values) if t is not None)
    counted = cache_nbytes(cache)
    assert residual < counted < kv_sizes(tiny.model.config, torch.float32).after(prompt_tokens, 12)
