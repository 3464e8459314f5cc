"""The seam: what an add-on is, and how the centre finds every one without naming any.

The centre is the plain pair (the cache off against on) and a comparison of strategies. Every other capability
(limits, the memory frontier, a prediction, a reused prefix, a split model, models side by side, ...) is an add-on:
a folder of ``kvmagic/addons/`` whose :class:`AddOn` the registry (``kvmagic/addons/__init__.py``) lists. The centre
iterates over :func:`addons` at each joint, as pytest calls its plugins' hooks and optimum-benchmark its backends,
launchers and trackers through one base class each:

- the request: the options an add-on adds (``fields``, ``options``), what it refuses beside them (``refuse``) and
  what a comparison with a baseline reads of them (``recorded``);
- the run: what it does before the first timed run (``before``) and after the last one (``after``), the data a
  result keeps of it, under its ``name``;
- the result: the columns it adds (``row_columns``, ``pair_columns``), its notes (``notes``), what a file keeps of
  its data (``dump``, ``load``), what a result answers for it (``attributes``) and the files it writes of a result
  (``exports``).

A hook's default does nothing, so an add-on overrides only what it needs. Hooks take the objects of the layer that
calls them (the runner's plan, a result's record); they are typed ``Any`` here, below those layers, and each
add-on types its own overrides.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

__all__ = ["REGISTRY", "AddOn", "Field", "addon", "addons"]

REGISTRY = "kvmagic.addons"  # the package whose ``ADDONS`` lists every add-on, in the order their hooks run


@dataclass(frozen=True)
class Field:
    """A request field an add-on adds: its name (a keyword of ``run_benchmark``, a key of a saved request), its
    default, and its check, which returns the value as the request keeps it or raises a
    :class:`~kvmagic.errors.KVMagicError` that says what it takes."""

    name: str
    default: Any
    check: Callable[[str, Any], Any]


class AddOn:
    """One capability beyond the plain pair and a comparison of strategies. Override the hooks it needs."""

    name: str = ""  # its key: in a record's add-on data, and the fields it owns in a file
    fields: tuple[Field, ...] = ()
    options: tuple[Any, ...] = ()  # its :class:`~kvmagic.frontends.options.Option`s: flags, help and examples
    row_columns: tuple[Any, ...] = ()  # its :class:`~kvmagic.results.columns.Column`s of a comparison's rows
    pair_columns: tuple[Any, ...] = ()  # and of the plain run's view
    about: str = ""  # what the columns page says of its columns

    def used(self, spec: Any) -> bool:
        """Whether a request (a :class:`~kvmagic.core.spec.BenchSpec`) asks for it."""
        return False

    def refuse(self, spec: Any) -> None:
        """Raise what its fields cannot go with, in the request's words (each message one line, naming only the
        fields given)."""

    def recorded(self, spec: Any) -> dict[str, Any]:
        """What of its fields a comparison with a baseline reads: a difference there could change the timed runs."""
        return {}

    def before(self, plan: Any) -> Any:
        """Before the first timed run (after the plan, before the warm-up): what ``after`` needs, e.g. a probe."""
        return None

    def after(self, plan: Any, measurements: list[Any], before: Any) -> Any:
        """After the last timed run: the data a result keeps of it (None: nothing)."""
        return None

    def notes(self, record: Any) -> list[str]:
        """What a reader of the table should know of it, the most important first."""
        return []

    def shows(self, record: Any) -> bool:
        """Whether a result's table has its columns."""
        return record.addons.get(self.name) is not None

    def dump(self, data: Any) -> dict[str, Any]:
        """Its data as the top-level fields of a saved result (JSON's types only)."""
        return {}

    def load(self, saved: Mapping[str, Any]) -> Any:
        """Its data from a saved result's top-level fields (those of any format still read); None where it has none."""
        return None

    # The files it writes, by suffix (``.html``): each writes a result (``--save PATH``, ``result.save(PATH)``).
    exports: ClassVar[Mapping[str, Callable[[Any, Path], None]]] = {}
    # What a result answers for it, by attribute (``result.limits``, ``result.choice``), each read from the result
    # (its record): the centre never reads these, a user's notebook and an older caller do.
    attributes: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}


def addons() -> tuple[AddOn, ...]:
    """Every add-on, in the registry's order: the registry is imported on first use, so that no module of the
    centre names an add-on and importing kvmagic stays light."""
    found: tuple[AddOn, ...] = importlib.import_module(REGISTRY).ADDONS
    return found


def addon(name: str) -> AddOn | None:
    """The add-on called ``name``; None where none is."""
    return next((found for found in addons() if found.name == name), None)
