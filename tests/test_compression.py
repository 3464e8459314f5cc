"""Press strategies without kvpress: the name grammar, the reasons a row gives where kvpress cannot run, and
what a press row promises and notes, against hand numbers. kvpress itself is exercised in test_press.py."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import math
import re
import types
from contextlib import contextmanager

import pytest

from kvmagic import run_benchmark
from kvmagic.addons.frontier.cache_layout import kv_bytes, layout
from kvmagic.addons.limits.bounds import Limits, StrategyLimit
from kvmagic.addons.limits.limits_table import Bounds
from kvmagic.core.compression import PressName, expand_presses
from kvmagic.core.kvbytes import KVSizes, SlidingKeep
from kvmagic.core.quality import Quality
from kvmagic.core.spec import BenchSpec
from kvmagic.core.strategy import parse, parse_list
from kvmagic.errors import KVMagicError
from kvmagic.measure import capabilities, press
from kvmagic.measure.strategies import checked, resolve
from kvmagic.results.records import Mismatch, RunFacts
from kvmagic.results.result import BenchmarkResult
from kvmagic.results.rows import MIB
from kvmagic.results.shown import WIDTH

from .conftest import PROMPT
from .records import table_row, timed
from .shapes import SHAPE

MISSING = "needs kvpress: pip install 'kvmagic[press]'"
NO_PREFILL = (
    "kvpress compresses only at a prefill, and the rest of a prompt after a reused prefix is not one: its cache "
    "would stay whole"
)


@pytest.fixture
def without_kvpress(monkeypatch):
    """The probe as it answers where kvpress is not installed (its spec not found)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "kvpress" else real(name, *a))
    capabilities.press_reason.cache_clear()
    yield
    capabilities.press_reason.cache_clear()


def parse_names(text: str) -> list[str]:
    return [str(s) for s in checked(parse_list(text))]


def test_a_sweep_of_ratios_is_one_strategy_per_ratio() -> None:
    assert parse_names("dynamic,press:snapkv:0.25-0.75+0.25") == [
        "off", "dynamic", "press:snapkv:0.25", "press:snapkv:0.5", "press:snapkv:0.75",
    ]  # fmt: skip
    assert [p.ratio for p in expand_presses("press:knorm:0.1-0.3+0.1")] == [0.1, 0.2, 0.3]  # no 0.30000000000000004
    assert [p.ratio for p in expand_presses("press:knorm:0.2-0.5+0.2")] == [0.2, 0.4]  # runs while <= the end
    assert [p.ratio for p in expand_presses("press:knorm:0.25-0.25+0.1")] == [0.25]  # an end at its start: one
    hundred = [p.ratio for p in expand_presses("press:knorm:0-0.99+0.01")]
    assert len(hundred) == 100 and hundred[-1] == 0.99  # as many as a sweep may have
    with pytest.raises(KVMagicError, match=r"names press:knorm:0\.5 twice"):  # one spelling per ratio
        parse_names("press:knorm:0.50,press:knorm:.5")
    assert parse("dynamic").press is None and parse("press:tova:0").press == PressName("tova", 0.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("press", "'press' needs a method and a ratio: write press:METHOD:RATIO"),
        ("press:snapkv", "'press:snapkv' needs a compression ratio: write press:snapkv:RATIO"),
        ("press:snapkv:1", "the ratio 1 in 'press:snapkv:1' is not a share to drop: use 0 to below 1"),
        ("press:snapkv:half", "cannot read the ratio 'half' in 'press:snapkv:half': write press:METHOD:RATIO"),
        ("press:snapkv:0.75-0.25+0.25", "end below their start: write the smaller ratio first"),
        ("press:snapkv:0.25-0.75+0", "never grow: add a step above 0"),
        ("press:snapkv:0-0.99+0.001", "gives more than 100 ratios: use a coarser step"),
    ],
)
def test_a_malformed_press_name_says_how_to_write_one(text: str, message: str) -> None:
    with pytest.raises(KVMagicError, match=re.escape(message)) as caught:
        parse_names(text)
    assert "\n" not in str(caught.value)


def test_a_press_of_a_single_ratio_is_asked_for_by_name() -> None:
    with pytest.raises(KVMagicError, match=re.escape("name one ratio, e.g. press:knorm:0.25")):
        parse("press:knorm:0.25-0.5+0.25")


def test_without_kvpress_the_probe_names_the_extra(tiny, without_kvpress) -> None:
    assert capabilities.press_reason() == MISSING
    assert parse_names("press:no_such_method:0.5") == ["off", "press:no_such_method:0.5"]  # cannot be listed here
    assert resolve(tiny, "press:snapkv:0.5").reason == MISSING
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, cache="off,dynamic,press:snapkv:0.5")
    row = result.to_dataframe().set_index("strategy").loc["press:snapkv:0.5"]
    assert row["note"] == MISSING and math.isnan(row["seconds"])
    with pytest.raises(
        KVMagicError, match=f"^nothing to set against off here: press:snapkv:0.5 {re.escape(MISSING)}; "
    ):
        run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, cache="off,press:snapkv:0.5")  # nothing to show


def test_a_kvpress_that_fails_under_this_transformers_says_what_it_asks_for(tiny, monkeypatch) -> None:
    """As kvpress 0.5.5 under transformers 5.24: it imports, then its hook reads an argument renamed since."""
    real_spec, real_version = importlib.util.find_spec, importlib.metadata.version
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: types.SimpleNamespace() if name == "kvpress"
                        else real_spec(name, *a))  # fmt: skip
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "0.5.5" if name == "kvpress" else real_version(name)
    )
    monkeypatch.setattr(importlib.metadata, "requires", lambda name: ["numpy>=2", "transformers<5.3,>=4.56.0"])

    def renamed() -> int:
        raise KeyError("past_key_values")

    monkeypatch.setattr(capabilities, "_pressed_positions", renamed)
    capabilities.press_reason.cache_clear()
    try:
        expected = (
            f"kvpress 0.5.5 does not work with transformers {capabilities.transformers_version()} (KeyError: "
            "'past_key_values'); it asks for transformers<5.3,>=4.56.0: pip install 'kvmagic[press]'"
        )
        assert capabilities.press_reason() == expected
        assert resolve(tiny, "press:knorm:0.25").reason == expected
        monkeypatch.setattr(capabilities, "_pressed_positions", lambda: 4)  # ran, and kept every position
        capabilities.press_reason.cache_clear()
        assert "(it kept 4 of 4 positions where it should keep 2)" in capabilities.press_reason()
    finally:
        capabilities.press_reason.cache_clear()


def test_a_model_kvpress_cannot_hook_says_what_it_needs() -> None:
    flat = types.SimpleNamespace(model=types.SimpleNamespace(layers=[types.SimpleNamespace(mlp=None)]))
    assert press._model_reason(flat) == (
        "kvpress cannot hook SimpleNamespace: it needs model.model.layers[i].self_attn (with layer_idx) and "
        "model.model.rotary_emb"
    )
    attention = types.SimpleNamespace(self_attn=types.SimpleNamespace(layer_idx=0))
    hooked = types.SimpleNamespace(model=types.SimpleNamespace(layers=[attention], rotary_emb=None))
    assert press._model_reason(hooked) == ""


@pytest.mark.parametrize(
    ("cls", "method"),
    [("SnapKVPress", "snapkv"), ("StreamingLLMPress", "streaming_llm"), ("KnormPress", "knorm"), ("ThinKPress", "think"),
     ("ExpectedAttentionPress", "expected_attention"), ("CriticalAdaKVPress", "critical_adakv"), ("KVzipPress", "kvzip"),
     ("TOVAPress", "tova"), ("QFilterPress", "qfilter"), ("EntropyGatedChunkKVPress", "entropy_gated_chunkkv")],
)  # fmt: skip
def test_a_method_is_named_from_its_class(cls: str, method: str) -> None:
    assert press.method_name(cls) == method


def test_a_press_row_sets_its_promise_beside_what_it_held() -> None:
    """P = 100, N = 4, 16 bytes a position: the ratio 0.25 keeps int(100 x 0.75) = 75 prompt positions + 3 new."""
    config, position = (100, 4, 1), KVSizes(16, (None,))
    held = timed(config, "press:knorm:0.25", [0.1], kv_bytes=78 * 16)
    row = table_row(held, sizes=position)  # the full cache's 103 x 16 bytes, as predicted
    assert row["kv_promised_mib"] == 78 * 16 / MIB and row["kv_cache_mib"] == 78 * 16 / MIB and row["note"] == ""
    dynamic = timed(config, "dynamic", [0.1], kv_bytes=103 * 16)
    assert math.isnan(table_row(dynamic, sizes=position)["kv_promised_mib"])


def test_a_press_on_a_sliding_model_promises_each_layer_its_own_positions() -> None:
    """The same press with a layer of window 8 beside a full one, kept as transformers 5 keeps it: the sliding
    layer holds min(77, 7) + 1 = 8 of the 78 promised positions, plus its window as 8 bytes."""
    sizes = KVSizes(16, (8, None), SlidingKeep(windowed=True, kept=-1, view=True, fixed_bytes=8))
    held = timed((100, 4, 1), "press:knorm:0.25", [0.1], kv_bytes=(8 + 78) * 16 + 8)
    assert sizes.after(*held.config) == (8 + 103) * 16 + 8  # the full cache the row is held against
    row = table_row(held, sizes=sizes)
    assert row["kv_promised_mib"] == row["kv_cache_mib"] == ((8 + 78) * 16 + 8) / MIB
    assert row["cache_tokens"] == 78 and row["note"] == ""


def test_a_press_that_held_the_full_cache_is_said_to_mask() -> None:
    config, position, full = (100, 4, 2), KVSizes(16, (None,)), 2 * 103 * 16
    masked = timed(config, "press:lukv:0.5", [0.1], kv_bytes=full)
    assert position.after(*config) == full
    row = table_row(masked, sizes=position, remark="kvpress has not tested X")
    assert row["kv_promised_mib"] == 2 * 16 * (50 + 3) / MIB
    assert row["note"] == (
        f"kvpress has not tested X; holds {full / MIB:.4g} MiB, no less than the full cache: lukv masks the "
        "positions it drops (attention skips them) instead of freeing them"
    )
    nothing_dropped = timed(config, "press:lukv:0", [0.1], kv_bytes=full)
    row = table_row(nothing_dropped, sizes=position)
    assert row["note"] == f"lukv at ratio 0 drops none of the {config[0]} prompt tokens: its cache is the full one"


def test_the_frontier_counts_a_press_whole_at_the_prefill_and_cut_after() -> None:
    """SHAPE: 16 bytes a position and layer; its second layer holds a window of 3. P = 10, N = 3."""
    pruned, whole = layout("press:knorm:0.5", pruned=0.5), layout("press:knorm:0.5")
    assert pruned.kind == whole.kind == "dynamic"
    assert kv_bytes(SHAPE, pruned, 10, prompt_tokens=10) == (10 + 3) * 16  # the prefill: every prompt position
    assert kv_bytes(SHAPE, pruned, 12, prompt_tokens=10) == (7 + 3) * 16  # 5 kept + 2 new; the window holds 3
    assert kv_bytes(SHAPE, whole, 12, prompt_tokens=10) == (12 + 3) * 16  # masked: counted whole


def test_a_press_has_no_bound_of_a_full_cache() -> None:
    bound = StrategyLimit(0.2, 0.025, 0.2, 0.05, "memory", 2)  # 1 token in 0.1 s: 10 tok/s
    names = ["off", "dynamic", "press:knorm:0.5"]
    rows = [timed((8, 2, 1), name, [0.1]) for name in names]
    result = BenchmarkResult("m", rows, spec=BenchSpec(cache=tuple(names)), strategies=names,
                             addons={"limits": Bounds(None, (Limits(8, 2, 1, bound, bound, None, 0.5),))})  # fmt: skip
    frame = result.to_dataframe().set_index("strategy")
    assert frame.loc["press:knorm:0.5", ["limit_tok_s", "of_limit"]].isna().all()
    assert frame.loc["dynamic", "of_limit"] == bound.reached(0.1)


def test_remarks_survive_a_file() -> None:
    result = BenchmarkResult("m", [timed((8, 2, 1), "off", [0.1])], remarks={"press:knorm:0.5": "kvpress has not"})
    again = BenchmarkResult.from_json(result.to_json()).remarks
    assert again == {parse("press:knorm:0.5"): "kvpress has not"} and again["press:knorm:0.5"] == "kvpress has not"


def test_a_press_promise_is_data_beside_its_bytes_and_the_short_table_keeps_to_100_columns() -> None:
    """P = 8, N = 2, 1 KiB a position: knorm at 0.5 keeps 4 + 1 positions of the dynamic cache's 9."""
    names = ["off", "dynamic", "press:knorm:0.5"]
    held = {"off": 0, "dynamic": 9 * 1024, "press:knorm:0.5": 5 * 1024}
    rows = [timed((8, 2, 1), name, [0.2 if name == "off" else 0.1], kv_bytes=held[name]) for name in names]
    facts = RunFacts(kv_sizes=KVSizes(1024, (None,)))
    result = BenchmarkResult("m", rows, spec=BenchSpec(cache=tuple(names)), strategies=names, facts=facts)
    frame = result.to_dataframe().set_index("strategy")
    assert frame.loc["press:knorm:0.5", ["kv_cache_mib", "kv_promised_mib"]].tolist() == [5 / 1024, 5 / 1024]
    assert frame.loc["press:knorm:0.5", "cache_tokens"] == 5 and frame.loc["press:knorm:0.5", "note"] == ""
    assert max(map(len, str(result).splitlines())) <= WIDTH


def test_a_press_gets_a_warm_twin_that_says_why_it_cannot_run(tiny, monkeypatch) -> None:
    """With kvpress's probe faked to pass and its press to a context that counts its entries: the press runs cold,
    its twin does not (a reused prefix leaves no prefill to compress), the full cache's twin runs."""
    entered = []

    @contextmanager
    def counted(model):
        entered.append(model)
        yield

    monkeypatch.setattr(capabilities, "press_reason", lambda: "")
    monkeypatch.setattr(press, "methods", lambda: {"snapkv": object})
    monkeypatch.setattr(press, "plan_press", lambda model, name: press.PressPlan(around=counted))
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, prefix=4, cache="dynamic,press:snapkv:0.5",
                           quality=False)  # fmt: skip
    assert result.strategies == list(parse_list("off,dynamic,press:snapkv:0.5,dynamic+prefix,press:snapkv:0.5+prefix"))
    assert result.skipped == {parse("press:snapkv:0.5+prefix"): NO_PREFILL}
    assert [m.strategy for m in result.measurements] == list(parse_list("off,dynamic,press:snapkv:0.5,dynamic+prefix"))
    assert entered and all(model is tiny.model for model in entered)
    row = result.to_dataframe().set_index("strategy").loc["press:snapkv:0.5+prefix"]
    assert row["note"] == NO_PREFILL and math.isnan(row["seconds"])
    assert f"] {NO_PREFILL[:60]}" in str(result) and max(map(len, str(result).splitlines())) <= WIDTH


def test_without_kvpress_a_press_twin_still_says_a_prefix_is_never_compressed(tiny, without_kvpress) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, prefix=4, cache="dynamic,press:knorm:0.5",
                           quality=False)  # fmt: skip
    assert result.skipped == {parse("press:knorm:0.5"): MISSING, parse("press:knorm:0.5+prefix"): NO_PREFILL}


def test_quality_keeps_its_column_beside_long_press_names_and_their_footnotes() -> None:
    """Names as long as streaming_llm's, a mismatch and a remark on every press row: the least needed columns go,
    identical (each differing row keeps its footnote) first; beside the trade-off frontier's marks (four strategies),
    the agreement goes before the bytes and the KL the marks are drawn from."""
    names = ["off", "dynamic", "press:streaming_llm:0.25", "press:streaming_llm:0.5"]
    flip = Mismatch(run=0, position=1, expected_id=58, actual_id=153, expected_token="2", actual_token="x")
    rows = [
        timed((68, 8, 1), name, [0.05 if name == "off" else 0.03], kv_bytes=1024 * (0 if name == "off" else 75 - i),
              ttft_s=0.01, quality=Quality(8, 1.0, 0.0267 * max(i - 1, 0), 1.0),
              **({"mismatch": flip} if name.startswith("press") else {}))
        for i, name in enumerate(names)
    ]  # fmt: skip
    remarks = dict.fromkeys(names[2:], "kvpress has not tested Exaone4ForCausalLM (only Llama, Mistral, Phi3)")
    result = BenchmarkResult("m", rows, spec=BenchSpec(cache=tuple(names)), strategies=names, remarks=remarks)
    # Every row is on the trade-off frontier, so the marks separate nothing and are not shown: the lossy order.
    assert result.to_dataframe()["pareto"].tolist() == [True] * 4
    assert str(result).splitlines()[0].split() == [
        "prompt_tokens", "new_tokens", "strategy", "seconds", "speedup", "top1_agreement", "kl_nats", "note",
    ]  # fmt: skip
    # The 0.5 press holding as much as the 0.25 one (within 1%), at a higher KL, leaves the frontier: marks shown.
    result.measurements[3] = dataclasses.replace(result.measurements[3], kv_bytes=1024 * 73 + 512)
    lines = str(result).splitlines()
    assert result.to_dataframe()["pareto"].tolist() == [True, True, True, False]
    assert lines[0].split() == [
        "prompt_tokens", "new_tokens", "strategy", "tok_s", "speedup", "kl_nats", "kv_cache_mib", "pareto", "note",
    ]  # fmt: skip
    assert lines[3].split()[-5:] == ["0.0267", "0.07129", "True", "[1]", "[2]"]
    assert "[1] differs from off at position 1: '2' (id 58) vs 'x' (id 153)" in lines
    assert max(map(len, lines)) <= WIDTH
    result.remarks = {}
    result.measurements = [dataclasses.replace(m, mismatch=None) for m in result.measurements]
    header = str(result).splitlines()[0].split()  # no footnotes, no note column: room for the agreement again
    assert header[-4:] == ["top1_agreement", "kl_nats", "kv_cache_mib", "pareto"], header
    assert max(map(len, str(result).splitlines())) <= WIDTH
