"""Figures: ``--plot`` shows a result's figure beneath its table in a notebook, and ``result.plot()`` draws it, time
and speed-up against length, per-step latency and quality's cost (:mod:`~kvmagic.addons.plot.sweep_plot`; the
trade-off's panels :mod:`~kvmagic.addons.plot.tradeoff`).

It keeps nothing of a run and adds no column: it reads the rows. matplotlib is imported only when a figure is drawn.
Several models' figure (``ModelsResult.plot()``) and a report page's figures are drawn with its parts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from kvmagic.core.addon import AddOn, addons
from kvmagic.frontends.option import Option

if TYPE_CHECKING:
    import argparse

    from kvmagic.addons.plot.sweep_plot import SweepFigure
    from kvmagic.results.benchmark_record import BenchmarkRecord

__all__ = ["ADDON"]


def _plot(result: BenchmarkRecord) -> SweepFigure:
    """Time and speed-up against length, and per-step latency when measured, and quality's cost where it
    was read: a matplotlib ``Figure`` that a notebook shows inline; ``.savefig(path)`` saves it."""
    from kvmagic.addons.plot.sweep_plot import plot_result

    return plot_result(result)


def _instead() -> str:
    """What the command offers in place of ``--plot``: a saved run plotted in a notebook, of each kind of file."""
    read = "".join(f" ({addon.read_back})" for addon in addons() if addon.read_back)
    return f"plot a result saved with --save PATH.json in a notebook: BenchmarkResult.read_json(PATH).plot(){read}"


class _Plot(AddOn):
    name = "plot"
    options = (
        Option(("--plot",), "Draw time and speed-up against length (bars at one length), per-step latency, and, where "
               "--cache read quality, KL against KV cache size and against decode speed.", "plot",
               action="store_true", hosts=("magic",), examples=("",), purpose="what to show", instead=_instead,
               turns_on=("steps",)),
    )  # fmt: skip
    # ``result.plot()``: the figure, drawn when asked.
    attributes: ClassVar[Mapping[str, Callable[[Any], Any]]] = {"plot": lambda record: partial(_plot, record)}

    def beside(self, args: argparse.Namespace, result: Any) -> None:
        """The figure inline as PNG, whatever matplotlib backend the kernel has (or none)."""
        if not args.plot or not result.measurements:
            return
        from IPython.display import display

        text = "<figure: in a terminal, save it in the next cell with `_.plot().savefig('sweep.png')`>"
        display({"image/png": result.plot()._repr_png_(), "text/plain": text}, raw=True)


ADDON = _Plot()
