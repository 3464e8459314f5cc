"""``-m A,B``: models side by side, one request measured on each model in turn, one model in memory at a time, and
shown as one table led by a ``model`` column, with each model's shape in the notes.

It takes a front end's request over where ``-m`` names several models (in the notebook, any model: one comes back as
its own result), loops over run_benchmark's runs (:mod:`~kvmagic.addons.models.models_run`) and returns a
:class:`~kvmagic.addons.models.models_result.ModelsResult`, a result of a kind of its own: its table, notes and shapes
(:mod:`~kvmagic.addons.models.models_table`), figure (:mod:`~kvmagic.addons.models.models_plot`) and file.
:mod:`~kvmagic.addons.models.models_request` reads and refuses the request, before anything loads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from kvmagic.addons.models.models_columns import MODEL, SHAPES
from kvmagic.core.addon import AddOn
from kvmagic.errors import KVMagicError
from kvmagic.frontends.option import Option

if TYPE_CHECKING:
    import argparse

    from kvmagic.core.spec import BenchSpec
    from kvmagic.measure.loaded import LoadedModel

__all__ = ["ADDON"]

_WHERE = "kvmagic/addons/models/models_columns.py"


class _Models(AddOn):
    name = "models"
    options = (
        Option(("-m", "--model"), "Measure these models instead of the one %%kvload loaded, which stays loaded: one, "
               "or several comma-separated (one table with a model column), each loaded in turn with the dtype, "
               "device map and attention of %%config KVMagics and released before the next. With --tp: the one model "
               "the ranks load (default: the one %%kvload loaded, with its options).", "models",
               metavar="MODEL[,MODEL...]", hosts=("magic",), examples=("tiny",), purpose="what to measure"),
        Option(("--random-weights",), "With -m: build each model but tiny (whose weights are random already) from "
               "its config with seeded random weights, as %%kvload --random-weights does.", "random_weights",
               action="store_true", hosts=("magic",), examples=("",), purpose="what to measure"),
    )  # fmt: skip
    read_back = "ModelsResult.read_json for -m A,B"
    tables = (
        (f"## Models side by side: `-m A,B` ({_WHERE})\n\nEither table, one model's rows after another's, is led by:",
         (MODEL,)),
        (("and `models.shape_table()` (`SHAPE_COLUMNS`) has a row per model, which the notes beneath the table "
          "say\nin a sentence each:"), SHAPES),
    )  # fmt: skip
    api: ClassVar[Mapping[str, str]] = {
        "run_models": "kvmagic.addons.models.models_run",
        "ModelsResult": "kvmagic.addons.models.models_result",
    }

    def takes(self, args: argparse.Namespace, configured: Mapping[str, Any], host: str) -> bool:
        """Several models, or in the notebook any model ``-m`` names but for ``--tp``'s ranks (the split's)."""
        from kvmagic.addons.models.models_request import check_models_request, requested

        names, _ = requested(args, configured, host)
        check_models_request(args, names)
        return len(names) > 1 or (host == "magic" and bool(names) and args.tp is None)

    def run(
        self, args: argparse.Namespace, configured: Mapping[str, Any], host: str, prompt: str, spec: BenchSpec,
        on_load: Callable[[LoadedModel], None] | None, held: tuple[LoadedModel, Mapping[str, Any]] | None = None,
    ) -> Any:  # fmt: skip
        """The models' result; one model's own result where the notebook's ``-m`` names one (each loaded here, the
        front end's own model, ``held``, left as it is)."""
        from kvmagic.addons.models.models_request import requested
        from kvmagic.addons.models.models_run import run_models

        names, load = requested(args, configured, host)
        found = run_models(names, prompt, spec, load=load, progress=not args.quiet, on_load=on_load)
        return found.results[0] if len(names) == 1 else found

    def refuse_load(self, load: Mapping[str, Any]) -> None:
        from kvmagic.addons.models.models_request import refuse_several

        refuse_several(load["name"])

    def refuse_file(self, saved: Any) -> None:
        from kvmagic.addons.models.models_result import FORMAT

        if isinstance(saved, Mapping) and saved.get("format") == FORMAT:
            raise KVMagicError("this holds several models side by side, not one model's run: read it with "
                               "ModelsResult.read_json, or save one model's run with {save}", "save")  # fmt: skip


ADDON = _Models()
