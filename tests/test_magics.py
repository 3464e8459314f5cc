"""The magics through a real InteractiveShell: return values, help, and the exact UsageError texts."""

from __future__ import annotations

import pandas as pd
import pytest
from IPython.core.error import UsageError

from kvmagic.results.report import COLUMNS
from kvmagic.results.result import BenchmarkResult

from .conftest import PROMPT, raises_usage, said


def bench(shell, line: str = "-n 4 -w 1", cell: str = PROMPT):
    return shell.run_cell_magic("kvbench", line, cell)


def test_kvbench_returns_the_table(shell):
    frame = bench(shell, "-n 6 -w 2 -r 2")
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == list(COLUMNS)
    row = frame.iloc[0]
    assert row.prompt_tokens == len(PROMPT.encode())  # tiny's tokenizer is byte-level
    assert row.new_tokens == 6
    assert row.uncached_s > 0 and row.cached_s > 0
    assert row.speedup == pytest.approx(row.uncached_s / row.cached_s)
    assert bool(row.identical)


def test_the_cells_value_in_underscore_carries_its_result(shell):
    """``r = _`` after a cell is the table, and the result it shows is one attribute away."""
    shell.run_cell(f"%%kvbench -n 3 -w 0\n{PROMPT}")
    table = shell.user_ns["_"]
    assert isinstance(table, pd.DataFrame) and isinstance(table.result, BenchmarkResult)
    assert table.to_dataframe().equals(table.result.to_dataframe())
    assert table.result.measurement("off").generated_ids == table.result.measurement("dynamic").generated_ids


def test_a_figure_in_a_terminal_says_how_to_save_it_and_that_way_works(shell, monkeypatch, tmp_path):
    """Where no PNG shows (a terminal), the figure's text says to save it from ``_`` in the next cell."""
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda bundle, raw: shown.append(bundle))
    shell.run_cell(f"%%kvbench -n 2 -w 0 --plot\n{PROMPT}")
    assert [bundle["text/plain"] for bundle in shown] == [
        "<figure: in a terminal, save it in the next cell with `_.plot().savefig('sweep.png')`>"
    ]
    shell.user_ns["_"].plot().savefig(tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").read_bytes().startswith(b"\x89PNG")


def test_output_var_and_quiet(shell, capsys):
    result = bench(shell, "-n 3 -o -v saved")
    assert isinstance(result, BenchmarkResult)
    assert shell.user_ns["saved"] is result
    assert result.config.new_tokens == 3 and len(result.measurement("off").generated_ids) == 3
    assert bench(shell, "-n 3 -q") is None
    assert capsys.readouterr().out == ""


def test_cell_text_is_the_prompt_without_surrounding_blank_lines(shell):
    plain = bench(shell, "-n 2 -o", "hello")
    padded = bench(shell, "-n 2 -o", "\n  hello \n\n")
    assert padded.config.prompt_tokens == plain.config.prompt_tokens == 5
    assert padded.measurement("off").generated_ids == plain.measurement("off").generated_ids


def test_chat_wraps_the_prompt_in_the_template(shell):
    plain = bench(shell, "-n 2 -o", "hello")
    chat = bench(shell, "-n 2 -o --chat", "hello")
    # "[|user|]\nhello[|endofturn|]\n[|assistant|]\n<think>\n\n</think>\n\n": 5 specials + 7 newlines
    assert chat.config.prompt_tokens == plain.config.prompt_tokens + 12


def test_config_defaults_and_flags_override_them(shell):
    shell.run_line_magic("config", "KVMagics.new_tokens = 5")
    try:
        assert bench(shell, "-w 0 -o").config.new_tokens == 5
        assert bench(shell, "-w 0 -n 2 -o").config.new_tokens == 2
    finally:
        shell.run_line_magic("config", "KVMagics.new_tokens = 64")


def test_bad_config_value_is_refused(shell):
    from traitlets import TraitError

    magics = shell.magics_manager.registry["KVMagics"]
    with pytest.raises(TraitError, match=r"KVMagics.repeat must be a whole number >= 1 or 'auto', got 0"):
        magics.repeat = 0
    assert magics.repeat == 1


def test_help_pages_document_every_option(shell):
    for name, options in {
        "kvbench": ["--new-tokens", "--warmup-tokens", "--repeat", "--chat", "--output", "--var", "--quiet"],
        "kvload": [
            "--dtype",
            "--device-map",
            "--revision",
            "--gguf-file",
            "--attn-implementation",
            "--trust-remote-code",
        ],
    }.items():
        kind = "cell" if name == "kvbench" else "line"
        doc = shell.find_magic(name, kind).__doc__
        assert "\nexamples:\n" in doc
        for option in options:
            assert option in doc


BENCH_ERRORS = [
    ("", "   \n\t ", "the prompt is empty: write the text to generate from (in %%kvbench, the cell body)"),
    (
        "-n 0",
        PROMPT,
        "%kvbench: -n: lengths must be >= 1, got 0 (see %kvbench? for the options)",
    ),
    ("-r 0", PROMPT, "-r must be a whole number >= 1 or 'auto', got 0"),
    ("-w -1", PROMPT, "-w must be a whole number >= 0, got -1"),
    (
        "-n abc",
        PROMPT,
        (
            "%kvbench: -n: cannot read 'abc' as lengths: write N, a list N,M,... or a "
            "range A-B*F (multiply by F) or A-B+S (add S), e.g. 16,64,256 or 16-256*4 or 32-128+32 "
            "(see %kvbench? for the options)"
        ),
    ),
    (
        "-r 1.5",
        PROMPT,
        "%kvbench: -r: expected a whole number or auto, got '1.5' (see %kvbench? for the options)",
    ),
    ("--fast", PROMPT, "%kvbench: unrecognized arguments: --fast (see %kvbench? for the options)"),
    (
        "--format=csv",
        PROMPT,
        (
            "%kvbench: --format is the command's (kvbench), not %kvbench's: in a notebook, -o returns the result: "
            ".to_csv(), .to_markdown() or .to_json()"
        ),
    ),
    (
        "--fail-on speedup:-5%",
        PROMPT,
        (
            "%kvbench: --fail-on is the command's (kvbench), not %kvbench's: in a notebook, --compare PATH shows "
            "each change and whether it is significant"
        ),
    ),
    (
        "--repat 3",
        PROMPT,
        "%kvbench: unrecognized arguments: --repat (did you mean --repeat? see %kvbench? for the options)",
    ),
    ("-v 'x", PROMPT, "%kvbench: cannot split the arguments: No closing quotation: quote the prompt, or use a cell"),
    (
        "-n 2000",
        PROMPT,
        (
            "the prompt (82 tokens) plus 2000 new tokens exceeds the 2048 positions 'tiny' supports: "
            "shorten the prompt or lower -n"
        ),
    ),
]


@pytest.mark.parametrize(("line", "cell", "message"), BENCH_ERRORS)
def test_kvbench_errors_say_the_fix_and_leave_the_model_usable(shell, line, cell, message):
    before = bench(shell, "-n 3 -w 0 -o")
    with pytest.raises(UsageError) as caught:
        bench(shell, line, cell)
    assert said(caught.value) == message
    after = bench(shell, "-n 3 -w 0 -o")
    assert after.measurement("off").generated_ids == before.measurement("off").generated_ids


def test_kvbench_before_kvload(shell):
    shell.magics_manager.registry["KVMagics"].loaded = None
    with pytest.raises(UsageError) as caught:
        bench(shell)
    assert said(caught.value) == "no model loaded: run `%kvload MODEL` first (`%kvload tiny` works offline)"


def test_chat_without_template(shell, tiny, monkeypatch):
    monkeypatch.setattr(tiny.tokenizer, "chat_template", None)
    with pytest.raises(UsageError) as caught:
        bench(shell, "--chat")
    assert said(caught.value) == "the tokenizer of 'tiny' has no chat template: drop --chat to use the text as it is"
    monkeypatch.undo()
    assert bench(shell, "-n 2 -o --chat").identical


KVLOAD_ERRORS = [
    ("tiny --dtype float8", "unknown dtype 'float8': use one of auto, float16, bfloat16, float32"),
    (
        "no-such-org/no-such-model",
        (
            "cannot download 'no-such-org/no-such-model': the Hugging Face Hub is unreachable (offline, or no network) "
            "and it is not in the local cache; the built-in model 'tiny' works offline"
        ),
    ),
    ("tiny --revision main", "tiny is built locally and has no --revision: drop it"),
    ("tiny --gguf-file model.gguf", "tiny is built locally and has no --gguf-file: drop it"),
    ("tiny --bogus", "%kvload: unrecognized arguments: --bogus (see %kvload? for the options)"),
    (
        "tiny --dtpye float32",
        "%kvload: unrecognized arguments: --dtpye float32 (did you mean --dtype? see %kvload? for the options)",
    ),
]


@pytest.mark.parametrize(("line", "message"), KVLOAD_ERRORS)
def test_kvload_errors_keep_the_loaded_model(shell, tiny, line, message):
    with pytest.raises(UsageError) as caught:
        shell.run_line_magic("kvload", line)
    assert said(caught.value) == message
    assert shell.magics_manager.registry["KVMagics"].loaded is tiny
    assert bench(shell, "-n 2 -o").identical


def test_kvload_directory_without_config(shell, tmp_path):
    with pytest.raises(UsageError) as caught:
        shell.run_line_magic("kvload", str(tmp_path))
    assert (
        said(caught.value)
        == f"{str(tmp_path)!r} is a directory without a config.json: point to a model saved with save_pretrained"
    )


def test_offline_hub_error_neither_connects_nor_waits(shell, monkeypatch):
    # What makes a hub error slow is a retry: a connection attempt and a back-off sleep (20-50 s in all).
    # Counting those, rather than timing the call, gives the same verdict on a busy machine.
    import socket
    import time

    attempts: list[str] = []
    monkeypatch.setattr(socket.socket, "connect", lambda *a, **k: attempts.append("connect"))
    monkeypatch.setattr(time, "sleep", lambda *a, **k: attempts.append("sleep"))
    with raises_usage(match=r"^cannot download 'no-such-org/no-such-model': the Hugging Face Hub is"):
        shell.run_line_magic("kvload", "no-such-org/no-such-model")
    assert attempts == []


def test_kvload_prints_a_summary_and_replaces_the_model(capsys):
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "kvmagic")
    try:
        ip.run_line_magic("kvload", "tiny --dtype bfloat16")
        out = capsys.readouterr().out
        assert out.startswith("tiny: Exaone4ForCausalLM, 3.87 M parameters, bfloat16 on cpu, loaded in ")
        loaded = ip.magics_manager.registry["KVMagics"].loaded
        assert str(loaded.dtype) == "torch.bfloat16"
        frame = ip.run_cell_magic("kvbench", "-n 2 -w 0", "hi")
        assert frame.iloc[0].new_tokens == 2
    finally:
        ip.run_line_magic("unload_ext", "kvmagic")
    assert "kvbench" not in ip.magics_manager.magics["cell"]


VAR_ERRORS = [
    (
        "-v my-result",
        "-v must name a Python variable, and 'my-result' is not one: use letters, digits and underscores, not starting with a digit (e.g. -v my_result)",
    ),
    (
        "-v 2nd",
        "-v must name a Python variable, and '2nd' is not one: use letters, digits and underscores, not starting with a digit (e.g. -v result_2nd)",
    ),
    (
        "-v {x}",
        "-v must name a Python variable, and '{x}' is not one: use letters, digits and underscores, not starting with a digit (e.g. -v x)",
    ),
    ("-v class", "-v must name a Python variable, and 'class' is a keyword: pick another name (e.g. -v class_)"),
]


@pytest.mark.parametrize(("line", "message"), VAR_ERRORS)
def test_var_must_be_a_name_python_can_assign_and_is_refused_before_measuring(shell, monkeypatch, line, message):
    import kvmagic.runner.benchmark

    monkeypatch.setattr(kvmagic.runner.benchmark, "run_benchmark", pytest.fail)  # refused before anything runs
    with pytest.raises(UsageError) as caught:
        bench(shell, line)
    assert said(caught.value) == message


def test_var_says_what_it_replaced_or_hid(shell, capsys):
    shell.user_ns.pop("max", None)
    shell.user_ns["data"] = [1, 2]
    try:
        bench(shell, "-n 2 -w 0 -v max")
        bench(shell, "-n 2 -w 0 -o -v data")
        lines = capsys.readouterr().out.splitlines()
        assert lines == [
            "-v max: max now holds the BenchmarkResult and hides the builtin max (`del max` brings it back)",
            "-v data: replaced the list that data held with the BenchmarkResult",
        ]
        assert isinstance(shell.user_ns["max"], BenchmarkResult) and isinstance(shell.user_ns["data"], BenchmarkResult)
        bench(shell, "-n 2 -w 0 -v data")  # an earlier result: replacing it is what -v is for
        bench(shell, "-n 2 -w 0 -q -v data2")
        bench(shell, "-n 2 -w 0 -v data2")
        assert capsys.readouterr().out == ""
    finally:
        for name in ("max", "data", "data2"):
            shell.user_ns.pop(name, None)


FLASH_4 = (
    "FlashAttention2 has been toggled on, but it cannot be used due to the following error: the package flash_attn "
    "seems to be not installed. Please refer to the documentation of "
    "https://huggingface.co/docs/transformers/perf_infer_gpu_one#flashattention-2 to install Flash Attention 2."
)  # transformers 4.55's words


@pytest.mark.parametrize(
    ("raised", "shown"),
    [
        ("the disk is full.", "the disk is full"),
        (FLASH_4, FLASH_4.partition(". ")[0]),  # its next sentence went for length, whole
    ],
)
def test_a_sentence_quoted_before_the_release_note_loses_its_full_stop(shell, monkeypatch, raised, shown):
    import transformers

    shell.run_line_magic("kvload", "tiny")

    def fail(*args, **kwargs):
        raise RuntimeError(raised)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", fail)
    with pytest.raises(UsageError) as caught:
        shell.run_line_magic("kvload", "tiny")
    assert said(caught.value) == (
        f"cannot load 'tiny': {shown}; the previously loaded model ('tiny') was released: run %kvload again"
    )
    assert all(len(line) <= 100 for line in f"UsageError: {caught.value}".splitlines())


def test_a_kvload_that_fails_after_releasing_the_model_says_so(shell, monkeypatch):
    import transformers

    shell.run_line_magic("kvload", "tiny")
    magics = shell.magics_manager.registry["KVMagics"]
    assert magics.loaded.name == "tiny"

    def fail(*args, **kwargs):
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", fail)
    with pytest.raises(UsageError) as caught:
        shell.run_line_magic("kvload", "tiny")
    assert said(caught.value) == (
        "cannot load 'tiny': the disk is full; the previously loaded model ('tiny') was released: run %kvload again"
    )
    assert magics.loaded is None
    with pytest.raises(UsageError) as caught:
        bench(shell)
    assert said(caught.value) == "no model loaded: run `%kvload MODEL` first (`%kvload tiny` works offline)"
    magics.loaded = None
    with pytest.raises(UsageError) as caught:
        shell.run_line_magic("kvload", "tiny")
    assert said(caught.value) == "cannot load 'tiny': the disk is full"  # nothing was loaded, nothing released


def test_the_table_shows_the_columns_a_reader_needs_and_wide_shows_every_one(shell):
    frame = bench(shell, "-n 2 -w 0")
    assert list(frame.columns) == list(COLUMNS)  # the data: every column
    header = repr(frame).splitlines()[0].split()
    assert header == ["prompt_tokens", "new_tokens", "uncached_s", "cached_s", "speedup", "identical", "kv_cache_mib"]
    wide = repr(bench(shell, "-n 2 -w 0 --wide"))
    assert all(column in wide for column in COLUMNS)


def test_kvbench_is_a_line_magic_too_and_its_help_is_where_the_errors_point(shell):
    """`%timeit` works both ways; the errors say "see %kvbench?", so that must be a help page."""
    line = shell.find_magic("kvbench", "line")
    assert line is not None and line.__doc__ == shell.find_magic("kvbench", "cell").__doc__
    usage = line.__doc__.split("\n\n")[0].removeprefix("usage: ").splitlines()
    assert [u.split()[0] for u in usage] == ["%kvbench", "%%kvbench"]
    quoted = shell.run_line_magic("kvbench", '-n 3 -w 0 -o "The KV cache"')
    unquoted = shell.run_line_magic("kvbench", "-n 3 -w 0 -o The KV cache")
    celled = shell.run_cell_magic("kvbench", "-n 3 -w 0 -o", "The KV cache")
    assert (
        quoted.measurement("off").generated_ids
        == unquoted.measurement("off").generated_ids
        == celled.measurement("off").generated_ids
    )
    assert quoted.config == celled.config


@pytest.mark.parametrize(
    ("line", "cell", "message"),
    [
        ("-n 3", None, '%kvbench needs a prompt: %kvbench -n 16 "The KV cache", or a %%kvbench cell'),
        (
            "-n 3 stray words",
            PROMPT,
            "%%kvbench takes its prompt from the cell's body: move 'stray words' into it, or use %kvbench",
        ),
    ],
)
def test_the_prompt_comes_from_one_place(shell, line, cell, message):
    with pytest.raises(UsageError) as caught:
        if cell is None:
            shell.run_line_magic("kvbench", line)
        else:
            shell.run_cell_magic("kvbench", line, cell)
    assert said(caught.value) == message


def test_quoted_values_lose_their_quotes_and_keep_their_backslashes(shell, tmp_path):
    path = tmp_path / "a run.json"
    shell.run_cell_magic("kvbench", f'-n 2 -w 0 -q --save "{path}"', PROMPT)
    assert path.exists()
    from kvmagic.frontends.magics import split_line

    assert split_line(r"-v x C:\runs\a.json") == ["-v", "x", r"C:\runs\a.json"]


@pytest.mark.parametrize(
    ("line", "fix"),
    [
        ("-n 8 Explain what -r does", "a prompt holding a flag must be quoted: %kvbench -n 8 'Explain what -r does'"),
        ("-n 8 hi --bogus", "a prompt holding a flag must be quoted: %kvbench -n 8 'hi --bogus'"),
        ("-n abc hi -r 2", "see %kvbench? for the options"),  # quoting would not mend -n abc
    ],
)
def test_an_unquoted_prompt_that_holds_a_flag_is_told_to_quote_it(shell, line, fix):
    with pytest.raises(UsageError) as caught:
        shell.run_line_magic("kvbench", line)
    assert said(caught.value).endswith(f"({fix})")


def test_the_line_form_keeps_its_prompt_after_a_bare_frontier(shell):
    from kvmagic.frontends.options import word_optional
    from kvmagic.frontends.values import prompt_apart

    flags = word_optional("magic")
    assert prompt_apart(["--frontier", "The", "KV"], flags, one_word=False) == ["--frontier", "--", "The", "KV"]
    assert prompt_apart(["--frontier", "The", "KV"], flags, one_word=True) == ["--frontier", "The", "KV"]
    assert prompt_apart(["--frontier", "check", "The"], flags, one_word=False) == ["--frontier", "check", "The"]
    result = shell.run_line_magic("kvbench", "-n 2 -w 0 -o --frontier The KV cache")
    assert result.spec.frontier == "predict" and result.frontier
