"""kvpress's methods as strategies, run for real: the bytes they hold, every generate under the press (the
teacher-forced one that reads quality too), the trade-off plot's curves, a masking method's note, and --frontier
and --limits beside press rows.

They need the ``press`` extra (``pip install 'kvmagic[press]'``) and skip without it, except where
``KVMAGIC_PRESS=required`` (the CI leg that installs it): there a kvpress that is missing or does not work
fails them. The model is SmolLM2-135M's published shape (a LlamaForCausalLM, which kvpress tests) cut to
two layers, with random weights: what a press keeps does not depend on what the weights learnt.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter

import pytest

from kvmagic import load_model, run_benchmark
from kvmagic.addons.frontier.frontier_probe import check_fit
from kvmagic.addons.random_weights.random_build import shipped_config
from kvmagic.core.strategy import parse_list
from kvmagic.errors import KVMagicError
from kvmagic.frontends.cli import main
from kvmagic.measure import capabilities, press
from kvmagic.measure.strategies import checked, resolve
from kvmagic.runner import judge as judge_module

SMOL = "HuggingFaceTB/SmolLM2-135M"
PROMPT = "The KV cache stores each token's keys and values so that later steps need not compute them again. " * 2
METHODS = ("snapkv", "streaming_llm", "knorm")
RATIOS = (0.25, 0.5)


@pytest.fixture(scope="module", autouse=True)
def _kvpress() -> None:
    reason = capabilities.press_reason()
    if reason and os.environ.get("KVMAGIC_PRESS") == "required":
        pytest.fail(f"KVMAGIC_PRESS=required, but kvpress cannot run here: {reason}")
    if reason:
        pytest.skip(f"the press extra: {reason}")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """SmolLM2-135M's shape at two layers, random weights, tiny's tokenizer beside it."""
    from transformers import AutoTokenizer

    from kvmagic.model.tiny import tiny_dir

    folder = tmp_path_factory.mktemp("smol-2-layers")
    config = shipped_config(SMOL)
    assert config is not None
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 2}))
    AutoTokenizer.from_pretrained(tiny_dir()).save_pretrained(folder)
    return load_model(str(folder), random_weights=True, device_map="cpu")


def test_each_method_holds_the_share_of_the_prompt_its_ratio_keeps(llama) -> None:
    names = [f"press:{method}:{ratio:g}" for method in METHODS for ratio in RATIOS]
    result = run_benchmark(llama, PROMPT, new_tokens=4, warmup_tokens=0, cache=["dynamic", *names])
    rows = result.to_dataframe().set_index("strategy")
    prompt, new = result.config.prompt_tokens, 4
    assert result.facts.kv_sizes is not None
    position = result.facts.kv_sizes.held_bytes(1)
    assert rows.loc["dynamic", "kv_cache_mib"] * 2**20 == position * (prompt + new - 1)
    for name in names:
        ratio = float(name.rsplit(":", 1)[1])
        held = rows.loc[name, "kv_cache_mib"] * 2**20
        assert held == rows.loc[name, "kv_promised_mib"] * 2**20 == position * (int(prompt * (1 - ratio)) + new - 1)
        assert abs(held / position - (new - 1) - (1 - ratio) * prompt) < 1  # the prompt's part, cut by the ratio
        assert rows.loc[name, "note"] == ""  # a model kvpress tests, a method that frees what it drops


def test_every_generate_of_a_press_strategy_runs_under_the_press(llama, monkeypatch) -> None:
    """Warm-up, the budget's two-token runs, timed runs, time to first token, the hooked run, the teacher-forced
    run that reads quality and the frontier's check: each cached generate of the press finds kvpress's hooks on
    the model, each uncached one none; the one unhooked cached run is the full cache's, which quality is read
    against."""
    model, calls = llama.model, Counter()
    real = model.generate

    def recording(*args, **kwargs):
        hooked = any(layer.self_attn._forward_hooks for layer in model.model.layers)
        calls[(kwargs["generation_config"].use_cache, hooked)] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "generate", recording)
    run_benchmark(llama, PROMPT, new_tokens=3, warmup_tokens=1, repeat=2, steps=True, max_seconds=60,
                  cache="off,press:knorm:0.5")  # fmt: skip
    # 1 warm-up + 2 timed + 3 first token + 1 hooked + 1 forced for each strategy, and for the press a two-token run
    # before its first timed one: its one-token warm-up says nothing of its cached steps, which the deadline needs
    assert calls == {(False, False): 8, (True, True): 9, (True, False): 1}
    strategy = resolve(llama, "press:knorm:0.5")
    ids = llama.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    check_fit(llama, strategy, ids, 3, budget_bytes=1e12, predicted_bytes=1.0)
    assert calls[(True, True)] == 11 and calls[(True, False)] == 1  # its first-use run and the check itself
    assert not any(layer.self_attn._forward_hooks for layer in model.model.layers)  # and none left behind


def test_a_press_is_judged_with_its_compression_and_the_full_cache_stays_exact(llama, monkeypatch) -> None:
    """The teacher-forced runs that read quality go through each strategy's context too: snapkv's run is hooked
    and its logits move off the full cache's, the full cache's own run is not hooked and scores exactly 1/0/1."""
    model, forced = llama.model, Counter()
    real = judge_module.forced_logits

    def recording(*args, **kwargs):
        hooked = any(layer.self_attn._forward_hooks for layer in model.model.layers)
        forced[(args[2].use_cache, hooked)] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(judge_module, "forced_logits", recording)
    result = run_benchmark(llama, PROMPT, new_tokens=6, warmup_tokens=0, cache="dynamic,press:snapkv:0.5")
    assert forced == {(False, False): 1, (True, False): 1, (True, True): 1}  # off, dynamic, the press
    judged = {str(m.strategy): m.quality for m in result.measurements}
    full, pressed = judged["dynamic"], judged["press:snapkv:0.5"]
    assert full is not None and (full.top1_agreement, full.kl_nats, full.ppl_ratio) == (1.0, 0.0, 1.0)
    assert pressed is not None and pressed.steps == 6 and pressed.kl_nats > 0 and pressed.ppl_ratio != 1.0
    rows = result.to_dataframe().set_index("strategy")
    assert rows.loc["press:snapkv:0.5", "kl_nats"] == pressed.kl_nats > 0


def test_the_trade_off_plot_draws_a_curve_per_press_method_over_its_ratios(llama) -> None:
    cache = "dynamic,press:snapkv:0.25-0.75+0.25,press:knorm:0.25-0.5+0.25"
    result = run_benchmark(llama, PROMPT, new_tokens=4, warmup_tokens=0, cache=cache)
    memory = result.plot().axes[2]  # the second row's first panel: KL against the KV bytes held
    lines = {line.get_label(): line for line in memory.get_lines() if not line.get_label().startswith("_")}
    assert len(lines.pop("trade-off frontier (pareto)").get_xdata())  # the rings round the frontier's points
    assert set(lines) == {"full cache (dynamic)", "press:snapkv", "press:knorm"}  # off holds no cache to trade
    rows = result.to_dataframe().set_index("strategy")
    for method, ratios in (("snapkv", (0.25, 0.5, 0.75)), ("knorm", (0.25, 0.5))):
        names = [f"press:{method}:{ratio:g}" for ratio in ratios]
        held = sorted(rows.loc[names, "kv_cache_mib"])  # a higher ratio holds less: the curve runs by the bytes
        assert list(lines[f"press:{method}"].get_xdata()) == held
        by_bytes = sorted(names, key=lambda name: rows.loc[name, "kv_cache_mib"])
        assert list(lines[f"press:{method}"].get_ydata()) == [rows.loc[name, "kl_nats"] for name in by_bytes]
    assert sorted(text.get_text() for text in memory.texts) == ["0.25", "0.25", "0.5", "0.5", "0.75"]


def test_a_method_that_masks_positions_gets_its_note(llama, monkeypatch) -> None:
    """AdaKV (kvpress's head-wise budget) over Knorm, built from a ratio: it hides positions from attention
    and keeps them in the cache."""
    from kvpress import AdaKVPress, KnormPress

    class AdaKnormPress(AdaKVPress):
        def __init__(self, compression_ratio: float = 0.0) -> None:
            super().__init__(press=KnormPress(compression_ratio=compression_ratio))

    known = dict(press.methods())
    monkeypatch.setattr(press, "methods", lambda: {**known, "ada_knorm": AdaKnormPress})
    result = run_benchmark(llama, PROMPT, new_tokens=3, warmup_tokens=0, cache="dynamic,press:ada_knorm:0.5")
    rows = result.to_dataframe().set_index("strategy")
    assert rows.loc["press:ada_knorm:0.5", "kv_cache_mib"] == rows.loc["dynamic", "kv_cache_mib"]
    assert rows.loc["press:ada_knorm:0.5", "note"].startswith("holds ")
    assert rows.loc["press:ada_knorm:0.5", "note"].endswith(
        "no less than the full cache: ada_knorm masks the positions it drops (attention skips them) instead of "
        "freeing them"
    )
    assert resolve(llama, "press:ada_knorm:0.5").pruned == 0.0 and resolve(llama, "press:knorm:0.5").pruned == 0.5


def test_on_a_model_kvpress_has_not_tested_it_runs_with_a_note(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, cache="dynamic,press:knorm:0.5")
    row = result.to_dataframe().set_index("strategy").loc["press:knorm:0.5"]
    assert row["note"].startswith("kvpress has not tested Exaone4ForCausalLM (only Llama, Mistral, ")
    assert row["kv_cache_mib"] == row["kv_promised_mib"]
    assert "] kvpress has not tested Exaone4ForCausalLM (only " in str(result)  # a footnote under the table


def test_every_exported_press_builds_from_a_ratio_or_says_why_not() -> None:
    found = press.methods()
    assert len(set(found)) == len(found) > 30
    reasons = {method: press.method_reason(cls) for method, cls in found.items()}
    assert all(reasons[method] == "" for method in METHODS)
    assert reasons["adakv"] == "AdaKVPress wraps another press (press=...): a ratio alone does not build it"
    assert reasons["think"].startswith("ThinKPress takes no compression_ratio (it takes key_channel_compression_ratio")
    assert reasons["kvzip"].startswith("KVzipPress replaces kvpress's context with its own")
    assert all("\n" not in reason for reason in reasons.values())


def test_an_unknown_method_is_refused_by_name_and_a_row_says_so_from_the_api(llama) -> None:
    with pytest.raises(KVMagicError, match=re.escape("no method 'snpkv' in 'press:snpkv:0.5': use one of cap, ")):
        checked(parse_list("dynamic,press:snpkv:0.5"))
    assert resolve(llama, "press:snpkv:0.5").reason.startswith("kvpress has no method 'snpkv'")


@pytest.mark.parametrize("flag", ["--frontier", "--limits"])
def test_frontier_and_limits_run_beside_press_rows(llama, flag, capsys) -> None:
    code = main(["-m", llama.name, "--random-weights", "-n", "2", "-w", "0", "--cache", "dynamic,press:knorm:0.5",
                 "--device-map", "cpu", flag, "tell me"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "press:knorm:0.5" in out.out and "Traceback" not in out.err
