"""How an option's value is read from the text a user typed: argparse's ``type=`` for each kind."""

from __future__ import annotations

import argparse

from kvmagic.core.lengths import parse_lengths
from kvmagic.core.spec import FRONTIER_MODES
from kvmagic.errors import KVMagicError

__all__ = ["at_least_one", "frontier_mode", "lengths", "repeat_count", "whole_number"]


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


def frontier_mode(text: str) -> str:
    """``--frontier check``: the one word it takes."""
    if text not in FRONTIER_MODES:  # argparse reads the bare flag's "predict" through here too
        raise argparse.ArgumentTypeError(f"expected nothing or 'check', got {text!r}")
    return text


def repeat_count(text: str) -> int | str:
    """A whole number of pairs, or ``auto``: as many as the speed-up's interval needs."""
    return "auto" if text.strip().lower() == "auto" else whole_number(text)


def lengths(text: str) -> list[int]:
    try:
        return parse_lengths(text)
    except KVMagicError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
