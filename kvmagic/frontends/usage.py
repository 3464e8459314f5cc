"""How a front end words a mistake or a stop: one message, wrapped at word boundaries to 100 columns.

A terminal wraps a long line wherever the edge falls, mid-word; IPython prints ``UsageError: `` and the
command ``kvbench: error: `` before the message, so the width counts them too. A word longer than a line
(a long path) stays whole.
"""

from __future__ import annotations

import textwrap

__all__ = ["WIDTH", "Interrupted", "fitted"]

WIDTH = 100


def fitted(message: str, prefix: str, width: int = WIDTH) -> str:
    """``message`` with line breaks such that ``prefix + message`` fits ``width``; later lines indented by two."""
    lines = textwrap.wrap(
        prefix + message, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )
    return "\n".join(lines)[len(prefix) :]


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run with nothing finished to show. It is still an interrupt (a notebook's "run all"
    stops there), but IPython shows it as its one line: the frames of torch where the signal landed are no
    mistake of the user's to read."""

    def _render_traceback_(self) -> list[str]:
        return [f"KeyboardInterrupt: {self}"]
