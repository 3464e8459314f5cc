"""The choice: which strategy to choose at a comparison's largest configuration, reasoned in a paragraph
(``result.choice()``), and where one strategy overtakes another, in a note.

It adds no option and runs nothing: it reads a comparison's rows (and the memory frontier's reach, where
``--frontier`` predicted one). :mod:`~kvmagic.addons.choice.crossovers` fits each strategy's time along the sweep
and finds where the curves cross; :mod:`~kvmagic.addons.choice.reasoning` weighs the rows and says it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from kvmagic.addons.choice.reasoning import choice
from kvmagic.core.addon import AddOn
from kvmagic.errors import KVMagicError

if TYPE_CHECKING:
    from kvmagic.results.benchmark_record import BenchmarkRecord

__all__ = ["ADDON"]


class _Choice(AddOn):
    name = "choice"
    # ``result.choice()``: the paragraph's reasoning, as data; ``str()`` of it is the paragraph.
    attributes: ClassVar[Mapping[str, Callable[[Any], Any]]] = {"choice": lambda record: partial(choice, record)}

    def notes(self, record: BenchmarkRecord) -> list[str]:
        """Where one strategy overtakes another along a sweep, one line; the fits and their checks are the
        paragraph's."""
        try:
            found = choice(record)
        except KVMagicError:
            return []
        if not found.crossovers:
            return []
        said = "; ".join(f"{c.overtaker} overtakes {c.overtaken} from {c.context} tokens" for c in found.crossovers)
        return [f"crossovers, from fits checked at {found.crossovers[0].checked_at} tokens: {said} (result.choice())"]


ADDON = _Choice()
