"""How an option's value is read from the text a user typed: argparse's ``type=`` for each kind."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Mapping, Sequence

from kvmagic.core.lengths import parse_lengths
from kvmagic.errors import KVMagicError

__all__ = [
    "at_least_one",
    "lengths",
    "prompt_apart",
    "read_text",
    "repeat_count",
    "whole_number",
]


def read_text(path: str, what: str, *params: str) -> str:
    """The UTF-8 text of the file at ``path``; ``what`` (a template naming ``params``) says whose it is."""
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except (OSError, UnicodeDecodeError, ValueError) as error:  # ValueError: a NUL in the path
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise KVMagicError(f"cannot read {what} from {path!r}: {reason}", *params) from None


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def at_least_one(text: str) -> int:
    number = whole_number(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return number


def repeat_count(text: str) -> int | str:
    """A whole number of pairs, or ``auto``: as many as the speed-up's interval needs."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or auto, got {text!r}") from None


def lengths(text: str) -> list[int]:
    try:
        return parse_lengths(text)
    except KVMagicError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def prompt_apart(argv: Sequence[str], optional: Mapping[str, Sequence[str]], *, one_word: bool) -> list[str]:
    """``--flag 'The prompt'``: a flag whose word may be left out (``optional``: each such flag, with the words it
    takes) leaves the prompt after it alone (``--`` sets it apart for argparse). The prompt is the last words, none
    of them a flag: one for the command (``one_word``), any number for the one-line ``%kvbench``. A word close to
    one of the flag's own (``chek`` for ``check``) stays the flag's, to be refused as a typo rather than measured as
    a prompt."""
    words = list(argv)
    for index, word in enumerate(words[:-1]):
        rest = words[index + 1 :]
        if word not in optional or "--" in words or any(w.startswith("-") for w in rest):
            continue
        if rest[0] in optional[word] or difflib.get_close_matches(rest[0], optional[word]):
            return words
        if not one_word or len(rest) == 1:
            return [*words[: index + 1], "--", *rest]
    return words
