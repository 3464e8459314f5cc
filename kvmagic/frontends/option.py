"""What an option of the front ends is: its spelling in each host, its help and what its values take.

The centre's options (:mod:`kvmagic.frontends.options`) and each add-on's are declared with it; the magics, the
command, the help pages and docs/options.md are built from those declarations.
"""

from __future__ import annotations

import argparse
import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from kvmagic.core.spec import check_field, names
from kvmagic.errors import KVMagicError

__all__ = ["Host", "Option"]

Host = Literal["magic", "cli"]


@dataclass(frozen=True)
class Option:
    """One option: its argparse spelling, and whether it is a configurable default.

    ``cli_flags`` spells it differently for the command (``%kvload MODEL`` is ``kvbench --model MODEL``);
    ``hosts`` says where it exists at all (``-o`` and ``-v`` mean nothing outside a notebook).
    ``choices`` validate a configured default of a load option, which argparse never sees (the
    request checks its own fields); ``words`` are what a numeric option also takes in place of a
    number (``-r auto``), or what a flag whose word may be left out (``nargs`` "?") takes; ``const``, what that
    flag means alone.
    ``examples`` are argument texts that keep a run on tiny short, one or two per option (an empty text: the
    flag alone): what the test of every pair of options runs. ``purpose`` names its group on the help pages.
    ``instead`` says what a host that lacks it offers in its place (or a function that says it, asked when said);
    ``turns_on`` names the request's flags it sets where given (a figure that needs the steps).
    """

    flags: tuple[str, ...]
    help: str
    dest: str
    default: Any = None
    type: Callable[[str], Any] | None = None
    action: str | builtins.type[argparse.Action] | None = None
    metavar: str | None = None
    configurable: bool = False
    cli_flags: tuple[str, ...] | None = None
    hosts: tuple[Host, ...] = ("magic", "cli")
    choices: tuple[str, ...] | None = None
    words: tuple[str, ...] = ()
    nargs: str | None = None  # "?": the flag alone, or with one of its words
    const: Any = None
    examples: tuple[str, ...] = ()
    purpose: str = ""
    instead: str | Callable[[], str] = ""
    turns_on: tuple[str, ...] = ()

    def offered(self) -> str:
        """What a host that lacks it offers in its place (``instead``, asked now where it is a function)."""
        return self.instead() if callable(self.instead) else self.instead

    def spelling(self, host: Host) -> tuple[str, ...]:
        return self.cli_flags if host == "cli" and self.cli_flags else self.flags

    def argparse_kwargs(self, host: Host) -> dict[str, Any]:
        """What ``add_argument`` takes, with the default spelled out in the help."""
        kwargs: dict[str, Any] = {"help": self.help + self._default_help(host)}
        if self.spelling(host)[0].startswith("-"):
            kwargs["dest"] = self.dest
        else:
            kwargs["nargs"] = "?"
        if self.nargs == "?":  # a flag with an optional word: alone it means ``const``
            kwargs.update(nargs="?", const=self.const)
        for name in ("type", "action", "metavar"):
            value = getattr(self, name)
            if value is not None:
                kwargs[name] = value
        # A configurable option's flag defaults to None so the configured value can fill it in.
        if self.default is not None and not self.configurable:
            kwargs["default"] = self.default
        return kwargs

    def _default_help(self, host: Host) -> str:
        where = f"%%config KVMagics.{self.dest}" if self.configurable and host == "magic" else ""
        if self.default is None or (self.default is False and not self.configurable):
            return f" ({where})" if where else ""  # no default of its own to show (torch's threads)
        return f" (default: {self.default}{'; ' + where if where else ''})"

    def check(self, value: Any) -> None:
        """Refuse ``value`` as this option's default: the request's own check, or the choices."""
        if self.dest in names():
            check_field(self.dest, value)
        elif self.choices is not None and value not in self.choices:
            raise KVMagicError(f"{{{self.dest}}} must be one of {', '.join(self.choices)}, got {value!r}", self.dest)
