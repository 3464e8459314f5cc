"""--expand: {name} from the notebook, nothing evaluated; without it the cell stays literal."""

from __future__ import annotations

import hashlib

import pytest
from IPython.core.error import UsageError

from kvmagic import KVMagicError
from kvmagic.frontends.expand import expand


class Topic:
    name = "caches"
    _secret = "hidden"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


NS = {"topic": Topic(), "n": 3, "words": {"a": "alpha"}, "items": ["x", "y"]}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("plain text", "plain text"),
        ("about {topic.name}", "about caches"),
        ("{n} and {n!r:>3} and {n:03d}", "3 and   3 and 003"),
        ("{words[a]} {items[1]}", "alpha y"),
        ("{{literal}} {n}", "{literal} 3"),
    ],
)
def test_fields_are_names_and_lookups(template, expected):
    assert expand(template, NS) == expected


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{missing}", "--expand: {missing} names no variable in the notebook: define 'missing', or write {{ and }} for literal braces"),
        ("{n+1}", "--expand: {n+1} is not a variable name: use {name} or {name.attr}, or write {{ and }} for literal braces"),
        ("{__import__('os').getcwd()}", "--expand: {__import__('os').getcwd()} is not a variable name: use {name} or {name.attr}, or write {{ and }} for literal braces"),
        ("{topic._secret}", "--expand: {topic._secret} reaches a private attribute: use public ones only"),
        ("{topic.nothing}", "--expand: cannot look up {topic.nothing}: 'Topic' object has no attribute 'nothing'"),
        ("{0}", "--expand: {0} is not a variable name: use {name} or {name.attr}, or write {{ and }} for literal braces"),
        ("open {n", "--expand: cannot read the cell as a template (expected '}' before end of string): write {{ and }} for literal braces"),
    ],
)  # fmt: skip
def test_anything_else_is_refused_with_the_fix(template, message):
    with pytest.raises(KVMagicError) as caught:
        expand(template, NS)
    assert str(caught.value) == message


def test_expressions_are_never_evaluated():
    calls = []
    namespace = {"record": lambda: calls.append(1) or "ran"}
    for template in ("{record()}", "{[record() for _ in 'x']}", "{record.__call__()}"):
        with pytest.raises(KVMagicError):
            expand(template, namespace)
    assert calls == []


def test_magic_keeps_braces_without_expand_and_substitutes_with_it(shell):
    shell.user_ns["topic"] = "caches"
    literal = shell.run_cell_magic("kvbench", "-n 2 -w 0 -o", "about {topic}")
    expanded = shell.run_cell_magic("kvbench", "-n 2 -w 0 -o --expand", "about {topic}")
    written = shell.run_cell_magic("kvbench", "-n 2 -w 0 -o", "about caches")
    assert literal.facts.prompt_sha256 == sha("about {topic}")
    assert literal.config.prompt_tokens == len("about {topic}")  # tiny's tokenizer is byte-level
    assert expanded.config == written.config
    assert expanded.measurement("off").generated_ids == written.measurement("off").generated_ids
    assert expanded.facts.prompt_sha256 == written.facts.prompt_sha256


def test_expand_as_a_default_and_its_errors_in_the_magic(shell):
    shell.run_line_magic("config", "KVMagics.expand = True")
    try:
        with pytest.raises(UsageError) as caught:
            shell.run_cell_magic("kvbench", "-n 2 -w 0 -o", "about {nothing_here}")
        literal = shell.run_cell_magic("kvbench", "-n 2 -w 0 -o --no-expand", "about {nothing_here}")
    finally:
        shell.run_line_magic("config", "KVMagics.expand = False")
    assert str(caught.value).startswith("--expand: {nothing_here} names no variable in the notebook")
    assert literal.facts.prompt_sha256 == sha("about {nothing_here}")
