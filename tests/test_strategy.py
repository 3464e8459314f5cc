"""A strategy is a value read once from its spelling: what it is, how it is written back, and that nothing else
in the package reads a spelling."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvmagic.core.compression import PressName
from kvmagic.core.strategy import BACKENDS, DYNAMIC, KNOWN, NAMED, OFF, ByStrategy, Kind, Strategy, parse, parse_list
from kvmagic.errors import KVMagicError

PACKAGE = Path(__file__).resolve().parent.parent / "kvmagic"
READER = PACKAGE / "core" / "strategy.py"


def test_each_spelling_is_read_into_its_parts() -> None:
    assert parse("off") == Strategy("off") and not parse("off").caches
    assert parse("quantized:hqq") == Strategy("quantized", backend="hqq") and parse("quantized:hqq").quantized
    assert parse("press:snapkv:0.5").press == PressName("snapkv", 0.5) and parse("press:snapkv:0.5").kind == "press"
    compiled = parse("static+compile")
    assert compiled.kind == "static" and compiled.compiled and compiled.static and str(compiled) == "static+compile"
    warm = parse("dynamic+prefix")
    assert warm.warm and warm.cold == DYNAMIC and not DYNAMIC.warm
    assert parse("hybrid") == Strategy("implementation", implementation="hybrid")
    # a kind given by its name is that kind: written back and hashed as the one parse() reads
    assert (
        str(Strategy("static")) == "static" and hash(Strategy("off")) == hash(OFF) and Strategy("off").kind is Kind.OFF
    )


def test_a_list_keeps_order_and_expands_a_sweep_of_ratios() -> None:
    found = parse_list("off, dynamic,press:knorm:0.25-0.75+0.25")
    assert [str(s) for s in found] == ["off", "dynamic", "press:knorm:0.25", "press:knorm:0.5", "press:knorm:0.75"]
    assert parse_list([OFF, "static"]) == (OFF, parse("static"))


def test_a_strategy_equals_only_a_strategy_and_a_name_finds_it() -> None:
    """A strategy is no string (``m.strategy == "static"`` is False): a name finds one through ``named()``,
    ``Strategy.of`` or a :class:`ByStrategy`, as a notebook's ``result.skipped["offloaded"]`` does."""
    assert OFF != "off" and DYNAMIC != "dynamic" and Strategy("dynamic") != OFF
    assert Strategy(Kind.OFF) == OFF and Strategy.of("static") == parse("static") and str(OFF) == "off"
    assert OFF.named("off") and not OFF.named("dynamic") and not DYNAMIC.named("dynamic+prefix")
    assert parse("press:knorm:0.50").named("press:knorm:0.5")  # one spelling per ratio
    assert "off" not in {OFF: 1} and {OFF: 1}.get("off") is None  # a plain dict keyed by strategies knows no names
    hqq, knorm = parse("quantized:hqq"), parse("press:knorm:0.5")
    found = ByStrategy({hqq.with_bits(2): 1, OFF: 2, knorm: 3})
    assert found["quantized:hqq"] == 1 and found[hqq.with_bits(2)] == 1 and found["off"] == 2 and found[OFF] == 2
    assert found["press:knorm:.5"] == 3 and "press:knorm:0.50" in found  # a name is read as it is written back
    assert "static" not in found and found.get("static", 4) == 4 and "stat ic" not in found and 5 not in found
    assert hqq not in found and found.get(hqq) is None  # at another width it is another strategy, even by itself
    with pytest.raises(KeyError):
        found["static"]
    with pytest.raises(KeyError):
        found[hqq.with_bits(4)]


def test_a_width_is_part_of_which_strategy_it_is() -> None:
    """Two quantized caches at different widths run differently: they are two strategies, named alike."""
    quanto = parse("quantized:quanto")
    two, four = quanto.with_bits(2), quanto.with_bits(4)
    assert two != four and two != quanto and four != quanto and len({two, four, quanto}) == 3
    assert two == parse("quantized:quanto").with_bits(2) and hash(two) == hash(parse("quantized:quanto").with_bits(2))
    assert str(two) == str(four) == "quantized:quanto" and two.named("quantized:quanto") and four.named(str(quanto))
    # a name read at the width a request chose; a strategy that names its own keeps it
    assert Strategy.of("quantized:quanto", 2) == two and Strategy.of(four, 2) == four and Strategy.of(quanto, 2) == two
    assert Strategy.of("static", 2) == parse("static") and Strategy.of("quantized:quanto") == quanto
    hqq = parse("quantized:hqq")
    assert hqq.with_bits(2).stored_bits == 2 and hqq.stored_bits == BACKENDS["hqq"].bits
    fp8 = parse("quantized:fp8")
    assert fp8.with_bits(2).bits is None and fp8.stored_bits == 8  # fp8 takes no width
    assert DYNAMIC.with_bits(2).bits is None and DYNAMIC.stored_bits == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("quantized", "'quantized' needs a backend: write quantized:quanto or quantized:hqq or quantized:fp8"),
        ("quantized:int3", "unknown quantization backend in 'quantized:int3': use one of quanto, hqq, fp8"),
        ("quantized:hqq:4", "unknown quantization backend in 'quantized:hqq:4': use one of quanto, hqq, fp8"),
        ("stat ic", "unknown cache strategy 'stat ic'"),
        ("press:knorm:0.25-0.5+0.25", "'press:knorm:0.25-0.5\\+0.25' is a sweep of ratios: name one ratio"),
    ],
)
def test_a_spelling_that_names_nothing_says_what_to_write(text: str, message: str) -> None:
    with pytest.raises(KVMagicError, match="^" + message.replace("(", r"\(")):
        parse(text)


def test_an_unknown_strategy_lists_every_spelling() -> None:
    with pytest.raises(KVMagicError) as caught:
        parse("stat ic")
    assert str(caught.value) == (
        "unknown cache strategy 'stat ic': did you mean static? use off, dynamic, static, offloaded, offloaded_static, "
        "quantized:quanto, quantized:hqq, quantized:fp8, press:METHOD:RATIO"
    )


_PRESSES = st.builds(
    lambda method, ratio: f"press:{method}:{ratio / 100:g}",
    st.sampled_from(["snapkv", "knorm", "tova"]),
    st.integers(0, 99),
)
_SPELLINGS = st.builds(
    lambda base, compiled, warm: base + ("+compile" if compiled else "") + ("+prefix" if warm else ""),
    st.one_of(st.sampled_from(KNOWN), _PRESSES, st.sampled_from(["hybrid", "sliding_window"])),
    st.booleans(),
    st.booleans(),
)


@given(_SPELLINGS)
def test_every_spelling_reads_back_as_itself(text: str) -> None:
    strategy = parse(text)
    assert str(strategy) == text and parse(str(strategy)) == strategy and hash(parse(str(strategy))) == hash(strategy)
    assert (
        strategy != text
        and strategy.named(text)
        and Strategy.of(text) == strategy
        and text in ByStrategy({strategy: 1})
    )


def _strategy_literals(path: Path) -> list[str]:
    """Places that read a strategy from its spelling: a strategy compared with a named strategy's spelling, or a
    string test of a suffix or a prefix of the grammar."""
    spelled = {*NAMED, "quantized", "press"}
    grammar = ("+compile", "+prefix", "quantized:", "press:")
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare) and "strategy" in ast.unparse(node):
            sides = [node.left, *node.comparators]
            values = [e for side in sides for e in (side.elts if isinstance(side, (ast.Tuple, ast.List)) else [side])]
            if any(isinstance(e, ast.Constant) and e.value in spelled for e in values):
                found.append(f"{path.name}:{node.lineno} compares with a strategy's spelling")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            texts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if node.func.attr in (
                "startswith",
                "endswith",
                "removesuffix",
                "removeprefix",
                "partition",
                "split",
            ) and any(text.startswith(grammar) for text in texts):
                found.append(f"{path.name}:{node.lineno} reads a strategy's spelling with {node.func.attr}()")
    return found


def test_nothing_but_its_own_module_reads_a_strategys_spelling() -> None:
    found = [place for path in sorted(PACKAGE.rglob("*.py")) if path != READER for place in _strategy_literals(path)]
    assert found == []


def test_the_check_finds_a_spelling_read_elsewhere(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('a = name.endswith("+prefix")\nb = m.strategy == "off"\nc = strategy.kind in ("static", "x")\n')
    assert len(_strategy_literals(sample)) == 3


def test_what_each_kind_of_strategy_is() -> None:
    static, offloaded, offloaded_static = parse("static"), parse("offloaded"), parse("offloaded_static")
    quanto, press, hybrid = parse("quantized:quanto"), parse("press:knorm:0.5"), parse("hybrid")
    assert [s.caches for s in (OFF, DYNAMIC, press, hybrid)] == [False, True, True, True]
    assert [s.static for s in (static, offloaded_static, offloaded, DYNAMIC, hybrid)] == [True, True, False] + [
        False
    ] * 2
    assert [s.offloaded for s in (offloaded, offloaded_static, static, DYNAMIC)] == [True, True, False, False]
    assert quanto.quantized and not DYNAMIC.quantized and not press.quantized
    # lossless: every named cache and a passed-through implementation; not a quantized cache nor a press
    assert [s.lossless for s in (OFF, static, offloaded, hybrid, quanto, press)] == [True] * 4 + [False] * 2
    assert [s.cache_implementation for s in (OFF, DYNAMIC, static, press, quanto, hybrid)] == [
        None,
        "dynamic",
        "static",
        "dynamic",  # a press runs on a dynamic cache
        "quantized",
        "hybrid",
    ]


def test_twins_keep_what_they_already_were() -> None:
    static = parse("static")
    assert str(static.twin(compiled=True)) == "static+compile"
    assert str(static.twin(warm=True)) == "static+prefix" and static.twin(warm=True).cold == static
    assert str(static.twin(compiled=True).twin(warm=True)) == "static+compile+prefix"
    assert static.twin(compiled=True).twin() == parse("static+compile")  # a twin of a twin stays compiled
    assert parse("dynamic+prefix").twin() == parse("dynamic+prefix")
    assert parse("static+compile+prefix").cold == parse("static+compile")
    quanto = parse("quantized:quanto").with_bits(2)
    assert quanto.twin(warm=True).bits == 2 and quanto.twin(warm=True).cold == quanto  # a twin keeps the width
    assert Strategy.of("static") == static and Strategy.of(static) is static


def test_a_width_is_kept_only_where_a_backend_takes_one() -> None:
    quanto = parse("quantized:quanto")
    assert quanto.with_bits(2).bits == 2 and quanto.with_bits(None).bits is None
    assert quanto.stored_bits == 4 and quanto.with_bits(2).stored_bits == 2
    assert parse("static").with_bits(4).bits is None
    # a backend of no width (fp8) keeps its own; a strategy that names no backend stores none
    assert parse("quantized:fp8").with_bits(4).stored_bits == 8
    assert parse("hybrid").stored_bits == 0 and OFF.stored_bits == 0


def test_a_list_reads_strategies_as_given_and_refuses_one_named_twice() -> None:
    assert parse_list(" off , ,dynamic ,") == (OFF, DYNAMIC)
    assert parse_list(["off", "", DYNAMIC]) == (OFF, DYNAMIC)
    assert parse_list([]) == () and parse_list("") == ()
    with pytest.raises(KVMagicError) as caught:
        parse_list("off,static,off")
    assert (caught.value.template, caught.value.params) == (
        "{cache} names off twice: name each strategy once",
        ("cache",),
    )
    with pytest.raises(KVMagicError, match=r"^cache names static twice: name each strategy once$"):
        parse_list([parse("static"), "static"])


def test_suffixes_are_read_and_a_strategy_differs_from_its_twins() -> None:
    assert parse("static+compile+prefix").compiled and parse("static+compile+prefix").warm
    assert parse("static+compile") != parse("static") and parse("dynamic+prefix") != DYNAMIC
    assert parse("press:knorm:0.5+prefix").warm and parse("quantized:hqq+prefix").warm
    assert parse("quantized:hqq+compile").compiled and parse("hybrid+compile").compiled
    assert DYNAMIC != 5 and OFF != None  # noqa: E711


@pytest.mark.parametrize("text", ["static+prefix+compile", "static+compile+prefix", "dynamic+prefix+compile"])
def test_both_suffixes_are_read_in_either_order(text: str) -> None:
    strategy = parse(text)
    assert strategy.compiled and strategy.warm, text  # "+prefix" before "+compile" was once dropped silently
