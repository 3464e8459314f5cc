"""Faults injected at every stage of %%kvbench (and of %kvload): the session must come out usable.

Stages of ``%%kvbench -n 3 -w 1 -r 1``: tokenizing, the uncached and cached warm-up ``generate``
(1 token each), the cached two-token ``generate`` that projects its steps against the budget (a one-token
warm-up says nothing of them), the uncached and cached timed ``generate`` (3 tokens each), the one-token
runs for the time to first token, the identity check and building the table. Faults: ``KeyboardInterrupt`` (propagates: the user asked to stop),
``RuntimeError`` (propagates unchanged: not the user's mistake, so no friendly disguise) and
``torch.cuda.OutOfMemoryError`` (becomes a ``UsageError`` with advice, after freeing the cache).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from IPython.core.error import UsageError

from kvmagic import KVMagicError, run_benchmark

from .conftest import PROMPT
from .model_state import snapshot

NEW, WARMUP = 3, 1
STOPPED = "KeyboardInterrupt: %kvbench stopped before a configuration finished: nothing to show"
LINE = f"-n {NEW} -w {WARMUP} -r 1 -o"

# generate() stages in the order the protocol runs them: (use_cache, max_new_tokens).
GENERATE_STAGES = {
    "warm-up uncached": (1, False, WARMUP),
    "warm-up cached": (2, True, WARMUP),
    "probe cached": (3, True, 2),
    "timed uncached": (4, False, NEW),
    "timed cached": (5, True, NEW),
    "first token uncached": (6, False, 1),
    "first token cached": (7, True, 1),
}
STAGES = ["tokenizing", *GENERATE_STAGES, "identity check", "table"]


def _faults() -> dict[str, Callable[[], BaseException]]:
    return {
        "KeyboardInterrupt": KeyboardInterrupt,
        "RuntimeError": lambda: RuntimeError("injected failure"),
        "OutOfMemoryError": lambda: torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB"),
    }


def _raising(make: Callable[[], BaseException]) -> Callable[..., Any]:
    def raise_fault(*args: Any, **kwargs: Any) -> Any:
        raise make()

    return raise_fault


CASES = [
    (stage, fault)
    for stage in STAGES
    for fault in _faults()
    # pandas builds the table on the CPU: torch cannot run out of accelerator memory there.
    if not (stage == "table" and fault == "OutOfMemoryError")
]


@pytest.fixture(scope="module")
def reference_ids(tiny) -> tuple[int, ...]:
    return run_benchmark(tiny, PROMPT, new_tokens=NEW, warmup_tokens=WARMUP).measurement("off").generated_ids


def _inject(mp: pytest.MonkeyPatch, loaded: Any, stage: str, make: Callable[[], BaseException]) -> list[str]:
    """Patch the stage to raise ``make()``; returns the list that records accelerator cache releases."""
    released: list[str] = []

    def fault() -> BaseException:
        error = make()
        if isinstance(error, torch.cuda.OutOfMemoryError):
            # Pretend to be on CUDA from here on, so freeing the cache is observable on any machine.
            mp.setattr(torch.cuda, "is_available", lambda: True)
            mp.setattr(torch.cuda, "empty_cache", lambda: released.append("empty_cache"))
        return error

    if stage == "tokenizing":
        mp.setattr(type(loaded.tokenizer), "__call__", _raising(fault))
    elif stage in GENERATE_STAGES:
        call, use_cache, tokens = GENERATE_STAGES[stage]
        model_class = type(loaded.model)
        original = model_class.generate
        seen: list[int] = []

        def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(1)
            if len(seen) == call:
                config = kwargs["generation_config"]
                assert (config.use_cache, config.max_new_tokens) == (use_cache, tokens), "stage order changed"
                raise fault()
            return original(self, *args, **kwargs)

        mp.setattr(model_class, "generate", generate)
    elif stage == "identity check":
        mp.setattr("kvmagic.runner.mismatch.first_mismatch", _raising(fault))
    elif stage == "table":
        mp.setattr("kvmagic.results.result.BenchmarkResult.to_dataframe", _raising(fault))
    return released


@pytest.mark.parametrize(("stage", "fault"), CASES)
def test_fault_leaves_the_session_usable(shell, tiny, reference_ids, stage: str, fault: str) -> None:
    before = snapshot(tiny.model)
    line = LINE.removesuffix(" -o") if stage == "table" else LINE  # -o skips the table
    with pytest.MonkeyPatch.context() as mp:
        released = _inject(mp, tiny, stage, _faults()[fault])
        if fault == "OutOfMemoryError":
            with pytest.raises(UsageError) as caught:
                shell.run_cell_magic("kvbench", line, PROMPT)
            message = str(caught.value)
            assert message.startswith("out of accelerator memory generating 3 tokens")
            for fix in ("lower -n", "shorten the prompt", "smaller --dtype"):
                assert fix in message
            assert released == ["empty_cache"]
        else:
            expected = KeyboardInterrupt if fault == "KeyboardInterrupt" else RuntimeError
            with pytest.raises(expected, match=None if expected is KeyboardInterrupt else "injected failure") as caught:
                shell.run_cell_magic("kvbench", line, PROMPT)
            if expected is KeyboardInterrupt:  # IPython shows it as this one line, not torch's frames
                assert caught.value._render_traceback_() == [STOPPED]

    assert snapshot(tiny.model) == before
    again = shell.run_cell_magic("kvbench", LINE, PROMPT)
    assert again.measurement("off").generated_ids == reference_ids
    assert again.identical


def test_ctrl_c_in_a_real_shell_prints_one_line_and_the_cell_counts_as_failed(shell, monkeypatch, capsys) -> None:
    """A notebook's "run all" stops at the interrupted cell; what it shows is one line, not a traceback."""
    monkeypatch.setattr(type(shell.magics_manager.registry["KVMagics"].loaded.model), "generate",
                        _raising(KeyboardInterrupt))  # fmt: skip
    capsys.readouterr()
    outcome = shell.run_cell(f"%%kvbench {LINE}\n{PROMPT}")
    printed = capsys.readouterr().out
    assert isinstance(outcome.error_in_exec, KeyboardInterrupt)
    assert [line for line in printed.splitlines() if line.strip()] == [STOPPED]


def test_out_of_memory_error_pins_no_frames(tiny, monkeypatch) -> None:
    """The API's error carries no context: the failed call's tensors are gone before it is raised."""
    original = type(tiny.model).generate

    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs["generation_config"].use_cache:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory.")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(tiny.model), "generate", generate)
    with pytest.raises(KVMagicError, match=r"^out of accelerator memory") as caught:
        run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=1)
    assert caught.value.__context__ is None and caught.value.__cause__ is None


def test_an_unrelated_runtime_error_is_not_called_out_of_memory(tiny, monkeypatch) -> None:
    monkeypatch.setattr(type(tiny.model), "generate", _raising(lambda: RuntimeError("shape")))
    with pytest.raises(RuntimeError, match=r"^shape$"):
        run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0)


def test_out_of_memory_while_loading_suggests_a_smaller_dtype(shell, monkeypatch) -> None:
    from transformers import AutoModelForCausalLM

    oom = _raising(lambda: torch.cuda.OutOfMemoryError("CUDA out of memory."))
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", oom)
    with pytest.raises(UsageError, match=r"^not enough memory to load 'tiny' as float32: load a smaller --dtype"):
        shell.run_line_magic("kvload", "tiny")


def test_interrupted_load_leaves_no_model_and_the_next_load_works(shell, monkeypatch) -> None:
    """The old model is dropped before the new weights load (so both never share memory); an
    interrupt there leaves "no model loaded", which the next %%kvbench says plainly."""
    from transformers import AutoModelForCausalLM

    original = AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", _raising(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt) as caught:
        shell.run_line_magic("kvload", "tiny")
    assert caught.value._render_traceback_() == ["KeyboardInterrupt: %kvload stopped: no model is loaded"]
    with pytest.raises(UsageError, match=r"^no model loaded: run `%kvload MODEL` first"):
        shell.run_cell_magic("kvbench", LINE, PROMPT)
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", original)
    shell.run_line_magic("kvload", "tiny")
    assert shell.run_cell_magic("kvbench", LINE, PROMPT).identical


def test_out_of_memory_mid_sweep_keeps_the_finished_rows(tiny, monkeypatch) -> None:
    """Long uncached runs are where a GPU runs out: the rows measured before stay, and the model stays usable."""
    before = snapshot(tiny.model)
    real = type(tiny.model).generate

    def generate(self, *args, **kwargs):
        if kwargs["generation_config"].max_new_tokens == 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(tiny.model), "generate", generate)
    result = run_benchmark(tiny, PROMPT, new_tokens=[2, 3, 4], warmup_tokens=0, max_seconds=0)
    assert result.partial and [c.new_tokens for c in result.configs] == [2]
    prompt_tokens = result.configs[0].prompt_tokens
    assert result.notes()[:2] == [
        (
            f"partial: out of accelerator memory at {prompt_tokens}+3 tokens after 1 of 3 configurations; "
            "the rows shown are complete, the rest were not measured"
        ),
        "to measure the rest: lower -n or -p, or load the model with a smaller --dtype",
    ]
    monkeypatch.undo()
    assert snapshot(tiny.model) == before
    assert run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0).identical


def test_out_of_memory_before_any_row_is_the_advice(tiny, monkeypatch) -> None:
    monkeypatch.setattr(type(tiny.model), "generate", _raising(lambda: torch.cuda.OutOfMemoryError("CUDA out")))
    with pytest.raises(KVMagicError, match=r"^out of accelerator memory generating up to 3 tokens: lower new_tokens"):
        run_benchmark(tiny, PROMPT, new_tokens=[2, 3], warmup_tokens=0, max_seconds=0)
