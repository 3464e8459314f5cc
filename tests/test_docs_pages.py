"""The reference pages in docs/ are generated from the code; a page that no longer says what the code does fails."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from kvmagic.addons.frontier.frontier_table import FRONTIER
from kvmagic.results.columns import Column
from kvmagic.results.report import additions
from kvmagic.results.rows import PAIR, ROWS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def pages(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    return importlib.import_module("docs_pages")


def test_the_committed_pages_are_what_the_code_generates_now(pages: ModuleType) -> None:
    stale = [name for name, page in pages.PAGES.items() if (ROOT / "docs" / name).read_text(encoding="utf-8") != page()]
    assert stale == [], f"docs/{', docs/'.join(stale)} differ from the code: run `{pages.REGENERATE}` and commit them"


def test_every_column_of_every_table_is_on_the_page(pages: ModuleType) -> None:
    text = pages.columns_page()
    added = [c for a in additions() for c in (*a.row_columns, *a.pair_columns)]
    for column in [*PAIR, *ROWS, *added, *FRONTIER]:
        assert f"| `{column.name}`" in text, f"{column.name} is declared but on no page"


def test_a_column_without_a_meaning_stops_the_generator(pages: ModuleType) -> None:
    """A column declared without its meaning stops the generator, which says where it goes."""
    with pytest.raises(SystemExit, match=r"no meaning for column\(s\) no_such_column: give its declaration one"):
        pages._column_rows((PAIR[0], Column("no_such_column", "")))


def test_every_option_is_on_the_options_page(pages: ModuleType) -> None:
    from kvmagic.frontends.options import BENCH_OPTIONS, LOAD_OPTIONS

    text = pages.options_page()
    spelled = [o.flags[-1] if o.flags[-1].startswith("-") else o.metavar for o in (*LOAD_OPTIONS, *BENCH_OPTIONS)]
    missing = [flag for flag in spelled if f"`{flag}" not in text]
    assert missing == []
