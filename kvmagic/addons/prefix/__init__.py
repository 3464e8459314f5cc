"""``--prefix N|marked``: beside each strategy that caches, its warm twin (``dynamic+prefix``) starts every run from
a copy of the cache of the prompt's first tokens, built once per configuration, untimed, as a chat keeps its system
prompt's; the table sets each twin against its cold self.

The warm twin itself is a strategy variant of the centre (``Strategy.warm``, ``Setup.start``); this add-on asks for
it and feeds it: :mod:`~kvmagic.addons.prefix.prefix_request` holds the request,
:mod:`~kvmagic.addons.prefix.marked_prompt` the prompt's cut at its line ``---``,
:mod:`~kvmagic.addons.prefix.prefix_cache` the prefix's cache and its copies, and
:mod:`~kvmagic.addons.prefix.prefix_table` what a result keeps and shows. The prefix's cache needs torch: the
hook that builds it imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from kvmagic.addons.prefix.marked_prompt import cut_prompt, marked_parts
from kvmagic.addons.prefix.prefix_request import (
    MARKED,
    NAME,
    older_spelling,
    prefix_length,
    refuse_across,
    tokens_or_marked,
)
from kvmagic.addons.prefix.prefix_table import PREFIX_ROWS, prefix_notes, reused
from kvmagic.core.addon import AddOn, Field
from kvmagic.errors import KVMagicError
from kvmagic.frontends.option import Option

if TYPE_CHECKING:
    from transformers import BatchEncoding

    from kvmagic.core.spec import BenchSpec
    from kvmagic.measure.loaded import LoadedModel
    from kvmagic.measure.strategies import Setup
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement
    from kvmagic.runner.plan import Plan

__all__ = ["ADDON"]


class _Prefix(AddOn):
    name = NAME
    fields = (Field(NAME, None, tokens_or_marked, saved=older_spelling),)
    options = (
        Option(("--prefix",), "Reuse the cache of the prompt's first N tokens (marked: the text before the prompt's "
               "line ---), as a chat keeps a system prompt's: beside each strategy that caches, its warm twin "
               "(dynamic+prefix) starts every run from a copy of that cache, built once, untimed; the table adds "
               "time to first token and total time warm against cold.", NAME, type=prefix_length,
               metavar="N|marked", examples=("4", "marked"), purpose="what to measure"),
    )  # fmt: skip
    row_columns = PREFIX_ROWS
    about = "which alone compares `off`, `dynamic` and `dynamic+prefix` in this table"
    attributes: ClassVar[Mapping[str, Callable[[Any], Any]]] = {"prefix_tokens": reused}

    def used(self, spec: BenchSpec) -> bool:
        return spec.option(NAME) is not None

    def refuse(self, spec: BenchSpec) -> None:
        refuse_across(spec)

    def check_prompt(self, spec: BenchSpec, prompt: str) -> None:
        if spec.option(NAME) == MARKED:
            marked_parts(prompt)

    def compares(self, fields: Mapping[str, Any]) -> bool:
        """A warm twin is one more strategy: its rows sit beside its cold self's."""
        return fields.get(NAME) is not None

    def recorded(self, spec: BenchSpec) -> dict[str, Any]:
        return {NAME: spec.option(NAME)} if self.used(spec) else {}

    def encoded(self, loaded: LoadedModel, prompt: str, spec: BenchSpec) -> BatchEncoding | None:
        """A marked prompt, cut at its line; a prefix of N tokens leaves the prompt as the centre reads it."""
        return cut_prompt(loaded, prompt)[0] if spec.option(NAME) == MARKED else None

    def strategies(self, spec: BenchSpec, setups: list[Setup]) -> list[Setup]:
        """A warm twin of each strategy that caches, after all of them."""
        from kvmagic.addons.prefix.prefix_cache import warm_twin

        return [*setups, *(warm_twin(s) for s in setups if s.caches)]

    def before(self, plan: Plan) -> int:
        """How many of the prompt's first tokens are reused; refused where that leaves none of the shortest prompt
        after them."""
        asked = plan.spec.option(NAME)
        tokens: int = cut_prompt(plan.loaded, plan.prompt)[1] if asked == MARKED else asked
        shortest = min(plan.inputs)
        if tokens >= shortest:
            left = f"{{prefix}} {tokens} leaves no token of the {shortest}-token prompt after it"
            if plan.spec.prompt_tokens is not None:  # the shortest length asked for is the prompt's
                raise KVMagicError(f"{left}: give {{prefix}} fewer tokens, or {{prompt_tokens}} a longer prompt",
                                   "prefix", "prompt_tokens")  # fmt: skip
            raise KVMagicError(f"{left}: give fewer tokens than the prompt has", "prefix")
        return tokens

    def starting(self, plan: Plan, inputs: BatchEncoding, setups: list[Setup], before: int) -> list[Setup]:
        """Each warm twin starting from its copy of the prefix's cache, built here for these inputs; a twin whose
        cache cannot be built or copied is skipped."""
        from kvmagic.addons.prefix.prefix_cache import build_prefix

        prefix = build_prefix(plan, inputs, before)
        return prefix.started([s for s in setups if s.strategy not in plan.skipped])

    def after(self, plan: Plan, measurements: list[Measurement], before: int) -> int:
        return before

    def notes(self, record: BenchmarkRecord) -> list[str]:
        return prefix_notes(record)

    def facts(self, data: int) -> dict[str, Any]:
        return {"prefix_tokens": data}

    def dump(self, data: int | None) -> dict[str, Any]:
        """The run's facts kept the number before the add-ons did: a file still keeps it there."""
        return {"facts": {"prefix_tokens": data}}

    def load(self, saved: Mapping[str, Any]) -> int | None:
        found: int | None = (saved.get("facts") or {}).get("prefix_tokens")
        return found


ADDON = _Prefix()
