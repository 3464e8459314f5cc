"""The package keeps a shape a newcomer can read: a module per concept, short functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kvmagic"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_MODULE_LINES = 500  # a smell, not a rule: past it, ask whether the module holds two concepts
MAX_FUNCTION_LINES = 50  # docstrings aside


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _length(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the signature to the end, less the docstring's."""
    assert function.end_lineno is not None
    lines = function.end_lineno - function.lineno + 1
    first = function.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        assert first.end_lineno is not None
        lines -= first.end_lineno - first.lineno + 1
    return lines


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_modules_and_functions_stay_short(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    assert lines <= MAX_MODULE_LINES, f"{lines} lines: does it hold two concepts? split it by concept, not by size"
    long = [f"{f.name} ({_length(f)} lines)" for f in _functions(ast.parse(text)) if _length(f) > MAX_FUNCTION_LINES]
    assert long == []


def test_the_length_counts_the_body_not_the_docstring() -> None:
    function = _functions(ast.parse('def f():\n    """Doc\n    string."""\n    a = 1\n    return a\n'))[0]
    assert _length(function) == 3


def test_no_two_modules_share_a_name() -> None:
    """A module's name says its one concept: two ``shape.py`` in two layers make a reader ask which is meant."""
    names: dict[str, list[str]] = {}
    for path in MODULES:
        if path.name not in ("__init__.py", "__main__.py"):
            names.setdefault(path.stem, []).append(str(path.relative_to(PACKAGE)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}


def test_no_module_is_named_as_a_package_of_kvmagic() -> None:
    packages = {path.parent.name for path in MODULES if path.name == "__init__.py"}
    assert sorted(path.stem for path in MODULES if path.stem in packages) == []


def test_every_dotted_name_a_docstring_gives_exists() -> None:
    """``:mod:`kvmagic.options``` after the module moved sends a reader nowhere."""
    import importlib
    import re

    def spec(name: str) -> object:
        try:
            return importlib.util.find_spec(name)
        except ModuleNotFoundError:  # a name inside a module, not a module
            return None

    missing = []
    for path in MODULES:
        for reference in sorted(set(re.findall(r"kvmagic(?:\.[A-Za-z_]+)+", path.read_text(encoding="utf-8")))):
            parts = reference.split(".")
            found = next(
                (i for i in range(len(parts), 0, -1) if spec(".".join(parts[:i])) is not None),
                None,
            )
            target = importlib.import_module(".".join(parts[:found])) if found else None
            for attribute in parts[found or 0 :]:
                target = getattr(target, attribute, None)
            if target is None:
                missing.append(f"{path.relative_to(PACKAGE)}: {reference}")
    assert missing == []
