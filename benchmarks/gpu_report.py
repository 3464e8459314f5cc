"""The GPU check's report on disk: ``gpu_check.json`` (everything) and ``gpu_check.md`` (for reading).

Both are rewritten whole after every check, each through a temporary file and a rename, so a run
cut off at any moment leaves the last complete report, never half of one.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from checklist import Check

__all__ = ["JSON_NAME", "MARKDOWN_NAME", "markdown", "write_report"]

JSON_NAME, MARKDOWN_NAME = "gpu_check.json", "gpu_check.md"


def write_report(out: Path, header: dict[str, Any], checks: list[Check]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    data = {**header, "checks": [_check_dict(c) for c in checks]}
    _replace(out / JSON_NAME, json.dumps(_plain(data), indent=1, ensure_ascii=False, allow_nan=False))
    _replace(out / MARKDOWN_NAME, markdown(header, checks))


def markdown(header: dict[str, Any], checks: list[Check]) -> str:
    """The checks as one table, then the environment, then each check's rows as tables of their own."""
    lines = ["# GPU check", "", "| status | check | figure | s |", "| --- | --- | --- | ---: |"]
    lines += [f"| {c.status} | {_cell(c.name)} | {_cell(c.figure)} | {c.seconds:.1f} |" for c in checks]
    lines += ["", "## Environment", ""]
    lines += [f"- {key}: {_cell(json.dumps(_plain(value), ensure_ascii=False))}" for key, value in header.items()]
    for check in checks:
        for key, value in check.data.items():
            if _is_table(value):
                lines += ["", f"## {check.name}: {key}", "", *_rows_table(value)]
    return "\n".join(lines) + "\n"


def _check_dict(check: Check) -> dict[str, Any]:
    return {"name": check.name, "status": check.status, "figure": check.figure,
            "seconds": round(check.seconds, 2), **check.data}  # fmt: skip


def _is_table(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(row, Mapping) for row in value)


def _rows_table(rows: list[Mapping[str, Any]]) -> list[str]:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(_short(row.get(column))) for column in columns) + " |")
    return lines


def _short(value: object) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    if value is None:
        return ""
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _plain(value: Any) -> Any:
    """Strict-JSON values: NaN and infinities as null, tuples as lists, anything else unknown as its text."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, Sequence):
        return [_plain(item) for item in value]
    if hasattr(value, "tolist"):  # a numpy or torch value
        return _plain(value.tolist())
    return str(value)


def _replace(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
