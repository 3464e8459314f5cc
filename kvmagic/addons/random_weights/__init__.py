"""``--random-weights``: a published architecture built from its config with seeded random weights, nothing
downloaded: the model's real shape and timings, meaningless text. It builds the model where the load options ask
(:mod:`~kvmagic.addons.random_weights.random_build`, from the configs it ships, the local cache's or a directory's),
says so in the model's summary and in a result's metadata (``random_weights``), and in how quality was read."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from kvmagic.addons.random_weights.random_build import NAME, SHIPPED, build_loaded, check_random, find_config
from kvmagic.core.addon import AddOn, Field
from kvmagic.errors import KVMagicError
from kvmagic.frontends.option import Option
from kvmagic.model.loading import local_path

if TYPE_CHECKING:
    from kvmagic.measure.loaded import LoadedModel
    from kvmagic.results.benchmark_record import BenchmarkRecord

__all__ = ["ADDON"]


class _RandomWeights(AddOn):
    name = NAME
    load_fields = (Field(NAME, False, lambda _, value: bool(value)),)
    load_options = (
        Option(("--random-weights",), "Build the model from its config with seeded random weights instead of loading "
               "its weights: its real shape and timings, meaningless text, nothing downloaded. Configs ship for "
               f"{', '.join(SHIPPED)}; for another model, its config must be in the local cache or a directory.",
               NAME, action="store_true", examples=("",)),
    )  # fmt: skip
    loaded_attributes: ClassVar[Mapping[str, Callable[[Any], Any]]] = {
        NAME: lambda loaded: NAME in loaded.addons,
        "stand_in_tokenizer": lambda loaded: loaded.addons.get(NAME),
    }

    def build(
        self, name: str, load: Mapping[str, Any], before_weights: Callable[[], None] | None
    ) -> LoadedModel | None:
        return build_loaded(name, load, before_weights) if load[NAME] else None

    def check_build(self, name: str, load: Mapping[str, Any]) -> bool:
        """Where its config is, reading no weights: tiny and a GGUF file refused as a build would refuse them."""
        if not load.get(NAME):
            return False
        check_random(name, load["gguf_file"])
        find_config(local_path(name), revision=load["revision"], trust_remote_code=load["trust_remote_code"])
        return True

    def without_weights(self, name: str) -> KVMagicError:
        return KVMagicError(f"{name!r} holds a config but no weights (no .safetensors or .bin file): add "
                            "{random_weights} to build it with random ones, or save the model's weights there",
                            "random_weights")  # fmt: skip

    def environment(self, loaded: LoadedModel) -> dict[str, Any]:
        return {NAME: NAME in loaded.addons}

    def quality_said(self, record: BenchmarkRecord) -> str:
        if not record.metadata.get(NAME):
            return ""
        return "with random weights, how far a cache moves the logits, not what a trained model loses"


ADDON = _RandomWeights()
