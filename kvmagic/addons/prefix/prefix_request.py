"""What ``--prefix`` asks for: a number of the prompt's first tokens, or ``marked``, and what it cannot go with.

The warm twins are set against their cold selves in rows of a comparison of strategies, so what only the plain
run's side-by-side view does (``--predict``, ``-r auto``) is refused beside it; a marked prefix is cut at the
prompt's line ``---``, which a chat template would wrap and a stretched prompt repeat.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kvmagic.errors import KVMagicError
from kvmagic.frontends.values import at_least_one

if TYPE_CHECKING:
    from kvmagic.core.spec import BenchSpec

__all__ = ["MARKED", "NAME", "older_spelling", "prefix_length", "refuse_across", "tokens_or_marked"]

NAME = "prefix"  # the request's field, the option's, and the add-on's: its data in a result
MARKED = "marked"  # the text before the prompt's line ``---`` is the shared prefix


def tokens_or_marked(name: str, value: Any) -> int | str | None:
    """The field as the request keeps it: None, a whole number of tokens >= 1, or ``marked`` in any case."""
    if isinstance(value, str) and value.strip().lower() == MARKED:
        return MARKED
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise KVMagicError(f"{{{name}}} must be a number of tokens >= 1 or {MARKED!r}, got {value!r}", name)


def older_spelling(value: Any) -> Any:
    """A request saved before ``--prefix marked`` had that name calls it ``split``; a split now means a model over
    ranks, so only a file reads it so."""
    return MARKED if value == "split" else value


def prefix_length(text: str) -> int | str:
    """The option's word as argparse reads it: a number of the prompt's first tokens, or ``marked``."""
    if text.strip().lower() == MARKED:
        return MARKED
    try:
        return at_least_one(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a number of tokens >= 1 or {MARKED!r}, got {text!r}") from None


def refuse_across(spec: BenchSpec) -> None:
    """Refuse what a reused prefix cannot go with, naming only the fields given, each message one line."""
    prefix = spec.option(NAME)
    if prefix is None:
        return
    for name, given, word in (("predict", spec.addons.get("predict"), ""), ("repeat", spec.repeat == "auto", " auto")):
        if given:
            raise KVMagicError(
                f"{{{name}}}{word} compares the cache off against on: drop it, or drop {{prefix}}", name, "prefix"
            )
    if prefix == MARKED:
        for name, what in (("chat", "would wrap"), ("prompt_tokens", "would stretch")):
            if getattr(spec, name) not in (None, False):
                raise KVMagicError(
                    f"{{prefix}} {MARKED} cuts at the prompt's line ---; {{{name}}} {what} it: use {{prefix}} N",
                    "prefix", name,
                )  # fmt: skip
