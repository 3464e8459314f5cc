"""``--prefix marked``: the prompt's shared prefix is the text before its line ``---``, and the line is no part of
the prompt.

A chat's system prompt is text, not a count of tokens: the line says where it ends. The two parts are tokenized
apart so that the cut falls exactly there, whatever the tokenizer would merge across it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmagic.addons.prefix.prefix_request import MARKED
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from transformers import BatchEncoding

    from kvmagic.measure.loaded import LoadedModel

__all__ = ["cut_prompt", "marked_parts"]


def cut_prompt(loaded: LoadedModel, prompt: str) -> tuple[BatchEncoding, int]:
    """The prompt without its line ``---``, as ids, and how many of them come before it: the text before the line
    tokenized as a prompt is, the text after it appended without special tokens."""
    from transformers import BatchEncoding

    before, after = marked_parts(prompt)
    tokenizer = loaded.tokenizer
    head = tokenizer(before, return_token_type_ids=False)["input_ids"]
    rest = tokenizer(after, add_special_tokens=False, return_token_type_ids=False)["input_ids"]
    ids = [*head, *rest]
    encoded = BatchEncoding({"input_ids": [ids], "attention_mask": [[1] * len(ids)]}, tensor_type="pt")
    return encoded.to(loaded.device), len(head)


def marked_parts(prompt: str) -> tuple[str, str]:
    """The text before the prompt's line ``---`` and the text after it, each holding text; refused otherwise (before
    any model is asked: a launch over ranks checks it here too)."""
    lines = prompt.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if line.strip() == "---"), None)
    if at is None or not "".join(lines[:at]).strip() or not "".join(lines[at + 1 :]).strip():
        raise KVMagicError(
            f"{{prefix}} {MARKED} needs a line --- between the shared prefix and the rest of the prompt, with "
            "text on both sides: add one, or give {prefix} a number of tokens",
            "prefix",
        )
    return "".join(lines[:at]), "".join(lines[at + 1 :])
