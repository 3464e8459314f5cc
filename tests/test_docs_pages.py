"""The reference pages in docs/ are generated from the code; a page that no longer says what the code does fails."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from kvmagic.results.columns import FRONTIER_MEANINGS, MEANINGS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def pages(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    return importlib.import_module("docs_pages")


def test_the_committed_pages_are_what_the_code_generates_now(pages: ModuleType) -> None:
    stale = [name for name, page in pages.PAGES.items() if (ROOT / "docs" / name).read_text(encoding="utf-8") != page()]
    assert stale == [], f"docs/{', docs/'.join(stale)} differ from the code: run `{pages.REGENERATE}` and commit them"


def test_every_column_of_every_table_has_a_meaning(pages: ModuleType) -> None:
    """A column added to a table without its meaning stops the generator with the file to add it to."""
    text = pages.columns_page()
    for column in [*MEANINGS, *FRONTIER_MEANINGS]:
        assert f"| `{column}`" in text, f"{column} is described but in no table: drop it from columns.py"


def test_a_column_without_a_meaning_names_the_registry(pages: ModuleType) -> None:
    with pytest.raises(SystemExit, match=r"kvmagic/results/columns\.py"):
        pages._column_rows(("prompt_tokens", "no_such_column"), MEANINGS)


def test_every_option_is_on_the_options_page(pages: ModuleType) -> None:
    from kvmagic.frontends.options import BENCH_OPTIONS, LOAD_OPTIONS

    text = pages.options_page()
    spelled = [o.flags[-1] if o.flags[-1].startswith("-") else o.metavar for o in (*LOAD_OPTIONS, *BENCH_OPTIONS)]
    missing = [flag for flag in spelled if f"`{flag}" not in text]
    assert missing == []
