"""The embedded offline model: EXAONE-4 at toy size, seeded weights, a byte-level tokenizer.

``tiny`` lets kvmagic run where no model hub is reachable (tests, CI, a laptop on a
plane). It is built on first use and cached on disk, one directory per transformers
version, because a directory saved by transformers 5 does not load correctly in 4.x.
Weights come from a generator seeded by each parameter's name, so every version
builds the same numbers and greedy generation gives the same ids.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import Exaone4Config, Exaone4ForCausalLM, PreTrainedTokenizerFast

__all__ = ["TINY_NAME", "cache_root", "tiny_dir"]

TINY_NAME = "tiny"
_SPEC_VERSION = 1  # bump when the config, weights or tokenizer below change

SPECIAL_TOKENS = (
    "[PAD]",
    "[BOS]",
    "[|endofturn|]",
    "[|system|]",
    "[|user|]",
    "[|assistant|]",
    "<think>",
    "</think>",
)
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2

HIDDEN_SIZE = 256
INTERMEDIATE_SIZE = 1024
NUM_LAYERS = 4
NUM_HEADS = 8
NUM_KV_HEADS = 2
MAX_POSITIONS = 2048
ROPE_THETA = 1_000_000.0
SEED = 20250715

# EXAONE-4's chat format, thinking disabled, as in the real model's template.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "[|{{ message['role'] }}|]\n{{ message['content'] }}[|endofturn|]\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}[|assistant|]\n<think>\n\n</think>\n\n{% endif %}"
)


def cache_root() -> Path:
    """Where kvmagic keeps what it builds: ``$KVMAGIC_CACHE``, else the XDG cache."""
    explicit = os.environ.get("KVMAGIC_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "kvmagic"


def tiny_dir() -> Path:
    """Return the directory of the tiny model for the installed transformers, building it once."""
    import transformers

    target = cache_root() / f"tiny-v{_SPEC_VERSION}-transformers-{transformers.__version__}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tiny-", dir=target.parent))
    try:
        _build_model().save_pretrained(staging, safe_serialization=True)
        _build_tokenizer().save_pretrained(staging)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "config.json").is_file():  # not a concurrent build that won
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for every byte, in byte order (ByteLevel's own table)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table: dict[int, str] = {}
    extra = 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + extra)
            extra += 1
    return table


def vocab() -> dict[str, int]:
    """Special tokens first, then one token per byte."""
    tokens = [*SPECIAL_TOKENS, *_bytes_to_unicode().values()]
    return {token: index for index, token in enumerate(tokens)}


def _build_tokenizer() -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(vocab=vocab(), merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=SPECIAL_TOKENS[PAD_ID],
        bos_token=SPECIAL_TOKENS[BOS_ID],
        eos_token=SPECIAL_TOKENS[EOS_ID],
        additional_special_tokens=list(SPECIAL_TOKENS[3:]),
        model_input_names=["input_ids", "attention_mask"],
        chat_template=CHAT_TEMPLATE,
        model_max_length=MAX_POSITIONS,
    )


def _config() -> Exaone4Config:
    from transformers import Exaone4Config

    # rope_theta is spelled the same in both transformers lines, but 5.x no longer declares it: pass it through.
    rope: dict[str, Any] = {"rope_theta": ROPE_THETA}
    return Exaone4Config(
        **rope,
        vocab_size=len(vocab()),
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        sliding_window=None,
        layer_types=["full_attention"] * NUM_LAYERS,
        tie_word_embeddings=True,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
    )


def _build_model() -> Exaone4ForCausalLM:
    import torch
    from transformers import Exaone4ForCausalLM

    model = Exaone4ForCausalLM(_config())
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() == 1:  # RMSNorm gains
                param.fill_(1.0)
                continue
            generator = torch.Generator().manual_seed(SEED ^ zlib.crc32(name.encode()))
            std = param.shape[-1] ** -0.5
            param.copy_(torch.randn(param.shape, generator=generator) * std)
    if model.generation_config is not None:  # always built for a causal LM; 4.55 types it as optional
        model.generation_config.do_sample = False
    built: Exaone4ForCausalLM = model.eval()
    return built
