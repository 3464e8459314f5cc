"""A report a colleague can open: ``--save report.html`` (or ``result.save("report.html")``) writes one
self-contained HTML page of a result (:mod:`~kvmagic.addons.html_report.page`), with the commands that rerun it
(:mod:`~kvmagic.addons.html_report.rerun`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from kvmagic.core.addon import AddOn

__all__ = ["ADDON"]


def write_report(result: Any, path: Path) -> None:
    """``result``'s page at ``path``; several models' results have one page each (``models.results[i]``)."""
    from kvmagic.addons.html_report.page import report_page
    from kvmagic.errors import KVMagicError
    from kvmagic.results.result import BenchmarkResult
    from kvmagic.results.serialize import write_text

    if not isinstance(result, BenchmarkResult):
        raise KVMagicError(
            f"a report shows one model's run: save each model's, e.g. models.results[0].save({str(path)!r})"
        )
    write_text(report_page(result), path)


class _Report(AddOn):
    name = "report"
    exports: ClassVar[Mapping[str, Callable[[Any, Path], None]]] = {".html": write_report}


ADDON = _Report()
