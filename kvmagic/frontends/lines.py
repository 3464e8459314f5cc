"""A magic's argument line and cell body as the user typed them: the words, the options, the prompt.

Every mistake in them is one ``UsageError`` that says the fix; the one-line form's prompt may go unquoted
(``%kvbench -n 8 The KV cache``), so a prompt holding a word like ``-r`` is named when quoting it would fix
the line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from IPython.core.error import UsageError

from kvmagic.errors import one_line
from kvmagic.frontends.options import word_optional
from kvmagic.frontends.values import prompt_apart

__all__ = ["cell_prompt", "parse_line", "split_line"]

_ARGUMENT = re.compile(r"^argument (-[^/:\s]+)[^:]*:")  # argparse's "argument -n/--new-tokens:" as "-n:"


def split_line(line: str) -> list[str]:
    """The words of an argument line as a shell splits them, quotes removed (IPython's own splitter keeps
    them: ``--save "a b.json"`` would name a file with quotes in it); a backslash stays a backslash."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split, lexer.commenters, lexer.escape = True, "", ""
    return list(lexer)


def parse_line(func: Any, line: str, *, prompt_last: bool = False) -> Any:
    """Parse a magic's argument line (``prompt_last``: the one-line form, its prompt after the options); any
    mistake becomes a UsageError pointing at the help."""
    name = func.__name__
    try:
        words = split_line(line)
    except ValueError as error:  # unbalanced quotes
        raise UsageError(f"%{name}: cannot split the arguments: {error}: quote the prompt, or use a cell") from None
    if prompt_last:
        words = prompt_apart(words, word_optional("magic"), one_word=False)
    try:
        return func.parser.parse_args(words)
    except UsageError as error:
        said = _ARGUMENT.sub(r"\1:", one_line(str(error)))
        quoted = _quoted(func.parser, words) if prompt_last else None
        fix = f"a prompt holding a flag must be quoted: %{name} {quoted}" if quoted else f"see %{name}? for the options"
        raise UsageError(f"%{name}: {said} ({fix})") from None


def _quoted(parser: Any, words: Sequence[str]) -> str | None:
    """The line with its prompt quoted, where the prompt holds a word argparse took for a flag and quoting
    it is all the line needs (``-n 8 Explain what -r does``); None otherwise."""
    for start in range(1, len(words)):
        if words[start].startswith("-") or words[start] == "--":
            continue
        prompt = " ".join(words[start:])
        try:
            parser.parse_args([*words[:start], "--", prompt])
        except UsageError:
            continue
        return shlex.join([*words[:start], prompt])
    return None


def cell_prompt(words: Sequence[str], cell: str | None) -> str:
    """The prompt: the cell's body, or the words after the options of the one-line form."""
    if cell is None:
        if not words:
            raise UsageError('%kvbench needs a prompt: %kvbench -n 16 "The KV cache", or a %%kvbench cell')
        return " ".join(words)
    if words:
        raise UsageError(
            f"%%kvbench takes its prompt from the cell's body: move {' '.join(words)!r} into it, or use %kvbench"
        )
    if not cell.strip():
        raise UsageError("the prompt is empty: write the text to generate from (in %%kvbench, the cell body)")
    return cell
