"""The prompt as token ids: tokenized once, on the model's input device, at each length asked for."""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING, cast

from kvmagic.core.addon import used_by
from kvmagic.core.lengths import stretch_ids
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from transformers import BatchEncoding

    from kvmagic.core.spec import BenchSpec
    from kvmagic.measure.loaded import LoadedModel

__all__ = ["batched", "check_positions", "encode_prompt", "prompt_inputs", "stretch_prompt", "text_ids"]


def encode_prompt(loaded: LoadedModel, prompt: str, *, chat: bool = False) -> BatchEncoding:
    """Tokenize once, on the model's input device; every run reuses these tensors."""
    _check_prompt(prompt)
    tokenizer = loaded.tokenizer
    if chat:
        if not getattr(tokenizer, "chat_template", None):
            raise KVMagicError(
                f"the tokenizer of {loaded.name!r} has no chat template: drop {{chat}} to use the text as it is", "chat"
            )
        messages = [{"role": "user", "content": prompt}]
        encoded = cast(
            "BatchEncoding",
            tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True, return_tensors="pt"),
        )
    else:
        encoded = tokenizer(prompt, return_tensors="pt", return_token_type_ids=False)
    return encoded.to(loaded.device)


def stretch_prompt(loaded: LoadedModel, prompt: str, tokens: int) -> BatchEncoding:
    """The prompt as exactly ``tokens`` ids: its own tokens repeated (or cut), special tokens kept in place."""
    from transformers import BatchEncoding

    _check_prompt(prompt)
    tokenizer = loaded.tokenizer
    full = tokenizer(prompt, return_token_type_ids=False)["input_ids"]
    body = tokenizer(prompt, add_special_tokens=False, return_token_type_ids=False)["input_ids"]
    prefix, suffix = _special_ends(full, body)
    ids = stretch_ids(prefix, body, suffix, tokens)
    return BatchEncoding({"input_ids": [ids], "attention_mask": [[1] * len(ids)]}, tensor_type="pt").to(loaded.device)


def prompt_inputs(loaded: LoadedModel, prompt: str, spec: BenchSpec) -> tuple[dict[int, BatchEncoding], int]:
    """The inputs of every prompt length the spec asks for, by length, and the prompt's own length; an add-on that
    reads the prompt its own way gives its ids."""
    read = (addon.encoded(loaded, prompt, spec) for addon in used_by(spec))
    natural = next((found for found in read if found is not None), None)
    if natural is None:
        natural = encode_prompt(loaded, prompt, chat=spec.chat)
    natural_tokens = natural["input_ids"].shape[-1]
    found = {natural_tokens: natural}
    if spec.prompt_tokens is not None:
        found = {n: stretch_prompt(loaded, prompt, n) for n in spec.prompt_tokens}
    return found, natural_tokens


def text_ids(loaded: LoadedModel, text: str) -> tuple[int, ...]:
    """A text to follow after the prompt (``quality_text``), as ids: no special tokens, the text alone."""
    ids = tuple(loaded.tokenizer(text, add_special_tokens=False, return_token_type_ids=False)["input_ids"])
    if not ids:
        raise KVMagicError("{quality_text} holds no tokens: give a text to judge quality along", "quality_text")
    return ids


def batched(inputs: BatchEncoding, batch: int) -> BatchEncoding:
    """The same ids in every row: each sequence must then generate the same tokens, which is checked."""
    if batch == 1:
        return inputs
    from transformers import BatchEncoding

    return BatchEncoding({key: value.repeat(batch, 1) for key, value in inputs.items()})


def check_positions(
    loaded: LoadedModel, prompt_tokens: int, tokens: int, what: str = "new_tokens", *, stretched: bool = False
) -> None:
    """Refuse a run whose prompt plus ``tokens`` generated passes the positions the model has; ``stretched``:
    the prompt's length is the one ``prompt_tokens`` asked for, so that is what to lower."""
    limit = loaded.max_positions
    if limit is not None and prompt_tokens + tokens > limit:
        kind = {"warmup_tokens": "warm-up ", "quality_text": "forced "}.get(what, "new ")
        fix = "the" if what == "quality_text" else "lower"  # a text is shortened, a count lowered
        past = f"the prompt ({_tokens(prompt_tokens)}) plus {_tokens(tokens, kind)} exceeds the {limit} positions"
        if stretched:
            raise KVMagicError(f"{past} {loaded.name!r} supports: lower {{prompt_tokens}} or {fix} {{{what}}}",
                               "prompt_tokens", what)  # fmt: skip
        raise KVMagicError(f"{past} {loaded.name!r} supports: shorten the prompt or {fix} {{{what}}}", what)


def _special_ends(full: list[int], body: list[int]) -> tuple[list[int], list[int]]:
    """What the tokenizer adds around the text (a BOS, an EOS), found by locating the text's ids."""
    for start in range(len(full) - len(body) + 1):
        if full[start : start + len(body)] == body:
            return full[:start], full[start + len(body) :]
    return [], []


def visible(prompt: str) -> bool:
    """Whether ``prompt`` holds a character that shows: a prompt of spaces, a byte-order mark or zero-width
    characters alone (Unicode's format characters) looks empty to its reader and is no text to generate from."""
    return any(not character.isspace() and unicodedata.category(character) != "Cf" for character in prompt)


def _check_prompt(prompt: str) -> None:
    """Text to tokenize: not blank, and no lone surrogate (from a bad copy or a broken file), which
    tokenizers reject with a TypeError."""
    if not visible(prompt):
        hidden = sorted({f"U+{ord(c):04X}" for c in prompt if not c.isspace()})
        shown = f" (only {', '.join(hidden)})" if hidden else ""
        raise KVMagicError(f"the prompt is empty{shown}: write the text to generate from")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as error:
        character = prompt[error.start]
        raise KVMagicError(
            f"the prompt holds U+{ord(character):04X} at character {error.start}, half of a surrogate pair "
            "and not text: remove it or paste the text again"
        ) from None


def _tokens(count: int, kind: str = "") -> str:
    return f"{count} {kind}token{'' if count == 1 else 's'}"
