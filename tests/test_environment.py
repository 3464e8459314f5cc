"""torch's threads for one run, and the environment facts that change timings, recorded with each result."""

from __future__ import annotations

import json

import pytest
import torch

from kvmagic import run_benchmark
from kvmagic.errors import KVMagicError
from kvmagic.frontends import cli
from kvmagic.measure.environment import _cpu_model, cuda_driver, driver_from_proc, environment
from kvmagic.measure.threads import torch_threads


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield before
    torch.set_num_threads(before)


def test_threads_are_set_for_the_block_and_put_back(restore_threads):
    torch.set_num_threads(2)
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with torch_threads(None):
        assert torch.get_num_threads() == 2


def test_threads_are_put_back_after_an_error(restore_threads):
    torch.set_num_threads(2)
    with pytest.raises(ZeroDivisionError), torch_threads(1):
        assert torch.get_num_threads() == 1
        _ = 1 / 0
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_a_bad_thread_count_is_refused_before_anything_changes(bad, restore_threads):
    refused = r"threads must be a whole number >= 1 \(or None for torch's default\)"
    with pytest.raises(KVMagicError, match=refused), torch_threads(bad):
        pass
    assert torch.get_num_threads() == restore_threads


def test_environment_records_what_changes_timings(tiny, restore_threads):
    with torch_threads(1):
        facts = environment(tiny)
    assert facts["threads"] == 1
    assert facts["cpu"] == _cpu_model() and facts["device"] == f"cpu ({_cpu_model()})"
    assert facts["cuda"] == torch.version.cuda
    assert facts["cuda_driver"] == cuda_driver()
    if not torch.cuda.is_available():
        assert facts["cuda_driver"] is None
    assert facts["allow_tf32_matmul"] == torch.backends.cuda.matmul.allow_tf32
    assert facts["allow_tf32_cudnn"] == torch.backends.cudnn.allow_tf32
    assert facts["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    assert facts["random_weights"] is False


def test_environment_follows_the_precision_settings(tiny):
    before = torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision()
    try:
        torch.backends.cuda.matmul.allow_tf32 = not before[0]
        torch.set_float32_matmul_precision("medium")
        facts = environment(tiny)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before[0]
        torch.set_float32_matmul_precision(before[1])
    assert facts["allow_tf32_matmul"] is (not before[0]) and facts["float32_matmul_precision"] == "medium"


def test_driver_version_from_the_kernel_module():
    proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    open_module = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder)\n"
    assert driver_from_proc(proprietary) == "535.104.05"
    assert driver_from_proc(open_module) == "550.54.15"
    assert driver_from_proc("something else") is None


def test_the_command_runs_with_the_threads_asked_for_and_puts_them_back(capsys, restore_threads):
    torch.set_num_threads(2)
    args = ["-m", "tiny", "-n", "1", "-w", "0", "--threads", "1", "--format", "json", "hi"]
    assert cli.main(args) == 0
    assert json.loads(capsys.readouterr().out)["metadata"]["threads"] == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(SystemExit) as exited:
        cli.main(["-m", "tiny", "--threads", "0", "hi"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "kvbench: error: argument --threads: expected a whole number >= 1, got '0' (see kvbench --help)\n"
    )


def test_a_run_takes_its_thread_count_and_puts_torchs_back(tiny, restore_threads):

    torch.set_num_threads(2)
    result = run_benchmark(tiny, "The KV cache", new_tokens=2, warmup_tokens=0, threads=1)
    assert result.metadata["threads"] == 1 and result.spec.threads == 1
    assert torch.get_num_threads() == 2


def test_threads_is_a_setting_of_the_magics_too(shell, restore_threads):
    from traitlets import TraitError

    torch.set_num_threads(2)
    shell.run_line_magic("config", "KVMagics.threads = 1")
    try:
        result = shell.run_cell_magic("kvbench", "-n 2 -w 0 -o", "The KV cache")
        assert result.metadata["threads"] == 1 and torch.get_num_threads() == 2
        assert shell.run_cell_magic("kvbench", "-n 2 -w 0 -o --threads 2", "The KV cache").metadata["threads"] == 2
        with pytest.raises(TraitError, match=r"^KVMagics.threads must be a whole number >= 1, got 0$"):
            shell.magics_manager.registry["KVMagics"].threads = 0
    finally:
        shell.run_line_magic("config", "KVMagics.threads = None")
