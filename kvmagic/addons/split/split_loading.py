"""A model split across the ranks of a tensor-parallel run, by its own plan (``tp_plan="auto"``).

transformers splits a model by the plan its config declares (``base_model_tp_plan``: the attention's
and the MLP's projections column-wise or row-wise), each rank holding its share of the heads. What
can be checked from the config is checked before any weight loads: that there is a plan, and that the
ranks divide the heads. Random weights are built once per host by its first rank, saved to a
temporary directory its ranks load from, and removed.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvmagic.addons.random_weights.random_build import build, check_random, find_config, find_tokenizer, marked
from kvmagic.addons.split.process_group import join
from kvmagic.errors import KVMagicError
from kvmagic.measure.capabilities import dtype_keyword, tensor_parallel_keyword
from kvmagic.measure.loaded import LoadedModel
from kvmagic.measure.lockstep import World, barrier
from kvmagic.model import loading
from kvmagic.model.explain import explain
from kvmagic.model.tiny import TINY_NAME, tiny_dir

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "check_split", "load_split", "load_split_model", "random_source", "readable_config", "shard_tied_head",
    "split_model",
]  # fmt: skip


def check_split(name: str, config: PretrainedConfig, ranks: int) -> None:
    """Refuse, naming the model, a split its config rules out: no plan, or heads the ranks do not divide."""
    text = config.get_text_config()
    if not getattr(text, "base_model_tp_plan", None):
        raise KVMagicError(
            f"{name!r} ({type(config).__name__}) has no tensor-parallel plan (base_model_tp_plan) in this "
            "transformers, so {tp} cannot split it: drop {tp}, or spread its layers with {device_map} auto",
            "tp",
            "device_map",
        )
    heads = getattr(text, "num_attention_heads", None)
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    if not isinstance(heads, int) or not isinstance(kv_heads, int) or (heads % ranks == 0 and kv_heads % ranks == 0):
        return
    common = math.gcd(heads, kv_heads)
    fits = [str(n) for n in range(2, common + 1) if common % n == 0][:6]
    fix = f"use {' or '.join(fits)} ranks" if fits else "drop {tp}: no number of ranks divides both"
    raise KVMagicError(
        f"{name!r} has {heads} attention heads and {kv_heads} KV heads, which {ranks} ranks cannot share "
        f"equally under {{tp}}: {fix}",
        "tp",
    )


def readable_config(name: str, *, revision: str | None = None, trust_remote_code: bool = False) -> Any:
    """``name``'s config if it can be read without a download (tiny, a directory, the local cache, a shipped
    one), else None: what a launcher checks before it starts any rank."""
    try:
        return find_config(str(tiny_dir()) if name == TINY_NAME else name, revision=revision,
                           trust_remote_code=trust_remote_code)  # fmt: skip
    except (KVMagicError, OSError, ValueError):
        return None


@loading.without_progress_bars
def load_split_model(
    name: str = loading.DEFAULT_MODEL,
    *,
    dtype: str = "auto",
    device_map: object = None,
    revision: str | None = None,
    gguf_file: str | None = None,
    attn_implementation: str | None = None,
    trust_remote_code: bool = False,
    random_weights: bool = False,
    before_weights: Callable[[], None] | None = None,
) -> LoadedModel:
    """:func:`~kvmagic.model.loading.load_model` for a process torchrun started: ``name`` split over its ranks,
    each rank on its own device (which ``device_map`` cannot choose: give None)."""
    if device_map is not None:
        raise KVMagicError(
            "{device_map} places a whole model; split, each rank places its share: drop it", "device_map"
        )
    if random_weights:
        check_random(name, gguf_file)
    loading.check_attention(attn_implementation)
    start, source = time.perf_counter(), None if random_weights else loading.model_source(name, revision, gguf_file)
    options = dict(revision=revision, gguf_file=gguf_file, attn_implementation=attn_implementation,
                   trust_remote_code=trust_remote_code)  # fmt: skip
    dtypes = {dtype_keyword(): loading.resolve_dtype(dtype, None)}
    model, tokenizer, stand_in, world = split_model(name, source, dtypes, options, before_weights)
    seconds = time.perf_counter() - start
    placement = f"split over {world.size} ranks ({world.backend})"
    built = marked(stand_in) if random_weights else {}
    return LoadedModel(model, tokenizer, name, revision, seconds, world=world, placement=placement, **built)


def split_model(
    name: str,
    source: str | Path | None,
    dtype: dict[str, torch.dtype],
    options: dict[str, Any],
    before_weights: Callable[[], None] | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, str | None, World]:
    """Model, tokenizer, the name of a stand-in tokenizer (or None) and this rank's place: ``name`` split over the
    ranks torchrun started. ``source`` is where its files are, None to build it with random weights; ``options``
    holds revision, gguf_file, attn_implementation and trust_remote_code."""
    from transformers import AutoConfig, AutoTokenizer

    world = join()
    found = {key: options[key] for key in ("revision", "trust_remote_code")}
    load = {**dtype, **found, "gguf_file": options["gguf_file"], "attn_implementation": options["attn_implementation"]}
    try:
        if source is None:
            config = find_config(name, **found)
            tokenizer, stand_in = find_tokenizer(name, config, **found)
        else:
            config = AutoConfig.from_pretrained(source, **found, gguf_file=options["gguf_file"])
            tokenizer, stand_in = AutoTokenizer.from_pretrained(source, **found, gguf_file=options["gguf_file"]), None
        check_split(name, config, world.size)
        if before_weights is not None:
            before_weights()
        if source is not None:
            return load_split(source, load), tokenizer, stand_in, world
        with random_source(config, dtype, world, options) as built:
            return load_split(built, {**load, "revision": None, "gguf_file": None}), tokenizer, stand_in, world
    except KVMagicError:
        raise
    except Exception as error:
        raise explain(name, options["revision"], error) from error


def load_split(source: str | Path, load: dict[str, Any]) -> PreTrainedModel:
    """The model at ``source`` split over the ranks by its own plan; ``load`` holds dtype, revision and the rest."""
    from transformers import AutoModelForCausalLM

    plan: Any = "auto"
    if tensor_parallel_keyword() == "distributed_config":
        from transformers import DistributedConfig

        plan = DistributedConfig(tp_plan="auto")
    model = AutoModelForCausalLM.from_pretrained(source, **{tensor_parallel_keyword(): plan}, **load)
    shard_tied_head(model)
    loaded: PreTrainedModel = model.eval()
    return loaded


def shard_tied_head(model: PreTrainedModel) -> None:
    """Shard an output layer whose plan splits it but whose weight stayed the input embedding's.

    A model that ties its output layer to its input embedding (tiny, Llama-3.2-1B) gets, from some
    transformers lines (4.55), a column-wise plan on the output layer while the tie hands it the
    embedding's whole, unsplit weight: the first forward then fails, mixing plain and distributed
    tensors. Sharding that weight by rows is what the plan asked for; each rank keeps its rows.
    """
    import torch
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor

    head = model.get_output_embeddings()
    plan = str(getattr(head, "_hf_tp_plan", "") or "")
    mesh = getattr(model, "_device_mesh", None)
    if head is None or "colwise" not in plan or mesh is None or isinstance(head.weight.data, DTensor):
        return
    split = distribute_tensor(head.weight.detach(), mesh, [Shard(0)])
    head.weight = torch.nn.Parameter(split, requires_grad=False)
    head.kvmagic_tied_share = True  # still the embedding's values: counted once (LoadedModel.num_parameters)


@contextmanager
def random_source(
    config: PretrainedConfig, dtype: dict[str, torch.dtype], world: World, options: dict[str, Any]
) -> Iterator[Path]:
    """A directory holding ``config``'s model with seeded random weights, built and saved by each host's first
    rank while the others wait, removed once every rank has loaded from it."""
    import torch

    run = os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("MASTER_PORT", "")
    path = Path(tempfile.gettempdir()) / f"kvmagic-random-{run}-{os.environ.get('GROUP_RANK', '0')}"
    kwargs = {**dtype, "trust_remote_code": options["trust_remote_code"]}
    try:
        if world.local_rank == 0:
            shutil.rmtree(path, ignore_errors=True)
            model = build(config, torch.device("cpu"), kwargs)
            model.save_pretrained(path, safe_serialization=True)
            del model
        barrier()
        yield path
        barrier()
    finally:
        if world.local_rank == 0:
            shutil.rmtree(path, ignore_errors=True)
