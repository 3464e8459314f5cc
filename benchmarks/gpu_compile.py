"""The GPU check's strategy step: every cache strategy side by side, compiled twins included.

Each ``generate`` call is recorded with what it asked for, transformers' own compile decision, the
graphs ``torch._dynamo`` compiled during it and the CUDA graphs inductor recorded during it. From
those: only the ``+compile`` strategies compile, and each compiles in its first, untimed call at a
length and never again in the timed runs (64 then 16 new tokens: the move counts as a compile).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from checklist import SKIP, Check, verdict
from gpu_results import NEEDS_CUDA, Sizes, bench, kept, kv_bytes, rows

from kvmagic.core.strategy import COMPILE_SUFFIX, KNOWN, parse, parse_list
from kvmagic.measure.memory import kv_sizes
from kvmagic.measure.strategies import checked, setups
from kvmagic.model.loading import LoadedModel

__all__ = ["strategy_checks"]

STATIC_FAMILY = ("static", "offloaded_static")


def strategy_checks(loaded: LoadedModel, sizes: Sizes, cuda: bool) -> list[Check]:
    chosen = setups(loaded, checked(parse_list(KNOWN)), compile=True)
    with _recorded(loaded.model, cuda) as calls:
        result = bench(loaded, sizes.prompt_tokens, sizes.repeat, new_tokens=list(sizes.strategy_new),
                       cache=",".join(KNOWN), compile=True)  # fmt: skip
    found = rows(result)
    unavailable = {str(s.strategy): s.reason for s in chosen if s.reason}
    failed = {r["strategy"]: r["note"] for r in found if r["note"] and r["strategy"] not in unavailable}
    ran = sorted({r["strategy"] for r in found if not r["note"]})
    checks = [
        _only_asked_compile(calls, cuda),
        verdict("every available strategy ran", not failed and len(ran) == len(chosen) - len(unavailable),
                "; ".join(f"{k}: {v}" for k, v in failed.items()) or ", ".join(ran), **kept(result)),
        *([Check("strategies not available here", SKIP, "; ".join(f"{k}: {v}" for k, v in unavailable.items()))]
          if unavailable else []),
        *_kv_checks(loaded, found, sizes.strategy_new[0]),
    ]  # fmt: skip
    if not cuda:
        return [*checks, Check("compile_s on the compiled rows only", SKIP, NEEDS_CUDA),
                Check("compiles only in each length's first, untimed call", SKIP, NEEDS_CUDA)]  # fmt: skip
    return [*checks, _compile_seconds(found, unavailable), _no_recompiles(calls)]


@contextmanager
def _recorded(model: Any, cuda: bool) -> Iterator[list[dict[str, Any]]]:
    """Every ``generate`` call: strategy, new tokens, transformers' decision, graphs compiled, CUDA graphs recorded."""
    from torch._dynamo.utils import counters

    calls: list[dict[str, Any]] = []
    real, decide = model.generate, model._valid_auto_compile_criteria
    decided: list[bool] = []
    recordings: list[int | None] = [None]

    def criteria(model_kwargs: dict[str, Any], config: Any) -> bool:
        decided.append(bool(decide(model_kwargs, config)))
        return decided[-1]

    def generate(*args: Any, **kwargs: Any) -> Any:
        config = kwargs["generation_config"]
        asked = config.compile_config is not None and not config.disable_compile
        graphs, recorded, decided[:] = counters["stats"]["unique_graphs"], recordings[0], []
        try:
            return real(*args, **kwargs)
        finally:
            calls.append({"strategy": _strategy(config) + (COMPILE_SUFFIX if asked else ""),
                          "new_tokens": config.max_new_tokens, "asked": asked, "compiled": any(decided),
                          "graphs": counters["stats"]["unique_graphs"] - graphs,
                          "recordings": None if recorded is None else (recordings[0] or 0) - recorded})  # fmt: skip

    with _counting_recordings(recordings, cuda):
        model.generate, model._valid_auto_compile_criteria = generate, criteria
        try:
            yield calls
        finally:
            del model.generate, model._valid_auto_compile_criteria


def _strategy(config: Any) -> str:
    if not config.use_cache:
        return "off"
    if config.cache_implementation != "quantized":
        return str(config.cache_implementation)
    settings = config.cache_config
    backend = settings.get("backend") if isinstance(settings, dict) else getattr(settings, "backend", None)
    return f"quantized:{backend}"


@contextmanager
def _counting_recordings(count: list[int | None], cuda: bool) -> Iterator[None]:
    """Count inductor's CUDA graph recordings (a re-recording in a timed run would be timed too); the count
    stays None where nothing records (no CUDA) or this torch has no recorder to count."""
    manager = None
    if cuda:
        from torch._inductor import cudagraph_trees

        manager = getattr(cudagraph_trees, "CUDAGraphTreeManager", None)
    real = getattr(manager, "record_function", None)
    if manager is None or real is None:
        yield
        return
    count[0] = 0

    def record_function(self: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] = (count[0] or 0) + 1
        return real(self, *args, **kwargs)

    manager.record_function = record_function
    try:
        yield
    finally:
        manager.record_function = real


def _only_asked_compile(calls: list[dict[str, Any]], cuda: bool) -> Check:
    stray = sum(c["compiled"] and not c["asked"] for c in calls)
    wanted = sum(c["compiled"] and c["asked"] for c in calls)
    graphs = sum(c["graphs"] for c in calls)
    figure = f"{len(calls)} generate calls: {stray} compiled unasked, {wanted} +compile compiled, {graphs} graphs"
    ok = bool(calls) and stray == 0 and (wanted > 0 or not cuda)
    return verdict("only the +compile strategies compile", ok, figure, calls=calls)


def _compile_seconds(found: list[dict[str, Any]], unavailable: dict[str, str]) -> Check:
    """A compiled row reports its first call's extra seconds; no other row does."""
    compiled = [r for r in found if parse(r["strategy"]).compiled and r["strategy"] not in unavailable]
    others = [r for r in found if not parse(r["strategy"]).compiled]
    apart = bool(compiled) and all(math.isfinite(r["compile_s"]) and r["compile_s"] > 0 for r in compiled)
    clean = all(math.isnan(r["compile_s"]) for r in others)
    figure = ", ".join(f"{r['strategy']}@{r['new_tokens']}: {r['compile_s']:.1f} s" for r in compiled)
    return verdict("compile_s on the compiled rows only", apart and clean, figure or "no compiled row")


def _no_recompiles(calls: list[dict[str, Any]]) -> Check:
    """Per compiled strategy and length, graphs and recordings come only in the first call (64 -> 16 included)."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for call in calls:
        if call["asked"]:
            groups.setdefault((call["strategy"], call["new_tokens"]), []).append(call)
    parts, ok = [], bool(groups)
    for (strategy, new), group in groups.items():
        first, later = group[0], group[1:]
        again = sum(c["graphs"] + (c["recordings"] or 0) for c in later)
        ok &= again == 0
        parts.append(f"{strategy}@{new}: first call {first['graphs']} graphs, {first['recordings']} recordings; "
                     f"{len(later)} later calls {again}")  # fmt: skip
    return verdict("compiles only in each length's first, untimed call", ok, "; ".join(parts) or "no compiled call")


def _kv_checks(loaded: LoadedModel, found: list[dict[str, Any]], first_new: int) -> list[Check]:
    """Counted KV bytes against the prediction: dynamic rows exactly, static ones within 8 bytes a layer
    (transformers 5's position counters); a static row after a longer one must not hold the longer cache."""
    sizes, layers = kv_sizes(loaded.model.config, loaded.dtype), loaded.model.config.get_text_config().num_hidden_layers
    matched, sized = [], []
    for row in found:
        if row["note"] or row["strategy"] not in ("dynamic", *STATIC_FAMILY):
            continue
        positions = row["prompt_tokens"] + row["new_tokens"] - 1
        expected, per_position = sizes.after(row["prompt_tokens"], row["new_tokens"]), sizes.held_bytes(1)
        ok = 0 <= kv_bytes(row) - expected <= (0 if row["strategy"] == "dynamic" else 8 * layers)
        text = f"{row['strategy']}@{row['new_tokens']}: {kv_bytes(row)} B vs {expected} B"
        text += "" if ok else f" ({kv_bytes(row) // per_position} positions held, {positions} needed)"
        late_static = row["strategy"] != "dynamic" and row["new_tokens"] != first_new
        (sized if late_static else matched).append((ok, text))
    return [
        verdict("KV bytes = predicted (dynamic, first static)", all(ok for ok, _ in matched) and bool(matched),
                "; ".join(text for _, text in matched)),
        verdict("later static rows sized to their own length", all(ok for ok, _ in sized) and bool(sized),
                "; ".join(text for _, text in sized)),
    ]  # fmt: skip
