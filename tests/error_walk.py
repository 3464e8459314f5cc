"""The walk over the package's refusals below the front ends (tests/test_error_templates.py checks them).

It reads the package's source, not a list: every ``KVMagicError(...)`` outside ``kvmagic/frontends/``,
and every call of a function that hands its message on to one (``with_memory_advice(run, advice, *params)``),
is found and its message read as text (module constants filled in, a message held in a variable followed to
its assignment), with its ``{fields}`` and its parameters. What it cannot read it lists, for the tests to
refuse, so no new raise slips past unread.
"""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parent.parent / "kvmagic"
_SLOT = "\x00"  # a value only known at run time


class Unreadable(Exception):
    """A message the walk cannot follow to its text."""


@dataclass(frozen=True)
class Site:
    """One refusal as written: where, its text (a slot for each run-time value), its fields and parameters."""

    where: str
    text: str
    fields: frozenset[str]
    params: frozenset[str]
    via: str  # KVMagicError, or the function that raises it with this message


FRONT_END_PARTS = ("_request", "_launch", "_rank")  # an add-on's modules that are a front end's


def below_the_front_ends() -> dict[str, str]:
    """Module name -> source, for every module of the package outside the front ends: ``kvmagic.frontends``, and an
    add-on's part of them (its ``*_request`` module: what a front end's request refuses of it; a launcher's
    ``*_launch`` and ``*_rank``: how a front end starts it, and the command as one of its processes)."""
    paths = [
        p for p in sorted(PACKAGE.rglob("*.py"))
        if p.relative_to(PACKAGE).parts[0] != "frontends"
        and not (p.relative_to(PACKAGE).parts[0] == "addons" and p.stem.endswith(FRONT_END_PARTS))
    ]  # fmt: skip
    return {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts): p.read_text("utf-8") for p in paths}


def front_end_flags() -> set[str]:
    """Every flag of the two magics and the command, read from their own parsers."""
    from kvmagic.frontends.cli import parser
    from kvmagic.frontends.magics import KVMagics

    parsers = [parser(), KVMagics.kvload.parser, KVMagics.kvbench.parser]
    return {flag for p in parsers for action in p._actions for flag in action.option_strings}


def front_end_words(text: str, flags: set[str]) -> list[str]:
    """What in ``text`` only a front end may say: a long flag, a declared short flag, a magic, a trait."""
    short = "|".join(re.escape(f) for f in sorted(flags) if not f.startswith("--"))
    found = re.findall(r"(?<![\w-])--[a-zA-Z][\w-]*", text)
    found += re.findall(rf"(?<![\w-])(?:{short})(?![\w-])", text) if short else []
    return found + re.findall(r"%+kv(?:load|bench)\b|\bKVMagics\.", text)


def _name(call: ast.Call) -> str:
    return getattr(call.func, "id", None) or getattr(call.func, "attr", "")


def _calls(tree: ast.AST, names: set[str]) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n) in names]


def _forwarders(trees: list[ast.Module]) -> dict[str, int]:
    """Functions that raise ``KVMagicError(message, *params)`` with their own argument: name -> its position."""
    found = {}
    for tree in trees:
        for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            arguments = [a.arg for a in function.args.args]
            for call in _calls(function, {"KVMagicError"}):
                message = call.args[0] if call.args else None
                if isinstance(message, ast.Name) and message.id in arguments:
                    found[function.name] = arguments.index(message.id)
    return found


class _Reader:
    """One module's messages as text: literals, f-strings, sums, and names bound in the function or module."""

    def __init__(self, tree: ast.Module, module: str) -> None:
        self.tree = tree
        real = module.startswith("kvmagic.") and not module.endswith("__main__")  # that one would run the command
        self.namespace: dict[str, Any] = vars(importlib.import_module(module)) if real else {}
        self.parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def function(self, node: ast.AST) -> ast.FunctionDef | None:
        while node is not None and not isinstance(node, ast.FunctionDef):
            node = self.parents.get(node)
        return node

    def bound(self, name: str, at: ast.AST) -> ast.expr | None:
        """The value last assigned to ``name`` before ``at`` in its function, else at the module's top."""
        function = self.function(at)
        for nodes in ([*ast.walk(function)] if function else [], self.tree.body):
            values = [
                n.value
                for n in nodes
                if isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == [name]
            ]
            values = [v for v in values if v.lineno < getattr(at, "lineno", 0)] or values
            if values:
                return values[-1]
        return None

    def text(self, node: ast.AST, at: ast.AST) -> tuple[str, list[ast.expr]]:
        """The text ``node`` evaluates to, and the expressions whose values fill its slots."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value, []
        if isinstance(node, ast.JoinedStr):
            parts = [self.text(value, at) for value in node.values]
            return "".join(text for text, _ in parts), [e for _, values in parts for e in values]
        if isinstance(node, ast.FormattedValue):
            return self._value(node, at)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            (left, a), (right, b) = self.text(node.left, at), self.text(node.right, at)
            return left + right, a + b
        if isinstance(node, ast.Name) and (value := self.bound(node.id, at)) is not None:
            return self.text(value, at)
        raise Unreadable(ast.unparse(node))

    def _value(self, node: ast.FormattedValue, at: ast.AST) -> tuple[str, list[ast.expr]]:
        """A string constant of the module or the function is text; anything else is a slot."""
        name = getattr(node.value, "id", None)
        if name is None or node.conversion != -1 or node.format_spec is not None:
            return _SLOT, [node.value]
        value = self.bound(name, at)
        if isinstance(value, ast.JoinedStr) or (isinstance(value, ast.Constant) and isinstance(value.value, str)):
            return self.text(value, at)
        if value is None and isinstance(self.namespace.get(name), str):  # imported
            return self.namespace[name], []
        return _SLOT, [node.value]


def _params(args: list[ast.expr]) -> frozenset[str]:
    names = []
    for arg in args:
        items = arg.value.elts if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Tuple) else [arg]
        for item in items:
            if isinstance(item, ast.Starred):
                raise Unreadable(ast.unparse(item))
            names.append(item.value if isinstance(item, ast.Constant) else ast.unparse(item))
    return frozenset(names)


def _fields(text: str, values: list[ast.expr]) -> frozenset[str]:
    """``{name}`` fields, and ``{{{expr}}}`` fields whose name is a run-time value, keyed by the expression."""
    slots = iter(values)
    keyed = re.sub(_SLOT, lambda _: f"{_SLOT}{ast.unparse(next(slots))}{_SLOT}", text)
    return frozenset(re.findall(r"\{(\w+)\}", keyed) + re.findall(rf"\{{{_SLOT}([^{_SLOT}]+){_SLOT}\}}", keyed))


def sites(sources: dict[str, str]) -> tuple[list[Site], list[str]]:
    """The refusals in ``sources`` (module name -> source), and the places whose message could not be read."""
    trees = {module: ast.parse(source) for module, source in sources.items()}
    forwarders = _forwarders(list(trees.values()))
    found, unreadable = [], []
    for module, tree in trees.items():
        reader = _Reader(tree, module)
        for call in _calls(tree, {"KVMagicError", *forwarders}):
            at = 0 if _name(call) == "KVMagicError" else forwarders[_name(call)]
            message = call.args[at] if len(call.args) > at else None
            function = reader.function(call)
            if at == 0 and isinstance(message, ast.Name) and function and function.name in forwarders:
                continue  # a forwarder's own raise: its callers are the sites
            try:
                if message is None:
                    raise Unreadable("no message")
                text, values = reader.text(message, call)
                params = _params(call.args[at + 1 :])
                found.append(Site(f"{module}:{call.lineno}", text, _fields(text, values), params, _name(call)))
            except Unreadable as error:
                unreadable.append(f"{module}:{call.lineno}: {error}")
    return found, unreadable
