"""Models side by side: one request measured on each of several models in turn, one model in memory at a time.

Every name is checked before any model loads (an unknown or repeated one costs nothing); then each model is loaded,
its shape read, measured as :func:`~kvmagic.runner.benchmark.run_benchmark` measures one, and released (dropped,
collected, the accelerator's cache emptied) before the next loads, so that the largest model alone sets the memory
the run needs. A model loaded elsewhere (``%kvload``'s) is never touched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvmagic.addons.models.models_columns import short_name
from kvmagic.addons.models.models_result import ModelsResult
from kvmagic.core.addon import addons
from kvmagic.core.spec import BenchSpec
from kvmagic.errors import KVMagicError
from kvmagic.measure.accelerator import release_memory
from kvmagic.measure.guards import forget_frames
from kvmagic.measure.shape_probe import model_shape
from kvmagic.model.explain import explain
from kvmagic.model.loading import load_model, model_source, offline_source, quiet_progress_bars
from kvmagic.model.tiny import TINY_NAME
from kvmagic.results.records import DEADLINE_STOPS
from kvmagic.runner.benchmark import run_benchmark

if TYPE_CHECKING:
    from kvmagic.core.shape import ModelShape
    from kvmagic.measure.loaded import LoadedModel
    from kvmagic.results.result import BenchmarkResult

__all__ = ["check_model", "model_loads", "run_models"]

_ONE_MODEL = ("revision", "gguf_file")  # load settings that name a file or commit of one model's repository
_CHECKED = {"revision", "gguf_file", "random_weights", "trust_remote_code"}  # what check_model takes


def run_models(
    names: Sequence[str], prompt: str, spec: BenchSpec | None = None, *, load: Mapping[str, Any] | None = None,
    progress: bool = False, on_load: Callable[[LoadedModel], None] | None = None, **options: Any,
) -> ModelsResult:  # fmt: skip
    """Measure ``prompt`` as ``spec`` asks on each model ``names`` names, in turn, as one result.

    ``load`` holds :func:`~kvmagic.model.loading.load_model`'s keywords for every model (``dtype``,
    ``random_weights``...; with several models, ``random_weights`` leaves tiny as it is: its weights are random
    already); ``on_load`` is called with each model once it has loaded (to say so). A KeyboardInterrupt after a
    model finished ends the run there, as does a later model that fails with its reason: the models finished come
    back, the result ``partial``. Each model is held to ``max_seconds`` on its own: one that left out some of its
    configurations does not stop the next.
    """
    spec = BenchSpec.of(spec, **options)
    loads = model_loads(names, load or {})
    for name, keywords in loads.items():
        check_model(name, **{key: keywords[key] for key in keywords.keys() & _CHECKED})
    results: list[BenchmarkResult] = []
    shapes: dict[str, ModelShape] = {}
    for index, (name, keywords) in enumerate(loads.items()):
        try:
            label = f"{short_name(name)} (model {index + 1}/{len(loads)})"
            result, shapes[name] = _measure_one(name, keywords, prompt, spec, progress, on_load, label)
        except KeyboardInterrupt as interrupt:
            if not results:
                raise
            forget_frames(interrupt)  # its frames hold the interrupted model
            release_memory()
            return ModelsResult(list(results), shapes, "interrupted", list(loads)[index:])
        except KVMagicError as error:  # a model that failed to load or run: the ones finished stay
            if not results:
                raise
            return ModelsResult(list(results), shapes, f"stopped at {name} ({error})", list(loads)[index:])
        results.append(result)
        if result.partial and result.facts.stopped not in DEADLINE_STOPS:  # each model's deadline is its own
            return ModelsResult(list(results), shapes, result.facts.stopped, list(loads)[index + 1 :])
    return ModelsResult(list(results), shapes)


def model_loads(names: Sequence[str], load: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each model's ``load_model`` keywords, by name, in order; a list no run could take is refused first."""
    if isinstance(names, str) or not names:
        raise KVMagicError("{models} names no model: name one, or several separated by commas", "models")
    if any(not name.strip() for name in names):
        raise KVMagicError("{models} holds an empty name: write the models separated by single commas", "models")
    repeated = next((name for index, name in enumerate(names) if name in names[:index]), None)
    if repeated is not None:
        raise KVMagicError(f"{{models}} names {repeated!r} twice: name each model once", "models")
    several = len(names) > 1
    for key in _ONE_MODEL:
        if several and load.get(key):
            raise KVMagicError(f"{{{key}}} belongs to one model's repository, not to each of several {{models}}: "
                               "drop it, or measure that model alone", key, "models")  # fmt: skip
    random = bool(load.get("random_weights"))
    return {name: {**load, "random_weights": random and not (several and name == TINY_NAME)} for name in names}


def check_model(
    name: str,
    *,
    revision: str | None = None,
    gguf_file: str | None = None,
    trust_remote_code: bool = False,
    **options: Any,
) -> None:
    """Refuse ``name`` as :func:`~kvmagic.model.loading.load_model` would, and where its config is not at hand,
    reading no weights: a mistake in the third of several models is found before the first loads. ``options`` are
    the add-ons' keywords of ``load_model``: one that builds the model checks it (``AddOn.check_build``)."""
    load = dict(revision=revision, gguf_file=gguf_file, trust_remote_code=trust_remote_code, **options)
    if any(addon.check_build(name, load) for addon in addons()):
        return
    source = model_source(name, revision, gguf_file)
    if name == TINY_NAME or Path(source).is_dir():
        return
    from transformers import AutoConfig

    try:
        with quiet_progress_bars():
            AutoConfig.from_pretrained(offline_source(source, revision), revision=revision,
                                       trust_remote_code=trust_remote_code)  # fmt: skip
    except Exception as error:
        raise explain(name, revision, error) from error


def _measure_one(
    name: str, keywords: dict[str, Any], prompt: str, spec: BenchSpec, progress: bool,
    on_load: Callable[[LoadedModel], None] | None, label: str,
) -> tuple[BenchmarkResult, ModelShape]:  # fmt: skip
    """Load ``name``, measure it, and release it whatever happens."""
    loaded = load_model(name, **keywords)
    try:
        if on_load is not None:
            on_load(loaded)
        shape = model_shape(loaded.model)
        return run_benchmark(loaded, prompt, spec, progress=progress, label=label), shape
    finally:
        del loaded
        release_memory()
