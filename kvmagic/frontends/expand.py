"""``%%kvbench --expand``: put notebook values into the prompt without running any code.

IPython's own ``var_expand`` evaluates whatever sits between the braces (``{open('x').read()}``
would run), which a prompt template has no need for. Here a field is only a name from the user
namespace, optionally followed by ``.attr`` or ``[key]`` lookups, with the usual ``!r`` and
``:spec`` of ``str.format``; ``{{`` and ``}}`` are literal braces.
"""

from __future__ import annotations

import _string  # the parser str.format itself uses for "name.attr[key]"
import string
from collections.abc import Mapping, Sequence
from typing import Any

from kvmagic.errors import KVMagicError

__all__ = ["expand"]

_BRACES = "write {{ and }} for literal braces"


class _NamespaceFormatter(string.Formatter):
    """``str.format`` over a namespace, refusing positional fields and private attributes."""

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, str]:
        first, rest = _string.formatter_field_name_split(field_name)
        if not isinstance(first, str) or not first.isidentifier():
            raise KVMagicError(
                f"--expand: {{{field_name}}} is not a variable name: use {{name}} or {{name.attr}}, or {_BRACES}"
            )
        if first not in kwargs:
            raise KVMagicError(
                f"--expand: {{{field_name}}} names no variable in the notebook: define {first!r}, or {_BRACES}"
            )
        value = kwargs[first]
        for is_attribute, key in rest:
            if is_attribute and key.startswith("_"):
                raise KVMagicError(f"--expand: {{{field_name}}} reaches a private attribute: use public ones only")
            try:
                value = getattr(value, key) if is_attribute else value[key]
            except (AttributeError, LookupError, TypeError) as error:
                raise KVMagicError(f"--expand: cannot look up {{{field_name}}}: {error}") from None
            except Exception as error:  # a user's property or __getitem__ may raise anything
                raise KVMagicError(f"--expand: cannot look up {{{field_name}}}: {_said(error)}") from None
        return value, first


def expand(text: str, namespace: Mapping[str, Any]) -> str:
    """``text`` with each ``{name}`` field replaced by its value in ``namespace``; nothing is evaluated."""
    try:
        return _NamespaceFormatter().vformat(text, (), namespace)
    except KVMagicError:
        raise
    except (ValueError, IndexError) as error:  # unmatched braces, a bad format spec
        raise KVMagicError(f"--expand: cannot read the cell as a template ({error}): {_BRACES}") from None
    except Exception as error:  # a value's own __format__ or __str__ raised
        raise KVMagicError(f"--expand: a value could not be written into the prompt: {_said(error)}") from None


def _said(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
