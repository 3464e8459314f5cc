"""Sweeps on the tiny model: exact prompt lengths, the cross product, the budget, Ctrl-C, the magic's flags."""

from __future__ import annotations

import re

import pytest
from IPython.core.error import UsageError

from kvmagic import KVMagicError, run_benchmark
from kvmagic.core.lengths import LENGTH_FORMS
from kvmagic.results.caution import caution_notes
from kvmagic.results.result import BenchmarkResult
from kvmagic.runner import benchmark
from kvmagic.runner.prompt import encode_prompt, stretch_prompt

from .conftest import PROMPT, raises_usage, said


def _text_ids(tiny) -> list[int]:
    return tiny.tokenizer(PROMPT, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("tokens", [1, 7, 100])
def test_stretch_prompt_gives_exact_counts_of_the_texts_own_tokens(tiny, tokens: int) -> None:
    body = _text_ids(tiny)
    inputs = stretch_prompt(tiny, PROMPT, tokens)
    assert inputs["input_ids"].shape == (1, tokens)
    assert inputs["attention_mask"].sum().item() == tokens
    assert inputs["input_ids"][0].tolist() == (body * (tokens // len(body) + 1))[:tokens]


def test_stretch_prompt_at_the_natural_length_is_the_plain_encoding(tiny) -> None:
    natural = encode_prompt(tiny, PROMPT)["input_ids"]
    assert stretch_prompt(tiny, PROMPT, natural.shape[-1])["input_ids"].tolist() == natural.tolist()


def test_sweep_measures_the_cross_product_at_exact_lengths(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=[2, 3], prompt_tokens="5,9", warmup_tokens=1)
    assert [(c.prompt_tokens, c.new_tokens) for c in result.configs] == [(5, 2), (5, 3), (9, 2), (9, 3)]
    assert list(result.to_dataframe()[["prompt_tokens", "new_tokens"]].itertuples(index=False, name=None)) == [
        (5, 2), (5, 3), (9, 2), (9, 3),
    ]  # fmt: skip
    assert result.identical and not result.partial
    natural = len(_text_ids(tiny))
    stretched = f"prompt stretched: the prompt's {natural} tokens repeated (or cut) to 5, 9 tokens"
    assert result.notes() == [*caution_notes(result), stretched]
    assert result.facts.configurations == 4


def test_a_plain_int_still_gives_one_row(tiny) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0)
    assert len(result.configs) == 1 and result.config.new_tokens == 2
    assert result.notes() == caution_notes(result) and result.facts.estimated_s > 0  # estimated, not probed


def test_prompt_tokens_with_chat_is_refused(tiny) -> None:
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, new_tokens=2, prompt_tokens=8, chat=True)
    assert said(caught.value) == "prompt_tokens sets the plain prompt's length; chat would wrap it: drop one of them"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"new_tokens": []}, "new_tokens needs at least one length"),
        ({"new_tokens": [4, 0]}, "new_tokens must be a whole number >= 1, got 0"),
        ({"prompt_tokens": [2.5]}, "prompt_tokens must be a whole number >= 1, got 2.5"),
        ({"max_seconds": -1}, "max_seconds must be a number of seconds >= 0 (0: no limit), got -1"),
    ],
)
def test_bad_sweep_arguments_are_refused(tiny, kwargs: dict, message: str) -> None:
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, **kwargs)
    assert said(caught.value) == message


def _spy_measure(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = benchmark.measure_rounds

    def spy(*args, **kwargs):
        calls.append(kwargs["new_tokens"])
        return real(*args, **kwargs)

    monkeypatch.setattr(benchmark, "measure_rounds", spy)
    return calls


def test_a_budget_too_short_for_the_warm_up_cuts_it_and_says_so(tiny, monkeypatch) -> None:
    calls = _spy_measure(monkeypatch)
    with pytest.raises(KVMagicError) as caught:
        run_benchmark(tiny, PROMPT, new_tokens=[2, 4], warmup_tokens=1, max_seconds=1e-6)
    assert re.fullmatch(
        r"nothing finished within max_seconds 1e-06 s: [0-9]+\+2 tokens ran past it and was cut; (raise it|"
        r"max_seconds [0-9.e+-]+ should fit it), or lower new_tokens, prompt_tokens or repeat",
        said(caught.value),
    ), said(caught.value)
    assert calls == []
    result = run_benchmark(tiny, PROMPT, new_tokens=[2, 3], warmup_tokens=1, max_seconds=1e6)
    assert calls == [2, 3] and result.facts.estimated_s > 0


def test_the_deadline_counts_the_hooked_round_only_with_steps(tiny, monkeypatch) -> None:
    # one timed round and one hooked round per configuration, against the timed round alone
    made: list[benchmark.Deadline] = []
    real = benchmark.Deadline
    monkeypatch.setattr(benchmark, "Deadline", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    for steps in (True, False):
        run_benchmark(tiny, PROMPT, new_tokens=[2, 3], warmup_tokens=0, max_seconds=1e6, steps=steps)
    assert [deadline.rounds for deadline in made] == [2, 1]


class _InterruptAt:
    """A forward hook that raises KeyboardInterrupt at the n-th forward pass: Ctrl-C inside generate."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def __call__(self, module, args, output) -> None:
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt


def test_interrupted_sweep_returns_finished_rows_and_the_model_stays_usable(tiny) -> None:
    before = run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0)
    # -n 2,3 -r 1, no budget (so no probe): the first configuration takes 2 + 2 timed forward passes and 3 + 3
    # one-token ones (the time to first token); the 12th is inside the second one.
    hook = tiny.model.register_forward_hook(_InterruptAt(12))
    try:
        result = run_benchmark(tiny, PROMPT, new_tokens=[2, 3], warmup_tokens=0, max_seconds=0)
    finally:
        hook.remove()
    assert result.partial
    assert [(m.config.new_tokens, len(m.seconds)) for m in result.measurements] == [(2, 1), (2, 1)]
    assert result.notes()[0] == (
        "partial: interrupted after 1 of 2 configurations; the rows shown are complete, the rest were not measured"
    )
    assert repr(result).endswith("; partial>")
    after = run_benchmark(tiny, PROMPT, new_tokens=3, warmup_tokens=0)
    assert (
        after.measurement("off").generated_ids == before.measurement("off").generated_ids
        and after.identical
        and not after.partial
    )
    assert result.measurements[0].generated_ids == before.measurement("off").generated_ids[:2]


def test_interrupt_before_any_row_gives_an_empty_partial_result(tiny) -> None:
    hook = tiny.model.register_forward_hook(_InterruptAt(1))
    try:
        result = run_benchmark(tiny, PROMPT, new_tokens=[2, 3], warmup_tokens=1)
    finally:
        hook.remove()
    assert result.partial and result.measurements == []
    assert result.to_dataframe().empty


# The magic


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("-n 16-", f"cannot read '16-' as lengths: write {LENGTH_FORMS}"),
        ("-p 64-16*2", "the range '64-16*2' ends below its start: write the smaller length first"),
        ("-n 0,4", "lengths must be >= 1, got 0 in '0,4'"),
    ],
)
def test_magic_refuses_bad_lengths_with_a_usage_error(shell, line: str, message: str) -> None:
    flag = line.split()[0]
    with pytest.raises(UsageError) as caught:
        shell.run_cell_magic("kvbench", line, PROMPT)
    assert said(caught.value) == f"%kvbench: {flag}: {message} (see %kvbench? for the options)"


def test_magic_sweeps_and_saves(shell, tmp_path) -> None:
    path = tmp_path / "sweep.json"
    frame = shell.run_cell_magic("kvbench", f"-n 2,3 -p 6 -w 0 -v sweep --save {path}", PROMPT)
    assert list(frame["new_tokens"]) == [2, 3] and list(frame["prompt_tokens"]) == [6, 6]
    assert BenchmarkResult.read_json(path) == shell.user_ns["sweep"]
    assert "\nprompt stretched: the prompt's" in repr(frame)  # the note, under the table


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("sweep.txt", "cannot tell a format from the name 'sweep.txt': end it with .csv, .json, .md or .html"),
        ("no-such-folder/sweep.json",
         "cannot write 'no-such-folder/sweep.json': there is no folder 'no-such-folder'; create it or name another"),
        ("here.json", "cannot write 'here.json': it is a folder; name a file in it, e.g. 'here.json/run.json'"),
    ],
)  # fmt: skip
def test_magic_refuses_a_save_name_before_measuring(shell, monkeypatch, tmp_path, name, message) -> None:
    """A long run must not end in a name that cannot be written: the table would be lost with it."""
    (tmp_path / "here.json").mkdir()
    monkeypatch.chdir(tmp_path)
    calls = _spy_measure(monkeypatch)
    with pytest.raises(UsageError) as caught:
        shell.run_cell_magic("kvbench", f"-n 2 --save {name}", PROMPT)
    assert said(caught.value) == message
    assert calls == []


def test_magic_budget_uses_the_flag_then_the_trait(shell, monkeypatch) -> None:
    calls = _spy_measure(monkeypatch)
    with raises_usage(match=r"^nothing finished within --max-seconds 1e-06 s: .* was cut") as caught:
        shell.run_cell_magic("kvbench", "-n 2,3 -w 0 --max-seconds 1e-6", PROMPT)
    assert said(caught.value).endswith("or lower -n, -p or -r")  # the magic names its own flags
    shell.run_line_magic("config", "KVMagics.max_seconds = 1e-6")
    try:
        with raises_usage(match=r"within --max-seconds 1e-06 s"):
            shell.run_cell_magic("kvbench", "-n 2,3 -w 0", PROMPT)
        assert shell.run_cell_magic("kvbench", "-n 2 -w 0 --max-seconds 0", PROMPT) is not None
        with raises_usage(match=r"within --max-seconds 1e-06 s"):  # one configuration is bounded too
            shell.run_cell_magic("kvbench", "-n 2 -w 0", PROMPT)
    finally:
        shell.run_line_magic("config", "KVMagics.max_seconds = 600")
    assert calls == [2]


def test_magic_returns_a_partial_result_on_ctrl_c(shell, tiny, capsys) -> None:
    hook = tiny.model.register_forward_hook(_InterruptAt(12))  # in the second configuration, as above
    try:
        result = shell.run_cell_magic("kvbench", "-n 2,3 -w 0 --max-seconds 0 -o", PROMPT)
    finally:
        hook.remove()
    assert result.partial and len(result.configs) == 1
    frame = shell.run_cell_magic("kvbench", "-n 2 -w 0", PROMPT)  # the model still works
    assert list(frame["identical"]) == [True]


def test_magic_plot_displays_a_png(shell, monkeypatch) -> None:
    shown: list = []
    monkeypatch.setattr("IPython.display.display", lambda *objs, **kw: shown.extend(objs))
    assert shell.run_cell_magic("kvbench", "-n 2,3 -w 0 -q --plot", PROMPT) is None
    assert len(shown) == 1 and shown[0]["image/png"].startswith(b"\x89PNG")
