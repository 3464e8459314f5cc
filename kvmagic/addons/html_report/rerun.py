"""The command that reruns a saved result: its model, load options, request and prompt, spelled with the flags
the option table gives them, as ``kvbench`` takes them and as a notebook's two cells do."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvmagic.frontends.option import Host, Option
    from kvmagic.results.benchmark_record import BenchmarkRecord

__all__ = ["Rerun", "rerun"]

# What a result records of how its model was loaded, by the load option that sets it.
_LOADED = ("dtype", "revision", "attn_implementation", "random_weights")


class Rerun:
    """A saved result's request as words: the command's, and a notebook's ``%kvload`` and ``%%kvbench`` lines.
    ``missing`` says what the words cannot carry (a quality text is a file; a result saved before its prompt was
    kept has none)."""

    def __init__(self, model: str, load: list[str], bench: dict[str, list[str]], prompt: str | None) -> None:
        self.model, self.load, self.bench, self.prompt = model, load, bench, prompt
        self.missing = [] if prompt is not None else ["the prompt (this result was saved without it)"]

    @property
    def command(self) -> str:
        words = ["kvbench", "-m", self.model, *self.load, *self.bench["cli"], self.prompt or "PROMPT"]
        return shlex.join(words)

    @property
    def cell(self) -> str:
        """The notebook's two cells, the prompt as the second one's body."""
        load = shlex.join(["%kvload", self.model, *self.load])
        bench = " ".join(["%%kvbench", *map(shlex.quote, self.bench["magic"])]).rstrip()
        return f"{load}\n\n{bench}\n{self.prompt if self.prompt is not None else 'PROMPT'}"


def rerun(result: BenchmarkRecord) -> Rerun:
    """The words that rerun ``result``: every request field that differs from its default, spelled as each host
    spells its option (the command's ``--no-chat``, the notebook's ``-v``...)."""
    from kvmagic.core.spec import BenchSpec
    from kvmagic.frontends.options import BENCH_OPTIONS, LOAD_OPTIONS

    request, defaults = result.spec.to_dict(), BenchSpec().to_dict()
    bench: dict[str, list[str]] = {}
    for host in ("cli", "magic"):
        given = [(o, request[o.dest]) for o in BENCH_OPTIONS if o.dest in request and host in o.hosts]
        bench[host] = [w for o, value in given if value != defaults.get(o.dest) for w in _words(o, value, host)]
    loaded = {name: result.metadata.get(name) for name in _LOADED}
    load = [
        w for o in LOAD_OPTIONS if loaded.get(o.dest) not in (None, False) for w in _words(o, loaded[o.dest], "cli")
    ]
    return Rerun(result.model, load, bench, result.facts.prompt)


def _words(option: Option, value: Any, host: Host) -> list[str]:
    """``option`` set to ``value``, as ``host`` types it."""
    flag = option.spelling(host)[0]  # the short flag where there is one, as a user types it
    if option.action == "store_true":
        return [flag] if value else []
    if option.action is argparse.BooleanOptionalAction:
        long = option.spelling(host)[-1]
        return [long if value else f"--no-{long.removeprefix('--')}"]
    if option.nargs == "?" and value == option.const:
        return [flag]
    if option.dest == "quality_text":  # a text, given as a file: the report holds it
        return [flag, "quality.txt"]
    return [flag, _value(value)]


def _value(value: Any) -> str:
    """A field's value as its flag takes it: a list of lengths or strategies comma-separated."""
    return ",".join(map(str, value)) if isinstance(value, Sequence) and not isinstance(value, str) else str(value)
