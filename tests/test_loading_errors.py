"""%kvload failures: each one line that names the cause, with no code run that the user did not ask for.

Hub failures that need a server are simulated where transformers calls the hub: its
``hf_hub_download``/``snapshot_download`` raise the exception huggingface_hub itself builds from
a Hub response (``hf_raise_for_status`` on a response carrying the Hub's ``X-Error-Code``).
"""

from __future__ import annotations

import builtins
import json
import pickle
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from .conftest import PROMPT, raises_usage, said

MARKER = "KVMAGIC_CODE_RAN"


def _no_prompt(*args: Any, **kwargs: Any) -> str:
    raise AssertionError("loading asked for input: a notebook would hang on it")


@pytest.fixture
def kvload(shell, monkeypatch):
    """Run ``%kvload LINE`` and return the UsageError's message; fail if it loads or prompts."""
    monkeypatch.setattr(builtins, "input", _no_prompt)

    def run(line: str) -> str:
        with pytest.raises(UsageError) as caught:
            shell.run_line_magic("kvload", line)
        message = said(caught.value)
        assert "\n" not in message
        return message

    return run


@pytest.fixture(scope="module")
def tiny_files(tiny) -> Path:
    from kvmagic.model.tiny import tiny_dir

    return tiny_dir()


class _RunsCode:
    """Unpickling this runs code: what a hostile ``pytorch_model.bin`` can do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.marker), "w"))


def _hostile_pickle(marker: Path) -> bytes:
    return pickle.dumps({"lm_head.weight": _RunsCode(marker)}, protocol=2)  # torch.load's own protocol


def _copy(tiny_files: Path, target: Path, *, weights: bool = True) -> Path:
    shutil.copytree(tiny_files, target, ignore=None if weights else shutil.ignore_patterns("*.safetensors"))
    return target


# --- remote code -------------------------------------------------------------------------------------------


@pytest.fixture
def remote_code_dir(tiny_files: Path, tmp_path: Path) -> Path:
    """tiny under a model type transformers does not know, with its classes in a local .py file."""
    directory = _copy(tiny_files, tmp_path / "custom")
    config = json.loads((directory / "config.json").read_text())
    config["model_type"] = "kvmagic_custom"
    config["auto_map"] = {"AutoConfig": "custom.CustomConfig", "AutoModelForCausalLM": "custom.CustomModel"}
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "custom.py").write_text(
        "from pathlib import Path\n"
        "from transformers import Exaone4Config, Exaone4ForCausalLM\n"
        f"Path({str(tmp_path / MARKER)!r}).touch()\n"
        "class CustomConfig(Exaone4Config):\n"
        "    model_type = 'kvmagic_custom'\n"
        "class CustomModel(Exaone4ForCausalLM):\n"
        "    config_class = CustomConfig\n"
    )
    return directory


def test_remote_code_is_refused_without_the_flag(kvload, remote_code_dir: Path) -> None:
    message = kvload(str(remote_code_dir))
    assert message == (
        f"{str(remote_code_dir)!r} ships its own model code; pass --trust-remote-code if you trust it; "
        "the previously loaded model ('tiny') was released: run %kvload again"  # its tokenizer loaded first
    )
    assert not (remote_code_dir.parent / MARKER).exists()


def test_remote_code_runs_only_with_the_flag(shell, remote_code_dir: Path, monkeypatch) -> None:
    monkeypatch.setattr(builtins, "input", _no_prompt)
    shell.run_line_magic("kvload", f"{remote_code_dir} --trust-remote-code")
    assert (remote_code_dir.parent / MARKER).exists()
    loaded = shell.magics_manager.registry["KVMagics"].loaded
    assert type(loaded.model).__name__ == "CustomModel"


# --- weights: safe formats only ----------------------------------------------------------------------------


def test_safetensors_win_over_a_pickle_beside_them(shell, tiny_files: Path, tmp_path: Path) -> None:
    directory = _copy(tiny_files, tmp_path / "both")
    (directory / "pytorch_model.bin").write_bytes(_hostile_pickle(tmp_path / MARKER))
    shell.run_line_magic("kvload", str(directory))
    assert not (tmp_path / MARKER).exists()
    assert shell.run_cell_magic("kvbench", "-n 2 -w 0 -o", PROMPT).identical


def test_a_pickle_that_runs_code_is_refused(kvload, tiny_files: Path, tmp_path: Path) -> None:
    directory = _copy(tiny_files, tmp_path / "pickled", weights=False)
    (directory / "pytorch_model.bin").write_bytes(_hostile_pickle(tmp_path / MARKER))
    message = kvload(str(directory))
    assert message.startswith(f"{str(directory)!r} keeps its weights in a pickle that holds more than tensors")
    assert "load a copy saved as safetensors;" in message
    assert not (tmp_path / MARKER).exists()


def test_a_directory_without_weights(kvload, tiny_files: Path, tmp_path: Path) -> None:
    directory = _copy(tiny_files, tmp_path / "empty", weights=False)
    message = kvload(str(directory))
    assert message == (
        f"{str(directory)!r} holds a config but no weights (no .safetensors or .bin file): add --random-weights to "
        "build it with random ones, or save the model's weights there"
    )


def test_a_file_instead_of_a_directory(kvload, tiny_files: Path) -> None:
    path = tiny_files / "config.json"
    assert kvload(str(path)) == f"{str(path)!r} is a file: give the directory that holds its config.json and weights"


def test_corrupt_safetensors(kvload, tiny_files: Path, tmp_path: Path) -> None:
    directory = _copy(tiny_files, tmp_path / "corrupt")
    (directory / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    assert kvload(str(directory)).startswith(f"{str(directory)!r} holds no loadable model: ")


@pytest.mark.parametrize("name", ["./nope", "../nope", "/no/such/model", "~/nope", "models/org/model"])
def test_a_path_that_is_not_there_says_so(kvload, shell, monkeypatch, tmp_path: Path, name: str) -> None:
    """A name only a path can be: transformers said "Repo id must use alphanumeric chars", of a path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    previous = shell.magics_manager.registry["KVMagics"].loaded
    assert kvload(name) == f"{name!r} is not a directory here (nor a model on the Hub): check the path"
    assert kvload(f"{name} --random-weights") == kvload(name)
    assert shell.magics_manager.registry["KVMagics"].loaded is previous


def test_a_path_from_home_is_expanded(kvload, shell, tiny_files: Path, tmp_path: Path, monkeypatch) -> None:
    _copy(tiny_files, tmp_path / "models" / "tiny-copy")
    monkeypatch.setenv("HOME", str(tmp_path))
    file = "~/models/tiny-copy/config.json"
    assert kvload(file) == f"{file!r} is a file: give the directory that holds its config.json and weights"
    shell.run_line_magic("kvload", "~/models/tiny-copy")
    assert shell.magics_manager.registry["KVMagics"].loaded.name == "~/models/tiny-copy"


# --- GGUF --------------------------------------------------------------------------------------------------


def test_a_gguf_file_that_is_not_gguf(kvload, tiny_files: Path, tmp_path: Path) -> None:
    directory = _copy(tiny_files, tmp_path / "gguf")
    (directory / "model.gguf").write_bytes(b"PK\x03\x04 a zip file, not a GGUF model")
    assert kvload(f"{directory} --gguf-file model.gguf") == (
        "'model.gguf' is not a GGUF file (it does not start with the bytes 'GGUF'): "
        "name a .gguf file, or drop --gguf-file to load the directory's own weights"
    )


def test_a_gguf_file_that_is_missing(kvload, tiny_files: Path) -> None:
    expected = f"{str(tiny_files)!r} has no file 'nope.gguf': check --gguf-file"
    assert kvload(f"{tiny_files} --gguf-file nope.gguf") == expected


# --- devices -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device_map", "expected"),
    [
        ("meta", "--device-map meta loads no weights, so nothing could run: use auto, cpu or an accelerator"),
        (
            "disk",
            (
                "--device-map 'disk' is neither a device (cpu, cuda:0, mps) nor one of auto, balanced, "
                "balanced_low_0, sequential"
            ),
        ),
    ],
)
def test_device_maps_that_cannot_run(kvload, device_map: str, expected: str) -> None:
    assert kvload(f"tiny --device-map {device_map}") == expected


def test_a_cuda_device_that_is_not_there(kvload) -> None:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    message = kvload(f"tiny --device-map cuda:{count}")
    if count:
        assert message == f"--device-map 'cuda:{count}': there are {count} cuda devices, numbered from 0"
    else:
        assert message == f"--device-map 'cuda:{count}': torch sees no cuda device here; use auto or cpu"


# --- attention --------------------------------------------------------------------------------------------


def test_a_mistyped_attention_is_refused_and_the_model_kept(kvload, shell) -> None:
    """Refused before the previous model is released, with every choice named: transformers' own refusal came
    after it, cut off at 200 characters where its list of choices began."""
    from kvmagic.measure.capabilities import attention_implementations, transformers_version

    previous = shell.magics_manager.registry["KVMagics"].loaded
    message = kvload("tiny --attn-implementation sdpaa")
    assert message.startswith(
        f"--attn-implementation 'sdpaa' is not one transformers {transformers_version()} has: use "
    )
    assert "eager, " in message and " sdpa" in message and "…" not in message and "released" not in message
    assert all(name in message for name in attention_implementations())
    assert shell.magics_manager.registry["KVMagics"].loaded is previous


def test_flash_attention_without_flash_attn_is_refused_and_the_model_kept(kvload, shell) -> None:
    from kvmagic.measure.capabilities import attention_implementations

    reason = attention_implementations()["flash_attention_2"]
    if not reason:
        pytest.skip("FlashAttention 2 runs here")
    previous = shell.magics_manager.registry["KVMagics"].loaded
    message = kvload("tiny --attn-implementation flash_attention_2")
    assert message.startswith("--attn-implementation flash_attention_2 cannot run here: it needs FlashAttention 2 ")
    assert "; use eager, " in message and ".;" not in message and "released" not in message
    assert shell.magics_manager.registry["KVMagics"].loaded is previous


@pytest.mark.parametrize("value", ["kernels-community/flash-attn2", "paged|sdpa", "paged|eager", None])
def test_what_the_registry_does_not_list_is_left_to_transformers(value: str | None) -> None:
    """A hub kernel and a wrapped form are transformers' to accept: kvmagic refuses neither."""
    from kvmagic.model.loading import check_attention

    check_attention(value)


def test_transformers_list_of_attentions_is_quoted_whole() -> None:
    """Where a library's refusal is quoted, a list of choices in it is never cut (it was, at 200 characters)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from kvmagic.model.explain import explain
    from kvmagic.model.tiny import tiny_dir

    with pytest.raises(ValueError) as raised:
        AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(tiny_dir()), attn_implementation="sdpaa")
    said = str(explain("tiny", None, raised.value))
    choices = str(raised.value).partition(". ")[2]
    assert len(str(raised.value)) > 200 and said.endswith(choices) and "…" not in said


def test_a_long_message_is_cut_at_a_sentence_or_a_word_never_inside_a_list() -> None:
    from kvmagic.errors import clipped

    words = "word " * 60
    assert clipped(words.strip()) == ("word " * 39).strip() + "…"
    advice = "Please read the documentation of this library at a place where it says how to fix this."
    assert clipped(" ".join(["It failed.", advice, advice, advice])) == " ".join(["It failed.", advice, advice])
    listed = "It failed. Possible values are " + ", ".join(f"`choice{i}`" for i in range(30)) + "."
    assert clipped(listed) == listed
    assert clipped("It failed. Possible values are " + ", ".join(f"`choice{i}`" for i in range(99))) == "It failed."


# --- the hub -----------------------------------------------------------------------------------------------


def _hub_error(code: str, status: int) -> Exception:
    """The exception huggingface_hub raises for a Hub response carrying ``X-Error-Code: code``."""
    from huggingface_hub.utils import hf_raise_for_status

    url = "https://huggingface.co/someone/some-model/resolve/main/tokenizer_config.json"
    try:
        import httpx2 as http  # huggingface_hub >= 1 (transformers 5)

        response: Any = http.Response(status, headers={"X-Error-Code": code}, request=http.Request("GET", url))
    except ImportError:
        import requests  # huggingface_hub 0.x (transformers 4)

        response = requests.Response()
        response.status_code, response.url = status, url
        response.headers["X-Error-Code"] = code
        response.request = requests.Request("GET", url).prepare()
    try:
        hf_raise_for_status(response)
    except Exception as error:
        return error
    raise AssertionError(f"huggingface_hub raised nothing for {code}")


@pytest.mark.parametrize(
    ("code", "status", "line", "expected"),
    [
        (
            "GatedRepo",
            403,
            "someone/some-model",
            "'someone/some-model' is gated: accept its licence on the Hub, then log in with `hf auth login`",
        ),
        (
            "RepoNotFound",
            404,
            "someone/some-model",
            (
                "'someone/some-model' is neither a local directory nor a model on the Hugging Face Hub: "
                "check the name (the built-in model 'tiny' works offline)"
            ),
        ),
        (
            "RevisionNotFound",
            404,
            "someone/some-model --revision no-such-branch",
            "revision 'no-such-branch' does not exist for 'someone/some-model': check --revision",
        ),
    ],
)
def test_hub_refusals(kvload, monkeypatch, code: str, status: int, line: str, expected: str) -> None:
    import transformers.utils.hub as hub
    from huggingface_hub import errors

    error = _hub_error(code, status)
    kinds = {"GatedRepo": errors.GatedRepoError, "RepoNotFound": errors.RepositoryNotFoundError}
    assert type(error) is kinds.get(code, errors.RevisionNotFoundError)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(hub, "hf_hub_download", refuse)
    monkeypatch.setattr(hub, "snapshot_download", refuse)
    assert kvload(line) == expected


def test_offline_fails_at_once_without_touching_the_network(kvload, shell, monkeypatch) -> None:
    """Offline, a model not in the cache fails without a connection attempt or a back-off wait
    (which is what takes 23-46 s when the network is merely down)."""

    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("tried to reach the network, or to wait for it")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(time, "sleep", no_network)
    previous = shell.magics_manager.registry["KVMagics"].loaded
    message = kvload("someone/not-cached-anywhere")
    assert message == (
        "cannot download 'someone/not-cached-anywhere': the Hugging Face Hub is unreachable (offline, or no network) "
        "and it is not in the local cache; the built-in model 'tiny' works offline"
    )
    # The name failed before any weights: the model already loaded is still there.
    assert shell.magics_manager.registry["KVMagics"].loaded is previous


# --- before any generation ---------------------------------------------------------------------------------


@pytest.fixture
def generate_calls(tiny, monkeypatch) -> list[int]:
    calls: list[int] = []
    original = type(tiny.model).generate

    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(tiny.model), "generate", generate)
    return calls


@pytest.mark.parametrize("chat", [False, True])
def test_one_token_past_the_positions_fails_before_generating(shell, tiny, generate_calls, chat: bool) -> None:
    prompt = "kv " * 100
    if chat:
        messages = [{"role": "user", "content": prompt.strip()}]
        encoded = tiny.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)
        prompt_tokens = len(encoded["input_ids"])
    else:
        prompt_tokens = len(tiny.tokenizer(prompt.strip())["input_ids"])
    limit = tiny.max_positions
    new_tokens = limit - prompt_tokens + 1
    with pytest.raises(UsageError) as caught:
        shell.run_cell_magic("kvbench", f"-n {new_tokens} {'--chat' if chat else ''}", prompt)
    assert said(caught.value) == (
        f"the prompt ({prompt_tokens} tokens) plus {new_tokens} new tokens exceeds the {limit} positions "
        "'tiny' supports: shorten the prompt or lower -n"
    )
    assert generate_calls == []


def test_a_stretched_prompt_past_the_positions_names_its_flag(shell, generate_calls) -> None:
    """With -p the prompt's length is the flag's, so lowering -p is the fix, not shortening the text."""
    with pytest.raises(UsageError) as caught:
        shell.run_cell_magic("kvbench", "-n 4 -p 5000", "hi")
    assert said(caught.value) == (
        "the prompt (5000 tokens) plus 4 new tokens exceeds the 2048 positions 'tiny' supports: lower -p or lower -n"
    )
    assert generate_calls == []


def test_a_megabyte_prompt_fails_before_generating(shell, generate_calls) -> None:
    expected = r"^the prompt \(1048576 tokens\) plus 2 new tokens exceeds the 2048 positions"
    with raises_usage(match=expected):
        shell.run_cell_magic("kvbench", "-n 2", "x" * 2**20)
    assert generate_calls == []
