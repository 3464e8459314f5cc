"""The seam keeps its promise (docs/how-it-is-built.md): a capability the centre has never heard of is one add-on
in the registry. Its field reaches the request, its hooks the run, its column the table, its note the notes and its
data the files, with no module of the centre changed; and a request that does not use it sees none of it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import kvmagic
import kvmagic.addons
from kvmagic import BenchmarkResult, KVMagicError, run_benchmark
from kvmagic.core.addon import AddOn, Field
from kvmagic.core.spec import BenchSpec, flag
from kvmagic.frontends.option import Option
from kvmagic.results.columns import Column, column, declare

from .conftest import PROMPT

NAME = "bytes_per_token"


def _per_token(row: Any) -> float:
    m = row.m
    if m is None or not m.kv_bytes:
        return math.nan
    return m.kv_bytes / (row.config.prompt_tokens + row.config.new_tokens)


class BytesPerToken(AddOn):
    """What each position of the cache costs: a column, a note, a little data of its own, and a refusal."""

    name = NAME
    fields = (Field(NAME, False, flag),)
    options = (Option(("--bytes-per-token",), "Add the KV cache's bytes per position.", NAME, action="store_true",
                      examples=("",), purpose="scale"),)  # fmt: skip
    row_columns = declare(Column[Any]("kv_bytes_per_token", "bytes the KV cache holds per position", "B",
                                      read=_per_token))  # fmt: skip
    about = "bytes per position"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def used(self, spec: BenchSpec) -> bool:
        return bool(spec.option(NAME))

    def refuse(self, spec: BenchSpec) -> None:
        if spec.option(NAME) and spec.cache is None:
            raise KVMagicError("{bytes_per_token} reads a comparison's rows: give {cache} too", NAME, "cache")

    def before(self, plan: Any) -> int:
        self.calls.append("before")
        return len(plan.configs)

    def after(self, plan: Any, measurements: list[Any], before: int) -> dict[str, int]:
        self.calls.append("after")
        return {"configurations": before, "measurements": len(measurements)}

    def shows(self, record: Any) -> bool:
        return NAME in record.addons

    def notes(self, record: Any) -> list[str]:
        kept = record.addons.get(NAME)
        return [] if kept is None else [f"bytes per token: {kept['measurements']} rows read"]

    def dump(self, data: Any) -> dict[str, Any]:
        return {NAME: data}

    def load(self, saved: Mapping[str, Any]) -> Any:
        return saved.get(NAME)


@pytest.fixture
def added(monkeypatch) -> BytesPerToken:
    found = BytesPerToken()
    monkeypatch.setattr(kvmagic.addons, "ADDONS", (*kvmagic.addons.ADDONS, found))
    return found


def test_a_new_add_on_reaches_the_request_the_run_the_table_the_notes_and_the_file(tiny, added) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, cache="off,dynamic", bytes_per_token=True)
    assert added.calls == ["before", "after"]
    assert result.addons[NAME] == {"configurations": 1, "measurements": 2}
    table = result.to_dataframe()
    assert "kv_bytes_per_token" in table.columns
    per_token = table.set_index("strategy")["kv_bytes_per_token"]
    dynamic = result.measurement("dynamic")
    assert dynamic.kv_bytes
    assert per_token["dynamic"] == dynamic.kv_bytes / (dynamic.config.prompt_tokens + 2)
    assert "bytes per token: 2 rows read" in result.notes()
    back = BenchmarkResult.from_json(result.to_json())
    assert back.addons[NAME] == result.addons[NAME]
    assert column("kv_bytes_per_token").unit == "B"  # declared once: its unit and meaning travel with it


def test_a_request_without_it_sees_none_of_it(tiny, added) -> None:
    result = run_benchmark(tiny, PROMPT, new_tokens=2, warmup_tokens=0, cache="off,dynamic")
    assert added.calls == [] and NAME not in result.addons
    assert "kv_bytes_per_token" not in result.to_dataframe().columns
    assert not any(note.startswith("bytes per token") for note in result.notes())


def test_what_it_refuses_is_refused_with_the_request(added) -> None:
    with pytest.raises(KVMagicError, match="reads a comparison's rows"):
        BenchSpec.of(bytes_per_token=True)
    assert BenchSpec.of(bytes_per_token=True, cache="off,dynamic").option(NAME) is True


def test_the_guide_names_every_module_of_the_centre_and_every_add_on() -> None:
    """docs/how-it-is-built.md says where each kind of change goes: it names every module a change may touch."""
    root = Path(kvmagic.__file__).parent
    guide = (root.parent / "docs" / "how-it-is-built.md").read_text("utf-8")
    layers = ("frontends", "runner", "model", "results", "measure", "core")
    modules = [p for layer in layers for p in (root / layer).glob("*.py") if p.name != "__init__.py"]
    assert [p.name for p in modules if f"`{p.name}`" not in guide] == []
    folders = [p.name for p in (root / "addons").iterdir() if (p / "__init__.py").exists()]
    assert [name for name in folders if f"`{name}/`" not in guide] == []
    assert [found.name for found in kvmagic.addons.ADDONS if not found.name] == []
