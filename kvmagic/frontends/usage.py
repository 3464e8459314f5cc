"""How a front end words a mistake: one message, wrapped at word boundaries to the terminal's 100 columns.

A terminal wraps a long line wherever the edge falls, mid-word; IPython prints ``UsageError: `` and the
command ``kvbench: error: `` before the message, so the width counts them too. A word longer than a line
(a long path) stays whole.
"""

from __future__ import annotations

import textwrap

__all__ = ["WIDTH", "fitted"]

WIDTH = 100


def fitted(message: str, prefix: str, width: int = WIDTH) -> str:
    """``message`` with line breaks such that ``prefix + message`` fits ``width``; later lines indented by two."""
    lines = textwrap.wrap(
        prefix + message, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )
    return "\n".join(lines)[len(prefix) :]
