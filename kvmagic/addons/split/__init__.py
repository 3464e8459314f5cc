"""``--tp``: a model split over ranks by tensor parallelism, the same rows measured by every rank in lockstep, with
what the split costs beside them: each rank's share of the KV cache and the time spent in collectives.

A launcher, in the sense of how the rows are run: the notebook's ``%%kvbench --tp N`` runs the command under torchrun
(:mod:`~kvmagic.addons.split.split_launch`), and the command's ``--tp`` runs this process as one of the ranks
(:mod:`~kvmagic.addons.split.split_rank`, the process group in :mod:`~kvmagic.addons.split.process_group`), on its
share of the model (:mod:`~kvmagic.addons.split.split_loading`); :mod:`~kvmagic.addons.split.split_request` holds what
a split refuses and the request as the command's words. The run keeps the centre's lockstep
(:mod:`kvmagic.measure.lockstep`); this add-on adds each rank's view of every measurement, with one profiled run for
its collectives (:mod:`~kvmagic.addons.split.split_probe`), and puts the views together
(:mod:`~kvmagic.addons.split.split_run`). :mod:`~kvmagic.addons.split.split_records` holds what a result keeps,
:mod:`~kvmagic.addons.split.split_table` its columns and notes. Everything that needs torch is imported in the hooks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from kvmagic.addons.split.split_records import (
    NAME,
    OLD_KEYS,
    Ranks,
    Split,
    ranks_from_file,
    ranks_of,
    ranks_to_file,
    split_from_file,
    split_of,
    split_to_file,
)
from kvmagic.addons.split.split_table import SPLIT_PAIR, SPLIT_ROWS, split_notes
from kvmagic.core.addon import AddOn
from kvmagic.frontends.option import Option
from kvmagic.frontends.values import at_least_one

if TYPE_CHECKING:
    import argparse

    from transformers import BatchEncoding

    from kvmagic.core.spec import BenchSpec
    from kvmagic.core.strategy import Strategy
    from kvmagic.errors import KVMagicError
    from kvmagic.measure.loaded import LoadedModel
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement
    from kvmagic.results.result import BenchmarkResult
    from kvmagic.runner.plan import Plan
    from kvmagic.runner.rounds import TimedRuns

__all__ = ["ADDON"]


class _Split(AddOn):
    name = NAME
    options = (
        Option(("--tp",), "Split the model by its own tensor-parallel plan over the ranks torchrun starts (torchrun "
               "--nproc-per-node N -m kvmagic --tp ...); every rank measures in lockstep, rank 0 prints one table.",
               "tp", action="store_true", hosts=("cli",), examples=("",), purpose="scale"),
        Option(("--tp",), "Split the model over N processes by tensor parallelism: runs the kvbench command under "
               "torchrun (python -m torch.distributed.run --nproc-per-node N) in a subprocess, shows its progress, "
               "and returns its result as any other.", "tp", type=at_least_one, metavar="N", hosts=("magic",),
               examples=("2",), purpose="scale"),
    )  # fmt: skip
    row_columns, pair_columns = SPLIT_ROWS, SPLIT_PAIR
    about = "a model split over ranks ([parallel.md](parallel.md))"
    attributes: ClassVar[Mapping[str, Callable[[Any], Any]]] = {"split": split_of}
    measurement_attributes: ClassVar[Mapping[str, Callable[[Any], Any]]] = {"ranks": ranks_of}
    in_metadata = OLD_KEYS
    api: ClassVar[Mapping[str, str]] = {"load_split_model": "kvmagic.addons.split.split_loading"}

    def takes(self, args: argparse.Namespace, configured: Mapping[str, Any], host: str) -> bool:
        """``--tp``, once what a split cannot be asked is refused: the notebook launches the ranks, the command runs
        as one of them."""
        from kvmagic.addons.split.split_request import check_split_request

        if not args.tp:
            return False
        check_split_request(args, device_map=args.device_map if host == "cli" else None)
        return True

    def run(
        self, args: argparse.Namespace, configured: Mapping[str, Any], host: str, prompt: str, spec: BenchSpec,
        on_load: Callable[[LoadedModel], None] | None, held: tuple[LoadedModel, Mapping[str, Any]] | None = None,
    ) -> BenchmarkResult:  # fmt: skip
        """The notebook's launch of the ranks, or the command's part as one of them."""
        if host == "magic":
            from kvmagic.addons.split.split_launch import launch_cell

            return launch_cell(args, prompt, spec, held, configured)
        from kvmagic.addons.split.split_rank import run_rank

        return run_rank(args, configured, prompt, spec, on_load)

    def misread(self, words: Sequence[str]) -> str:
        from kvmagic.addons.split.split_rank import numbered

        return numbered(words)

    def begin(self, args: argparse.Namespace, words: Sequence[str]) -> None:
        from kvmagic.addons.split.split_rank import join_ranks

        join_ranks(args, words)

    def refusing(self, args: argparse.Namespace, error: KVMagicError) -> None:
        from kvmagic.addons.split.split_rank import refused

        refused(error, split=bool(args.tp))

    def end(self, status: int) -> None:
        from kvmagic.addons.split.split_rank import end_rank

        end_rank(status)

    def extra_runs(self, plan: Plan) -> int:
        """A split model's one profiled run per strategy, for its collectives."""
        return int(plan.loaded.world is not None)

    def measured(
        self, plan: Plan, inputs: BatchEncoding, measurements: list[Measurement], runs: Mapping[Strategy, TimedRuns]
    ) -> list[Measurement]:
        """A split model's measurements, each with this rank's view of it."""
        if plan.loaded.world is None:
            return measurements
        from kvmagic.addons.split.split_run import with_views

        return with_views(plan.loaded, inputs, measurements, runs)

    def finished(self, plan: Plan, result: BenchmarkResult) -> BenchmarkResult:
        """A split model's result, every rank's views put together on every rank."""
        if plan.loaded.world is None:
            return result
        from kvmagic.addons.split.split_run import put_together

        return put_together(result, plan.loaded.world)

    notes_last = True  # how every row ran, after what the rows found

    def notes(self, record: BenchmarkRecord) -> list[str]:
        return split_notes(record)

    def facts(self, data: Split) -> dict[str, Any]:
        return {"split": str(data)}

    def dump(self, data: Split | None) -> dict[str, Any]:
        return {"split": split_to_file(data)}

    def load(self, saved: Mapping[str, Any]) -> Split | None:
        return split_from_file(saved)

    def dump_measurement(self, data: Ranks | None) -> dict[str, Any]:
        return {"ranks": ranks_to_file(data)}

    def load_measurement(self, saved: Mapping[str, Any]) -> Ranks | None:
        return ranks_from_file(saved.get("ranks"))


ADDON = _Split()
