"""A result as JSON and back: what ``--save run.json`` writes and ``--compare`` reads, older formats included.

Format 3 keeps one record per (configuration, strategy). Format 2 kept one per configuration, with every
run of both strategies interleaved and dicts keyed by strategy, and the run's facts in the metadata;
format 1 also kept the strategies there. Both still read: a saved baseline outlives an upgrade.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kvmagic.core.addon import addons
from kvmagic.core.config import Config
from kvmagic.core.kvbytes import KVSizes, SlidingKeep
from kvmagic.core.quality import Quality
from kvmagic.core.spec import BenchSpec
from kvmagic.errors import KVMagicError
from kvmagic.results.measurement import Measurement
from kvmagic.results.records import Mismatch, RunFacts, StepProfile
from kvmagic.results.serialize import floats_back

if TYPE_CHECKING:
    from kvmagic.results.benchmark_record import BenchmarkRecord

__all__ = ["JSON_FORMAT", "JSON_VERSION", "OLD_NAMES", "result_fields", "result_to_dict"]

JSON_FORMAT = "kvmagic-benchmark"
JSON_VERSION = 3  # 3: a record per (configuration, strategy), the run's facts apart from the environment
_FACTS = {f.name for f in dataclasses.fields(RunFacts)}
_REQUEST = {"chat", "warmup_tokens", "repeat", "steps", "ci_target", "auto_cap", "max_seconds", "kv_bits", "profile"}
OLD_NAMES = {"uncached": "off", "cached": "dynamic"}  # how formats 1 and 2 named the plain run's two strategies


def result_to_dict(result: BenchmarkRecord) -> dict[str, Any]:
    saved: dict[str, Any] = {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "model": result.model,
        "spec": result.spec.to_dict(),
        "strategies": [str(s) for s in result.strategies],
        "skipped": {str(s): why for s, why in result.skipped.items()},
        "remarks": {str(s): what for s, what in result.remarks.items()},
        "metadata": result.metadata,
        "facts": dataclasses.asdict(result.facts),
        "measurements": [_measurement_to_dict(m) for m in result.measurements],
    }
    for addon in addons():  # a mapping an add-on keeps under one of the centre's (its facts) joins it there
        for key, value in addon.dump(result.addons.get(addon.name)).items():
            joined = isinstance(saved.get(key), dict) and isinstance(value, dict)
            saved[key] = {**saved[key], **value} if joined else value
    return saved


def result_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """A result's fields from what :func:`result_to_dict` wrote (or an older format)."""
    for addon in addons():  # a file of an add-on's own kind: the add-on says what reads it
        addon.refuse_file(data)
    if not isinstance(data, Mapping) or data.get("format") != JSON_FORMAT:
        raise KVMagicError("this is not a kvmagic benchmark: save one with {save} (a .json name)", "save")
    if data.get("version", 0) > JSON_VERSION:
        raise KVMagicError(f"this benchmark was saved by a newer kvmagic (format {data['version']}): upgrade kvmagic")
    if data.get("version", 0) < JSON_VERSION:
        for addon in addons():
            data = addon.upgrade(data)
        data = _from_format_2(data)
    try:
        return dict(  # a file names each strategy without its width: the result reads it at the spec's kv_bits
            model=data["model"],
            measurements=[_measurement(m) for m in data["measurements"]],
            spec=BenchSpec.from_dict(data.get("spec") or {}),
            strategies=list(data["strategies"]),
            skipped=dict(data.get("skipped", {})),
            remarks=dict(data.get("remarks", {})),
            metadata={k: v for k, v in data.get("metadata", {}).items() if k not in _in_metadata()},
            facts=_facts(data.get("facts", {})),
            addons={addon.name: kept for addon in addons() if (kept := addon.load(data)) is not None},
        )
    except (KeyError, TypeError) as error:
        raise KVMagicError(f"this kvmagic benchmark is incomplete: {error}") from None


def _measurement_to_dict(m: Measurement) -> dict[str, Any]:
    """A measurement's own fields, then what each add-on keeps of its data on it."""
    saved = {f: v for f, v in dataclasses.asdict(m).items() if f != "addons"}
    saved.update(config=m.config._asdict(), strategy=str(m.strategy))
    for addon in addons():
        saved.update(addon.dump_measurement(m.addons.get(addon.name)))
    return saved


def _in_metadata() -> set[str]:
    """The keys of a saved metadata that are an add-on's data (a file of an older layout kept them there)."""
    return {key for addon in addons() for key in addon.in_metadata}


def _facts(data: Mapping[str, Any]) -> RunFacts:
    """The run's facts, less those an add-on keeps among them (its ``load`` reads them); a file from before the
    sizes per layer kept one position's bytes over all layers."""
    values = {k: v for k, v in data.items() if k in _FACTS}
    position, sizes = data.get("kv_position_bytes"), values.get("kv_sizes")
    if sizes is not None:
        keep = SlidingKeep(**sizes.get("keep", {}))
        values["kv_sizes"] = KVSizes(sizes["position_bytes"], tuple(sizes["windows"]), keep)
    elif position:
        values["kv_sizes"] = KVSizes(position, (None,))
    values["left_out"] = tuple(Config(*config) for config in values.get("left_out", ()))
    return RunFacts(**values)


def _measurement(data: Mapping[str, Any]) -> Measurement:
    """A saved measurement: its own fields (any other refused, as incomplete), and each add-on's data on it (its
    ``load_measurement`` reads the fields its ``dump_measurement`` writes, even of no data)."""
    theirs = {key for addon in addons() for key in addon.dump_measurement(None)}
    values = {k: floats_back(v) for k, v in data.items() if k not in theirs}
    values["config"] = Config(**values["config"])
    values["mismatch"] = None if values.get("mismatch") is None else Mismatch(**values["mismatch"])
    profile = values.get("profile")
    values["profile"] = None if profile is None else StepProfile(**{k: floats_back(v) for k, v in profile.items()})
    quality = values.get("quality")
    values["quality"] = None if quality is None else _quality(quality)
    for name in ("ttft_s", "compile_s"):
        values[name] = math.nan if values.get(name) is None else values[name]
    kept = {addon.name: found for addon in addons() if (found := addon.load_measurement(data)) is not None}
    return Measurement(**values, addons=kept)


def _quality(data: Mapping[str, Any]) -> Quality:
    """A strategy's quality as written; one without its perplexity's interval (under 2 steps, an older file) has
    none."""
    interval = data.get("ppl_interval")
    rest = _numbers({k: v for k, v in data.items() if k != "ppl_interval"})
    return Quality(**rest, ppl_interval=None if interval is None else floats_back(interval))


def _numbers(data: Mapping[str, Any]) -> dict[str, Any]:
    """Numbers strict JSON kept as null, back as NaN."""
    return {k: math.nan if v is None else v for k, v in data.items()}


def _from_format_2(data: Mapping[str, Any]) -> dict[str, Any]:
    """A format 1 or 2 file as format 3: each configuration's interleaved runs split by strategy."""
    old = dict(data.get("metadata", {}))
    strategies = data.get("strategies") or old.get("strategies") or ["uncached", "cached"]
    facts = {**data.get("facts", {}), **{k: old[k] for k in _FACTS & old.keys()}}  # and what an upgrade put there
    measurements = [s for m in data["measurements"] for s in _split(m)]
    position = next((m.get("kv_position_bytes") for m in data["measurements"] if m.get("kv_position_bytes")), None)
    if position:
        facts["kv_position_bytes"] = position // data["measurements"][0].get("batch", 1)
    if data.get("partial") and not facts.get("stopped"):
        facts["stopped"] = "interrupted"
    skip = _FACTS | _REQUEST | {"strategies", "skipped", "compiled"}
    return {
        **data,
        "strategies": [OLD_NAMES.get(name, name) for name in strategies],
        "skipped": data.get("skipped", old.get("skipped", {})),
        "metadata": {k: v for k, v in old.items() if k not in skip},
        "facts": facts,
        "measurements": measurements,
    }


def _split(old: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One format 2 configuration as a record per strategy, in the order the strategies first ran."""
    runs = list(old["runs"])
    config = {"prompt_tokens": old["prompt_tokens"], "new_tokens": old["new_tokens"], "batch": old.get("batch", 1)}
    mismatches = dict(old.get("mismatches", {}))
    first = old.get("mismatch")
    if first is not None and runs[first["run"]] not in mismatches:
        mismatches[runs[first["run"]]] = first
    found = []
    for name in dict.fromkeys(runs):
        mine = [i for i, run in enumerate(runs) if run == name]
        profile = old.get("profiles", {}).get(name)
        mismatch = mismatches.get(name)
        if mismatch is not None:
            margin = (
                first["margin"] if first is not None and first["run"] == mismatch["run"] else mismatch.get("margin")
            )
            mismatch = {**mismatch, "run": mine.index(mismatch["run"]), "margin": margin}
        found.append({
            "config": config,
            "strategy": OLD_NAMES.get(name, name),
            "seconds": [old["seconds"][i] for i in mine],
            "generated_ids": old["generated_ids"] if mine[0] == 0 else [],
            "generated_text": old.get("generated_text", "") if mine[0] == 0 else "",
            "mismatch": mismatch,
            "ttft_s": old.get("ttft_s", {}).get(name, profile["step_s"][0] if profile else None),
            "kv_bytes": old.get("kv_bytes", {}).get(name, profile["kv_bytes"] if profile else None),
            "peak_bytes": old.get("peak_bytes", {}).get(name, profile["peak_bytes"] if profile else None),
            "peak_source": old.get("peak_source", "") if name in old.get("peak_bytes", {}) else "",
            "compile_s": old.get("compile_s", {}).get(name),
            "profile": profile,
        })  # fmt: skip
    return found
