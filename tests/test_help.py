"""The help pages a person reads first: ``%kvbench?``, ``%kvload?`` and ``kvbench --help``.

Each opens with its usage, says what it does, lists the options by purpose within two pages, and then
explains every option; it fits 100 columns, never breaks an option's name, and points to nothing an
installed copy lacks.
"""

from __future__ import annotations

import re

import pytest

from kvmagic.frontends.cli import parser
from kvmagic.frontends.helppage import BENCH_GROUPS
from kvmagic.frontends.options import BENCH_OPTIONS, LOAD_OPTIONS

TWO_PAGES = 50  # lines at 100 columns
_BROKEN = re.compile(r"(^|\s)-{1,2}[\w-]*-$")  # a line ending inside a flag: "--ci-"
_USAGES = {
    "%kvbench": ["usage: %kvbench [options] PROMPT", "%%kvbench [options]"],
    "%kvload": ["usage: %kvload [MODEL] [options]"],
    "kvbench": ["usage: kvbench [options] PROMPT", "kvbench [options] --prompt-file FILE", "... | kvbench [options]"],
}


@pytest.fixture(params=sorted(_USAGES))
def page(request, shell) -> tuple[str, list[str]]:
    name = request.param
    if name == "kvbench":
        return name, parser().format_help().splitlines()
    magic = shell.find_magic(name.lstrip("%"), "cell" if name == "%kvbench" else "line")
    return name, magic.__doc__.splitlines()


def test_it_opens_with_the_usage_then_what_it_does(page) -> None:
    name, lines = page
    usage = _USAGES[name]
    assert all(line.strip().startswith(said) for line, said in zip(lines, usage)), lines[:4]
    assert lines[len(usage)] == "" and lines[len(usage) + 1].startswith(("Time greedy generation", "Load a causal LM"))


def test_it_fits_100_columns_and_never_breaks_a_flag(page) -> None:
    name, lines = page
    assert [line for line in lines if len(line) > 100] == []
    assert [line for line in lines if _BROKEN.search(line.rstrip())] == []
    text = " ".join(lines)
    host = "cli" if name == "kvbench" else "magic"
    options = LOAD_OPTIONS if name in ("%kvload", "kvbench") else ()
    options += BENCH_OPTIONS if name in ("%kvbench", "kvbench") else ()
    for option in options:
        if host in option.hosts:
            assert all(flag in text for flag in option.spelling(host) if flag.startswith("-")), option.dest


def test_it_names_no_file_of_the_source_tree(page) -> None:
    _, lines = page
    assert [line for line in lines if re.search(r"\bdocs/|\w\.md\b", line)] == []


def test_the_options_by_purpose_come_within_two_pages(page) -> None:
    """The whole option table follows; what comes before it is the part a person reads."""
    name, lines = page
    if name == "%kvload":
        assert len(lines) <= TWO_PAGES
        return
    overview = lines.index("options by purpose (each explained below):")
    headings = [i for i, line in enumerate(lines) if line.endswith(":") and not line.startswith(" ")]
    table = next(i for i in headings if i > overview and lines[i] != "examples:")
    assert table <= TWO_PAGES
    listed = lines[overview + 1 : lines.index("", overview)]
    titles = [line[:22].strip() for line in listed if not line[:22].isspace()]
    assert titles[-len(BENCH_GROUPS) :] == [title for title, _ in BENCH_GROUPS]


def test_every_benchmark_option_has_one_purpose() -> None:
    """A new option fails here until BENCH_GROUPS (or an add-on's option, its purpose) gives it a place on the help
    pages, one of BENCH_GROUPS' titles."""
    grouped = [name for _, names in BENCH_GROUPS for name in names]
    purposes = {o.dest: o.purpose for o in BENCH_OPTIONS if o.purpose}
    assert set(purposes.values()) <= {title for title, _ in BENCH_GROUPS}
    assert sorted([*grouped, *purposes]) == sorted({option.dest for option in BENCH_OPTIONS})
