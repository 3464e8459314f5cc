"""The one exception kvmagic raises for a user's mistake."""

from __future__ import annotations

__all__ = ["KVMagicError"]


class KVMagicError(Exception):
    """A problem the user can fix; the message says how.

    The plain API raises it; the magics turn it into IPython's ``UsageError`` so a
    notebook shows one line instead of a traceback.
    """
