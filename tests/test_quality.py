"""Quality: each strategy's next-token distributions against the full cache's, teacher-forced along one continuation.

The arithmetic is checked against numbers worked out by hand; the runs on tiny check that the full cache
scores exactly 1, 0 and 1, that an exact cache scores as close as rounding allows, that a lossy one does
not, and that every strategy is judged on the same forced tokens, outside the timed runs.
"""

from __future__ import annotations

import math

import pytest
import torch

from kvmagic import BenchmarkResult, run_benchmark
from kvmagic.core.quality import FLOAT_NOISE_NATS, Quality, Step, quality_of
from kvmagic.errors import KVMagicError
from kvmagic.measure import capabilities
from kvmagic.measure.forcing import ForcedTokens, forced_logits, steps_against
from kvmagic.measure.strategies import resolve, strategy_config
from kvmagic.runner import judge as judge_module

from .conftest import PROMPT, raises_usage

LN3 = math.log(3.0)
# The quantized backend each line runs on CPU in the test environment (as tests/test_strategies.py chooses).
LOSSY = "quantized:fp8" if "fp8" in capabilities.quantized_backends() else "quantized:quanto"


def test_one_step_by_hand() -> None:
    # full: p = (1/4, 3/4); strategy: q = (1/2, 1/2); forced token 1.
    # KL(p || q) = 1/4 ln(1/2) + 3/4 ln(3/2) = 0.130812...; nll: -ln(3/4) = 0.287682, ln 2 = 0.693147.
    (step,) = steps_against(torch.tensor([[0.0, LN3]]), torch.tensor([[0.0, 0.0]]), [1])
    assert step.agrees is False  # the strategy's argmax (a tie) is token 0, the full cache's token 1
    assert step.kl_nats == pytest.approx(
        0.25 * math.log(0.5) + 0.75 * math.log(1.5), abs=1e-7
    )  # the inputs are float32
    assert step.kl_nats == pytest.approx(0.130812035, abs=1e-7)
    assert step.full_nll == pytest.approx(0.287682072, abs=1e-7)
    assert step.nll == pytest.approx(0.693147181, abs=1e-7)


def test_two_steps_by_hand_and_their_means() -> None:
    full = torch.tensor([[0.0, LN3], [2.0, 0.0]])
    strategy = torch.tensor([[0.0, 0.0], [2.0, 0.0]])  # the second step is the full cache's exactly
    quality = quality_of(steps_against(full, strategy, [1, 0]))
    assert quality.steps == 2 and quality.top1_agreement == 0.5
    assert quality.kl_nats == pytest.approx(0.130812035 / 2, abs=1e-7)
    # ppl ratio = exp(mean(nll - full nll)) = exp((ln 2 - ln(4/3) + 0) / 2) = sqrt(3/2)
    assert quality.ppl_ratio == pytest.approx(math.sqrt(1.5), abs=1e-7)


def test_equal_logits_score_exactly_one_zero_one() -> None:
    logits = torch.randn(5, 11, generator=torch.Generator().manual_seed(0))
    quality = quality_of(steps_against(logits, logits.clone(), [3, 1, 4, 1, 5]))
    assert (quality.top1_agreement, quality.kl_nats, quality.ppl_ratio) == (1.0, 0.0, 1.0)


def test_a_token_both_rule_out_adds_nothing_and_kl_is_never_negative() -> None:
    full = torch.tensor([[0.0, float("-inf"), LN3]])
    (step,) = steps_against(full, full.clone(), [2])
    assert step.kl_nats == 0.0 and step.full_nll == step.nll
    (near,) = steps_against(full, full + torch.tensor([[1e-7, 0.0, 0.0]]), [2])
    assert near.kl_nats >= 0.0


def test_the_means_by_hand_and_no_steps() -> None:
    steps = [Step(True, 0.2, 1.0, 1.5), Step(False, 0.4, 2.0, 2.5), Step(True, 0.0, 0.5, 0.5)]
    quality = quality_of(steps, along="text")
    # log ratios 0.5, 0.5, 0: mean 1/3, sd sqrt(1/12); t(0.975, 2 df) = 4.302653, so the half-width is
    # 4.302653 x sqrt(1/12) / sqrt(3) = 0.717109 and the interval exp(1/3 -+ 0.717109) = 0.681284, 2.858915.
    ends = pytest.approx((0.681284, 2.858915), abs=1e-6)
    assert quality == Quality(3, 2 / 3, pytest.approx(0.2), pytest.approx(math.exp(1 / 3)), "text", ends)
    empty = quality_of([])
    assert empty.steps == 0 and math.isnan(empty.kl_nats) and math.isnan(empty.ppl_ratio)
    assert quality_of([], along="text").along == "text"  # no steps along a text still says which it was
    assert quality_of(steps[:1]).ppl_interval is None  # one step has no spread to read
    assert quality_of(steps).along == "greedy"  # unless told, the forced tokens are the full cache's own choices


def test_a_step_within_float_noise_counts_as_the_full_caches_own() -> None:
    # KL 1e-12 is float32 rounding: that step agrees, adds no KL and no loss, even with its argmax flipped (a tie).
    noise = [Step(False, 1e-12, 1.0, 1.000001), Step(True, 0.0, 2.0, 2.0)]
    quality = quality_of(noise)
    assert (quality.top1_agreement, quality.kl_nats, quality.ppl_ratio) == (1.0, 0.0, 1.0)
    assert quality.ppl_interval == (1.0, 1.0)
    # Just past FLOAT_NOISE_NATS a step counts whole: mean KL (2e-9 + 0) / 2, ppl ratio exp(0.5 / 2).
    past = quality_of([Step(False, 2 * FLOAT_NOISE_NATS, 1.0, 1.5), Step(True, 0.0, 2.0, 2.0)])
    assert (past.top1_agreement, past.kl_nats, past.ppl_ratio) == (0.5, FLOAT_NOISE_NATS, math.exp(0.25))
    at = quality_of([Step(False, FLOAT_NOISE_NATS, 1.0, 1.5)])  # the bound itself is still noise
    assert (at.top1_agreement, at.kl_nats, at.ppl_ratio) == (1.0, 0.0, 1.0)


def test_forcing_leaves_only_the_forced_token_and_follows_it(tiny) -> None:
    scores = torch.zeros(2, 7)
    forced = ForcedTokens([5, 2], prompt_tokens=3)(torch.zeros(2, 4, dtype=torch.long), scores)
    assert forced.argmax(dim=-1).tolist() == [2, 2] and torch.isinf(forced).sum() == 2 * 6
    inputs = tiny.tokenizer(PROMPT, return_tensors="pt", return_token_type_ids=False)
    config = strategy_config(tiny, 3, resolve(tiny, "dynamic"))
    ids = [41, 42, 43]  # not what tiny would choose
    logits, taken = forced_logits(tiny.model, inputs, config, tiny.devices, ids)
    assert taken == ids and logits.shape == (3, tiny.model.config.vocab_size)
    free, greedy = forced_logits(tiny.model, inputs, config, tiny.devices)
    assert greedy == free.argmax(dim=-1).tolist()  # free-running greedy takes each step's argmax


@pytest.fixture(scope="module")
def judged(tiny) -> BenchmarkResult:
    return run_benchmark(tiny, PROMPT, new_tokens=6, warmup_tokens=0, cache=f"off,dynamic,static,{LOSSY}")


def test_the_full_cache_and_exact_caches_score_exactly_one_zero_one(judged) -> None:
    quality = {str(m.strategy): m.quality for m in judged.measurements}
    full = quality["dynamic"]
    assert full is not None and (full.steps, full.top1_agreement, full.kl_nats, full.ppl_ratio) == (6, 1.0, 0.0, 1.0)
    for name in ("off", "static"):  # the same logits summed in another order: float32 rounding, shown as none
        exact = quality[name]
        assert exact is not None and (exact.top1_agreement, exact.kl_nats, exact.ppl_ratio) == (1.0, 0.0, 1.0)
    lossy = quality[LOSSY]
    assert lossy is not None and lossy.steps == 6 and lossy.kl_nats > 1e-6 and lossy.ppl_ratio != 1.0


def test_the_table_the_notes_and_a_file_keep_the_quality(judged) -> None:
    frame = judged.to_dataframe().set_index("strategy")
    assert frame.loc["dynamic", ["top1_agreement", "kl_nats", "ppl_ratio"]].tolist() == [1.0, 0.0, 1.0]
    assert "kl_nats" in str(judged).splitlines()[0]
    (note,) = [n for n in judged.notes() if n.startswith("quality: against dynamic, teacher-forced along")]
    assert note.endswith("its greedy tokens, 6 steps")
    assert "quality read over only 6 steps: rough figures; a longer -n, or --quality-text, reads more" in judged.notes()
    again = BenchmarkResult.from_json(judged.to_json())
    assert [m.quality for m in again.measurements] == [m.quality for m in judged.measurements]


def test_quality_runs_outside_the_timed_runs_one_per_strategy_on_the_first_sequence(tiny, monkeypatch) -> None:
    calls: list[tuple[int, int | None]] = []
    real = judge_module.forced_logits

    def counted(model, inputs, config, devices, ids=None):  # type: ignore[no-untyped-def]
        calls.append((inputs["input_ids"].shape[0], None if ids is None else len(ids)))
        return real(model, inputs, config, devices, ids)

    monkeypatch.setattr(judge_module, "forced_logits", counted)
    result = run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0, repeat=2, batch=2, cache="off,dynamic,static")
    assert all(len(m.seconds) == 2 for m in result.measurements)  # the timed runs are the rounds' alone
    # the full cache's own run (free), then each other strategy forced along its 3 tokens, one sequence each
    assert calls == [(1, None), (1, 3), (1, 3)]


def test_along_a_given_text(tiny) -> None:
    text = " and so the model reads every earlier token only once."
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, cache=f"dynamic,{LOSSY}", quality_text=text)
    forced = len(tiny.tokenizer(text, add_special_tokens=False)["input_ids"])
    for m in result.measurements:
        assert m.quality is not None and m.quality.steps == forced and m.quality.along == "text"
    full = result.measurement("dynamic").quality
    assert full is not None and (full.top1_agreement, full.kl_nats, full.ppl_ratio) == (1.0, 0.0, 1.0)
    (note,) = [n for n in result.notes() if n.startswith("quality: ")]
    assert f"teacher-forced along the given text, {forced} steps" in note
    assert forced >= 16 and "rough" not in note


def test_no_quality_reads_none_and_the_budget_counts_the_forced_run(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, cache="off,dynamic", quality=False)
    assert all(m.quality is None for m in result.measurements)
    assert result.to_dataframe()["kl_nats"].isna().all()
    from kvmagic.core.spec import BenchSpec

    assert BenchSpec(cache=("off", "dynamic")).rounds == BenchSpec(cache=("off", "dynamic"), quality=False).rounds + 1
    assert BenchSpec().rounds == BenchSpec(quality=False).rounds  # the plain run reads no quality


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"quality_text": "more"}, "quality_text judges cache strategies: add e.g. cache dynamic,quantized:quanto"),
        ({"quality_text": "more", "cache": "dynamic", "quality": False},
         "quality_text needs quality: drop quality_text, or turn quality back on"),
        ({"quality_text": "  ", "cache": "dynamic"}, "quality_text must be a text to judge quality along, got '  '"),
    ],
)  # fmt: skip
def test_the_api_refuses_a_text_it_cannot_judge_along(tiny, kwargs: dict, message: str) -> None:
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, new_tokens=2, **kwargs)
    assert str(caught.value) == message


def test_the_magic_reads_the_text_from_a_file_and_says_when_it_cannot(shell, tmp_path) -> None:
    path = tmp_path / "continuation.txt"
    path.write_text(" and then it reads them back.", encoding="utf-8")
    frame = shell.run_line_magic("kvbench", f'-n 2 -w 0 -q --cache dynamic --quality-text {path} "{PROMPT}"')
    assert frame is None  # -q shows nothing; the result is still made
    frame = shell.run_cell_magic("kvbench", f"-n 2 -w 0 --cache dynamic --quality-text {path}", PROMPT)
    assert frame.set_index("strategy").loc["dynamic", "kl_nats"] == 0.0
    with raises_usage(r"^cannot read the text of --quality-text from '.*missing.txt': No such file or directory$"):
        shell.run_cell_magic("kvbench", f"-n 2 --cache dynamic --quality-text {tmp_path / 'missing.txt'}", PROMPT)
    with raises_usage("^--quality-text judges cache strategies: add e.g. --cache dynamic,quantized:quanto$"):
        shell.run_cell_magic("kvbench", f"-n 2 --quality-text {path}", PROMPT)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n", encoding="utf-8")
    with raises_usage(f"^--quality-text {empty} is empty: give it a file holding the text to judge along$"):
        shell.run_cell_magic("kvbench", f"-n 2 --cache dynamic --quality-text {empty}", PROMPT)
