"""Configurable defaults: %config and an IPython profile set them, bad values are refused, flags override."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from traitlets import TraitError

from .conftest import PROMPT

ROOT = Path(__file__).resolve().parent.parent


def magics(shell):
    return shell.magics_manager.registry["KVMagics"]


@contextmanager
def configured(shell, **settings):
    """``%config`` each setting for the block, then put back what was there."""
    before = {name: getattr(magics(shell), name) for name in settings}
    for name, value in settings.items():
        shell.run_line_magic("config", f"KVMagics.{name} = {value!r}")
    try:
        yield
    finally:
        for name, value in before.items():
            shell.run_line_magic("config", f"KVMagics.{name} = {value!r}")


def test_chat_default_and_no_chat_override(shell):
    plain = shell.run_cell_magic("kvbench", "-n 2 -w 0 -o", "hello")
    with configured(shell, chat=True):
        chat = shell.run_cell_magic("kvbench", "-n 2 -w 0 -o", "hello")
        unchat = shell.run_cell_magic("kvbench", "-n 2 -w 0 -o --no-chat", "hello")
    assert chat.config.prompt_tokens == plain.config.prompt_tokens + 12 and chat.spec.chat is True
    assert unchat.config.prompt_tokens == plain.config.prompt_tokens


def test_model_and_dtype_defaults_feed_kvload(shell, capsys):
    with configured(shell, model="tiny", dtype="bfloat16"):
        shell.run_line_magic("kvload", "")
        assert magics(shell).loaded.name == "tiny" and str(magics(shell).loaded.dtype) == "torch.bfloat16"
        shell.run_line_magic("kvload", "--dtype float32")
        assert str(magics(shell).loaded.dtype) == "torch.float32"
    assert capsys.readouterr().out.count("tiny: Exaone4ForCausalLM") == 2


BAD = [
    ("new_tokens", 0, "KVMagics.new_tokens must be a whole number >= 1, got 0"),
    ("warmup_tokens", -1, "KVMagics.warmup_tokens must be a whole number >= 0, got -1"),
    ("repeat", 0, "KVMagics.repeat must be a whole number >= 1 or 'auto', got 0"),
    ("max_seconds", -1.0, "KVMagics.max_seconds must be a number of seconds >= 0 (0: no limit), got -1.0"),
    ("dtype", "float8", "KVMagics.dtype must be one of auto, float16, bfloat16, float32, got 'float8'"),
]


@pytest.mark.parametrize(("name", "value", "message"), BAD)
def test_bad_defaults_are_refused_and_the_old_value_kept(shell, name, value, message):
    before = getattr(magics(shell), name)
    with pytest.raises(TraitError) as caught:
        setattr(magics(shell), name, value)
    assert str(caught.value) == message
    assert getattr(magics(shell), name) == before


def test_wrong_type_is_refused(shell):
    with pytest.raises(TraitError, match="new_tokens"):
        magics(shell).new_tokens = "many"
    with pytest.raises(TraitError, match="repeat"):
        magics(shell).repeat = "often"


def test_repeat_auto_can_be_the_default(shell):
    with configured(shell, repeat="auto"):
        result = shell.run_cell_magic("kvbench", "-n 2 -w 0 -o --ci-target 0.99", "hello")
        fixed = shell.run_cell_magic("kvbench", "-n 2 -w 0 -o -r 2", "hello")
    assert result.spec.repeat == "auto" and len(list(result.measurement("dynamic").seconds)) >= 5
    assert fixed.spec.repeat == 2


def test_a_settings_help_reads_as_typed_not_as_argparse_escapes_it():
    from kvmagic.frontends.magics import KVMagics

    helps = {name: trait.help for name, trait in KVMagics.class_traits(config=True).items()}
    assert "(and %%kvbench -m)" in helps["model"]
    assert not [name for name, text in helps.items() if "%%%%" in text or "%%config" in text or "%%kvload" in text]


def test_help_names_the_config_setting(shell):
    doc = shell.find_magic("kvbench", "cell").__doc__
    for name in ("new_tokens", "warmup_tokens", "repeat", "chat", "expand", "max_seconds"):
        assert f"%config KVMagics.{name}" in " ".join(doc.split())


def _ipython(profile: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "IPython", "--colors=nocolor", f"--profile-dir={profile}", "-c", code]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


def test_profile_config_sets_the_defaults(tmp_path):
    (tmp_path / "ipython_config.py").write_text(
        "c.KVMagics.model = 'tiny'\nc.KVMagics.new_tokens = 3\nc.KVMagics.warmup_tokens = 0\n"
    )
    code = (
        "ip = get_ipython(); ip.run_line_magic('load_ext', 'kvmagic'); ip.run_line_magic('kvload', ''); "
        f"r = ip.run_cell_magic('kvbench', '-o', {PROMPT!r}); print('RESULT', r.model, r.config.new_tokens, r.spec.warmup_tokens)"
    )
    run = _ipython(tmp_path, code)
    assert "RESULT tiny 3 0" in run.stdout, run.stdout + run.stderr


def test_bad_profile_value_is_one_clear_line(tmp_path):
    (tmp_path / "ipython_config.py").write_text("c.KVMagics.repeat = 0\n")
    run = _ipython(tmp_path, "get_ipython().run_line_magic('load_ext', 'kvmagic')")
    out = run.stdout + run.stderr
    assert (
        "UsageError: KVMagics.repeat must be a whole number >= 1 or 'auto', got 0: fix it in the IPython profile's ipython_config.py"
        in out
    )
    assert "Traceback" not in out


def test_wide_setting_shows_every_column_and_no_wide_the_short_table(shell):
    from kvmagic.results.report import COLUMNS

    with configured(shell, wide=True):
        wide = repr(shell.run_cell_magic("kvbench", "-n 2 -w 0", "hello"))
        short = repr(shell.run_cell_magic("kvbench", "-n 2 -w 0 --no-wide", "hello"))
    assert all(column in wide for column in COLUMNS)
    assert "speedup" in short and "uncached_ttft_s" not in short


def test_every_configurable_option_is_a_trait_declared_by_name_in_the_class() -> None:
    """A configurable option without its trait (or a trait left from a removed option) fails here: each is written in
    the class body, where editors and type checkers see it."""
    import ast
    import inspect

    from traitlets import TraitType

    from kvmagic.frontends.magics import KVMagics
    from kvmagic.frontends.options import CONFIGURABLE

    body = ast.parse(inspect.getsource(KVMagics)).body[0]
    assert isinstance(body, ast.ClassDef)
    declared = [
        t.id for node in body.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)
    ]
    assert declared == list(CONFIGURABLE)
    assert all(isinstance(KVMagics.__dict__[name], TraitType) for name in CONFIGURABLE)
