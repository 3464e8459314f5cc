"""The one exception kvmagic raises for a user's mistake."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence

__all__ = ["KVMagicError", "clipped", "did_you_mean", "one_line"]

# A sentence that offers choices: "The only possible arguments are `eager`, `sdpa`, ...", "use one of a, b, c".
_CHOICES = re.compile(
    r"\b(one of|possible|valid|choices?|options?|supported|available|accepted|allowed|expected)\b", re.I
)
_LIST_MOST = 4  # times ``limit``: a list longer still is left out whole

# How the plain API names what a front end offers as an option with a value.
_API_NAMES = {"save": "result.save(PATH)"}


def one_line(text: str) -> str:
    """``text`` with every character a terminal would not print as itself (a newline in an argument echoed back,
    a control character) written as its escape, so that an error stays the one line it is meant to be."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def did_you_mean(word: str, choices: Sequence[str], cutoff: float = 0.6) -> str:
    """ "did you mean X? " for the one of ``choices`` closest to ``word`` (a typo), or "" where none is close."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return f"did you mean {close[0]}? " if close else ""


def clipped(line: str, limit: int = 200) -> str:
    """``line`` (a library's message, quoted in one of ours) cut to about ``limit`` characters at a sentence's end.

    A sentence that lists choices is never cut: it stays whole, even past ``limit``, or goes whole. Only a first
    sentence longer than ``limit`` that lists none is cut, at a word, and ends in "…".
    """
    if len(line) <= limit:
        return line
    first, *rest = re.split(r"(?<=[.!?])\s+", line.strip())
    if len(first) > limit and not _lists_choices(first):
        return first[: limit - 1].rsplit(" ", 1)[0] + "…"
    kept = first
    for sentence in rest:
        longer = f"{kept} {sentence}"
        if len(longer) > limit and not (_lists_choices(sentence) and len(longer) <= _LIST_MOST * limit):
            break
        kept = longer
    return kept


def _lists_choices(sentence: str) -> bool:
    return sentence.count(",") >= 2 and _CHOICES.search(sentence) is not None


class KVMagicError(Exception):
    """A problem the user can fix; the message says how.

    The plain API raises it; the magics turn it into IPython's ``UsageError`` so a notebook
    shows one line instead of a traceback. A message that names parameters is a template with
    ``{name}`` fields listed in ``params``: the API spells them as parameter names, and a front
    end as its own flags (``spelled``), so neither speaks the other's language. Only those fields
    are filled in: any other brace (a model path, a prompt quoted back) stays as it is.
    """

    def __init__(self, message: str, *params: str) -> None:
        self.template = message
        self.params = params
        super().__init__(self.spelled(lambda name: _API_NAMES.get(name, name)))

    def spelled(self, spell: Callable[[str], str]) -> str:
        """The message with each parameter written as ``spell`` names it."""
        if not self.params:
            return self.template
        fields = re.compile("|".join(re.escape("{" + name + "}") for name in self.params))
        return fields.sub(lambda field: spell(field[0][1:-1]), self.template)
