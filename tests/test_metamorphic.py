"""What kvmagic concludes from a result must not hang on what the rows do not mean: over results generated here,
without a model, listing the strategies in another order, scaling every time by one factor (a faster or slower
machine) or running the same rows at a batch leaves each ``pareto`` mark and the choice's data (its points,
frontier, rows beaten, pairs within noise, fits and crossovers) as they were; a sweep at two batches is fitted
per batch; the choice's frontier and crossovers agree with brute force; and a run of several models that stops
names exactly the models it did not measure. The choice's words are not read here, only its data."""

from __future__ import annotations

import itertools
import random
import statistics
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvmagic.addons.choice.reasoning import Choice, choice
from kvmagic.core.config import Config
from kvmagic.core.curves import Polynomial, fit_polynomial
from kvmagic.core.intervals import speedup_interval
from kvmagic.core.pareto import Point
from kvmagic.core.quality import Quality
from kvmagic.core.shape import ModelShape
from kvmagic.core.spec import BenchSpec
from kvmagic.core.strategy import DYNAMIC, parse, parse_list
from kvmagic.errors import KVMagicError
from kvmagic.results.measurement import Measurement
from kvmagic.results.pareto_marks import pareto_marks
from kvmagic.results.records import RunFacts
from kvmagic.results.result import BenchmarkResult

from .records import timed
from .test_oracles import _oracle_beats, _oracle_frontier

NAMES = ("dynamic", "static", "quantized:fp8", "quantized:quanto", "offloaded")
PROMPTS = (8, 16, 32, 64, 128, 256)


@st.composite
def results(draw: st.DrawFn, batch: int = 1) -> BenchmarkResult:
    """A comparison of ``off`` and two to five strategies over a sweep, every row with the same rounds, each
    strategy's time a line in the context with a jitter per round; bytes and KL from few values, so that ties and
    unknown figures are common; sometimes two strategies share one line, so that their times tie exactly."""
    names = ["off", *draw(st.lists(st.sampled_from(NAMES), min_size=2, max_size=5, unique=True))]
    prompts = draw(st.lists(st.sampled_from(PROMPTS), min_size=1, max_size=6, unique=True))
    new_tokens, rounds = draw(st.sampled_from([4, 8])), draw(st.integers(1, 7))
    lines = {name: (draw(st.sampled_from([0.01, 0.05, 0.2])), draw(st.sampled_from([0.0, 1e-4, 1e-3, 4e-3])))
             for name in names}  # fmt: skip
    if draw(st.booleans()):
        lines[names[2]] = lines[names[1]]
    read = draw(st.booleans())
    figures = {
        name: (
            0 if name == "off" else draw(st.sampled_from([None, 250, 1000, 1008, 1011, 4000])),
            (0.0 if name in ("off", "dynamic", "static") else draw(st.sampled_from([0.0, 0.001, 0.002])))
            if read else None,
        )
        for name in names
    }  # fmt: skip
    jitter = st.lists(st.sampled_from([0.9, 1.0, 1.0, 1.05, 1.25]), min_size=rounds, max_size=rounds)
    measurements = []
    for prompt in prompts:
        for name in names:
            a, b = lines[name]
            seconds = [(a + b * (prompt + new_tokens)) * j for j in draw(jitter)]
            kv, kl = figures[name]
            quality = None if kl is None else Quality(new_tokens, 1.0, kl, 1.0)
            measurements.append(timed((prompt, new_tokens, batch), name, seconds, kv_bytes=kv, quality=quality))
    return _result(measurements, names)


def _result(measurements: list[Measurement], names: list[str]) -> BenchmarkResult:
    return BenchmarkResult(model="tiny", measurements=measurements, spec=BenchSpec(cache=tuple(names)),
                           strategies=list(names))  # fmt: skip


def _rebuilt(result: BenchmarkResult, change: Callable[[Measurement], dict[str, Any]]) -> list[Measurement]:
    return [Measurement(**{**m.__dict__, **change(m)}) for m in result.measurements]


def _marks(result: BenchmarkResult) -> dict[tuple[int, int, str], bool]:
    """Each row's mark, by prompt, new tokens and strategy (not batch)."""
    return {(c.prompt_tokens, c.new_tokens, str(s)): mark for (c, s), mark in pareto_marks(result).items()}


def _judged(result: BenchmarkResult, scale: float = 1.0) -> dict[str, Any] | None:
    """The choice's data, by name and in sets where the order of the strategies is no part of it; its times
    divided by ``scale``; None where there is no choice to make."""
    try:
        found = choice(result)
    except KVMagicError:
        return None
    points = {str(s): (p.seconds / scale, p.kv_bytes, p.kl_nats) for s, p in found.points.items()}
    least = min(p[0] for p in points.values())
    assert points[str(found.fastest)][0] == least
    return {
        "config": found.config[:2],
        "points": points,
        "fastest": {s for s, p in points.items() if p[0] == least},
        "frontier": set(map(str, found.frontier)),
        "beaten": set(map(str, found.beaten_by)),
        "close": {frozenset(map(str, pair)) for pair in found.close},
        "fits": {str(f.strategy): (f.fitted, f.checked_at, f.measured_s / scale, round(f.error, 9)) for f in found.fits},
        "crossovers": {(str(c.overtaker), str(c.overtaken), c.context, c.agrees, round(c.measured_ratio, 9))
                       for c in found.crossovers},
        "searched": found.searched,
        "falling": set(map(str, found.falling)),
        "unfitted": bool(found.unfitted),
    }  # fmt: skip


@settings(max_examples=60, derandomize=True, deadline=None)
@given(results(), st.randoms(use_true_random=False))
def test_listing_the_strategies_in_another_order_changes_no_verdict(
    result: BenchmarkResult, rng: random.Random
) -> None:
    names = [str(s) for s in result.strategies]
    rng.shuffle(names)
    rows = list(result.measurements)
    rng.shuffle(rows)
    shuffled = _result(rows, names)
    assert _marks(shuffled) == _marks(result)
    assert _judged(shuffled) == _judged(result)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(results(), st.sampled_from([2.0**-8, 0.25, 2.0, 2.0**12]))
def test_a_faster_or_slower_machine_changes_no_verdict(result: BenchmarkResult, scale: float) -> None:
    """Every time times one factor (a power of two, so that every ratio is the same to the last bit)."""
    scaled = _result(_rebuilt(result, lambda m: {"seconds": tuple(s * scale for s in m.seconds)}),
                     [str(s) for s in result.strategies])  # fmt: skip
    assert _marks(scaled) == _marks(result)
    assert _judged(scaled, scale) == _judged(result)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(results(), st.sampled_from([2, 4, 16]))
def test_the_same_rows_at_a_batch_change_no_verdict(result: BenchmarkResult, batch: int) -> None:
    batched = _result(_rebuilt(result, lambda m: {"config": Config(*m.config[:2], batch)}),
                      [str(s) for s in result.strategies])  # fmt: skip
    assert _marks(batched) == _marks(result)
    assert _judged(batched) == _judged(result)


@settings(max_examples=40, derandomize=True, deadline=None)
@given(results(batch=1), results(batch=4))
def test_a_sweep_at_two_batches_is_fitted_per_batch(single: BenchmarkResult, batched: BenchmarkResult) -> None:
    """The choice is made at the larger batch (as long a context, more sequences), and fitted on that batch's rows
    alone: the other batch's rows, however they ran, change neither its fits nor its crossovers; each batch's rows
    are marked against that batch's rows only."""
    names = list(dict.fromkeys([*map(str, single.strategies), *map(str, batched.strategies)]))
    both = _result([*single.measurements, *batched.measurements], names)
    alone = _result(list(batched.measurements), names)
    longest = max(c.prompt_tokens + c.new_tokens for c in single.configs)
    if longest <= max(c.prompt_tokens + c.new_tokens for c in batched.configs):
        judged = _judged(both)
        assert judged == _judged(alone)
        if judged is not None:
            assert choice(both).config == choice(alone).config and choice(both).config.batch == 4
    marks = pareto_marks(both)
    assert marks == {**pareto_marks(single), **pareto_marks(alone)}


def _figures(m: Measurement) -> Point:
    """A row's three figures as docs/choosing.md names them: its median seconds, KV bytes counted, KL."""
    kv = None if m.kv_bytes is None else float(m.kv_bytes)
    return Point(statistics.median(m.seconds), kv, None if m.quality is None else m.quality.kl_nats)


def _within_noise(a: Measurement, b: Measurement) -> bool:
    """The rounds cannot tell two rows' times apart (docs/choosing.md): fewer than 3 rounds a side or rounds not run
    side by side give no interval to tell them by, else the 95% interval of their per-round ratio holds 1."""
    if len(a.seconds) != len(b.seconds) or len(a.seconds) < 3 or min((*a.seconds, *b.seconds)) <= 0:
        return True
    interval = speedup_interval(a.seconds, b.seconds)
    return interval is None or interval[0] <= 1 <= interval[1]


def _undecided(rows: list[Measurement], close: set[frozenset[int]]) -> set[frozenset[int]]:
    """The pairs within noise that hold off: whether that cache pays is open, so neither beats the other."""
    return {pair for pair in close if any(str(rows[i].strategy) == "off" for i in pair)}


def _series(result: BenchmarkResult, largest: Config) -> list[Config]:
    """The sweep through the largest configuration, as docs/choosing.md says it: its prompt lengths, or its new
    tokens where those are more, at its batch, shortest context first."""
    prompts = [c for c in result.configs if (c.new_tokens, c.batch) == (largest.new_tokens, largest.batch)]
    news = [c for c in result.configs if (c.prompt_tokens, c.batch) == (largest.prompt_tokens, largest.batch)]
    return sorted(news if len(news) > len(prompts) else prompts, key=lambda c: c.prompt_tokens + c.new_tokens)


def _first_flip(a: Polynomial, b: Polynomial, low: int, high: int) -> int | None:
    """The first whole context past ``low`` where the curve that was slower at ``low`` is faster: tried one by one."""
    before = a(low) - b(low)
    return next((at for at in range(low + 1, high + 1) if before and (a(at) - b(at) > 0) != (before > 0)), None)


def _check_crossovers(result: BenchmarkResult, found: Choice) -> None:
    series = _series(result, found.config)
    if len(series) < 4:
        assert found.fits == [] and found.crossovers == []
        return
    contexts = [c.prompt_tokens + c.new_tokens for c in series]
    *fitted, held_out = contexts
    low = fitted[0]
    for fit in found.fits:
        rows = [result.measurement(fit.strategy, c) for c in series]
        assert all(rows) and (fit.fitted, fit.checked_at) == (tuple(fitted), held_out)
        assert fit.curve == fit_polynomial([(x, statistics.median(m.seconds)) for x, m in zip(fitted, rows) if m])
        assert fit.measured_s == statistics.median(rows[-1].seconds)  # type: ignore[union-attr]
    falling = set(found.falling)
    for fit in found.fits:
        if min(fit.curve(x) for x in range(low, held_out + 1)) <= 0:
            assert fit.strategy in falling
    expected = set()
    for a, b in itertools.combinations(found.fits, 2):
        if {a.strategy, b.strategy} & falling:
            continue  # a fit that falls to no time predicts no crossover
        at = _first_flip(a.curve, b.curve, low, held_out)
        if at is not None:
            slower, faster = (a, b) if a.curve(low) > b.curve(low) else (b, a)
            expected.add((slower.strategy, faster.strategy, at, slower.measured_s / faster.measured_s))
    shown = {(c.overtaker, c.overtaken, c.context, c.measured_ratio) for c in found.crossovers}
    assert shown == expected


@settings(max_examples=80, derandomize=True, deadline=None)
@given(results())
def test_the_choice_agrees_with_brute_force(result: BenchmarkResult) -> None:
    for config in result.configs:
        rows = [m for m in result.measurements if m.config == config]
        close = {frozenset((i, j)) for i, j in itertools.combinations(range(len(rows)), 2)
                 if _within_noise(rows[i], rows[j])}  # fmt: skip
        marks = pareto_marks(result)
        expected = _oracle_frontier(list(map(_figures, rows)), close, _undecided(rows, close))
        assert [marks[m.config, m.strategy] for m in rows] == expected
    try:
        found = choice(result)
    except KVMagicError:
        return
    largest = max(result.configs, key=lambda c: (c.prompt_tokens + c.new_tokens, c.batch))
    assert found.config == largest
    rows = [m for m in result.measurements if m.config == largest]
    assert found.points == {m.strategy: _figures(m) for m in rows}
    assert found.close == {frozenset((a.strategy, b.strategy)) for a, b in itertools.combinations(rows, 2)
                           if _within_noise(a, b)}  # fmt: skip
    for beaten, by in found.beaten_by.items():
        assert "off" not in {str(beaten), str(by)} or frozenset((beaten, by)) not in found.close
        assert _oracle_beats(found.points[by], found.points[beaten], frozenset((beaten, by)) in found.close)
    assert set(found.frontier) | set(found.beaten_by) == set(found.points)
    _check_crossovers(result, found)


# --- models side by side, stopped part way ---------------------------------------------------------------------------

SHAPE = ModelShape(layers=2, hidden=64, intermediate=128, heads=4, kv_heads=2, head_dim=16, vocab=256,
                   dtype_bytes=4, weight_bytes=10_000)  # fmt: skip


class _Loaded:
    def __init__(self, name: str) -> None:
        self.model, self.name = name, name


def _one(name: str, stopped: str = "") -> BenchmarkResult:
    rows = [timed((8, 4), "off", [2.0, 2.1]), timed((8, 4), "dynamic", [1.0, 1.1])]
    return BenchmarkResult(model=name, measurements=rows, facts=RunFacts(stopped=stopped))


def _runner(names: list[str], at: int, how: str, measured: list[str]) -> Callable[..., BenchmarkResult]:
    """A stand-in for one model's benchmark: model ``at`` is interrupted, fails, or stops part way (``how``)."""

    def run(loaded: _Loaded, prompt: str, spec: BenchSpec, **_: Any) -> BenchmarkResult:
        here = at < len(names) and loaded.name == names[at]
        if here and how == "interrupted":
            raise KeyboardInterrupt
        if here and how == "failed":
            raise KVMagicError(f"{loaded.name} ran out of memory")
        measured.append(loaded.name)
        return _one(loaded.name, "interrupted" if here and how == "partial" else "")

    return run


@pytest.mark.parametrize("count", [2, 3, 5])
@pytest.mark.parametrize("how", ["finished", "interrupted", "failed", "partial"])
def test_a_run_of_models_that_stops_names_exactly_the_models_not_measured(
    monkeypatch: pytest.MonkeyPatch, count: int, how: str
) -> None:
    """Models 0..count-1, the run stopping at each model in turn: interrupted (Ctrl-C) or failed there, the models
    before it come back and it and every later one are left; one that stopped part way through its own sweep is
    kept, its rows being complete, and only the later ones are left."""
    from kvmagic.addons.models import models_run

    names = [f"org/model-{i}" for i in range(count)]
    monkeypatch.setattr(models_run, "check_model", lambda name, **keywords: None)
    monkeypatch.setattr(models_run, "load_model", lambda name, **keywords: _Loaded(name))
    monkeypatch.setattr(models_run, "model_shape", lambda model: SHAPE)
    monkeypatch.setattr(models_run, "release_memory", lambda: None)
    for at in range(count) if how != "finished" else [count]:
        measured: list[str] = []
        monkeypatch.setattr(models_run, "run_benchmark", _runner(names, at, how, measured))
        if at == 0 and how in ("interrupted", "failed"):
            with pytest.raises(KeyboardInterrupt if how == "interrupted" else KVMagicError):
                models_run.run_models(names, "hello", new_tokens=4)
            continue
        found = models_run.run_models(names, "hello", new_tokens=4)
        kept = at + 1 if how == "partial" else at
        assert found.models == measured == names[:kept]
        assert found.left == names[kept:]
        assert found.partial is (how != "finished")
        assert set(found.shapes) == set(names[:kept])
        for name in found.left:
            assert any(name in note for note in found.notes()), name
        again = type(found).from_dict(found.to_dict())
        assert (again.models, again.left, again.partial) == (found.models, found.left, found.partial)


def test_models_are_partial_where_one_model_s_own_sweep_stopped() -> None:
    """A saved run whose every model was reached is still partial where one of them stopped part way."""
    from kvmagic.addons.models.models_result import ModelsResult

    assert ModelsResult([_one("a"), _one("b", "interrupted")]).partial
    assert not ModelsResult([_one("a"), _one("b")]).partial


def test_rows_whose_rounds_tie_exactly_are_within_noise() -> None:
    """An interval that reaches 1 exactly holds it: two rows timed alike, round by round, tie on speed, so a row
    that holds more KV but ran exactly as fast is beaten on bytes alone, never on its luck."""
    same = (0.5, 0.6, 0.55)
    rows = [timed((8, 4), "off", [2.0, 2.2, 2.1]), timed((8, 4), "dynamic", same, kv_bytes=2000),
            timed((8, 4), "quantized:fp8", same, kv_bytes=1000)]  # fmt: skip
    found = choice(_result(rows, ["off", "dynamic", "quantized:fp8"]))
    assert found.close == {frozenset(parse_list("dynamic,quantized:fp8"))}
    assert found.beaten_by == {DYNAMIC: parse("quantized:fp8")}


def test_the_oracle_for_crossovers_flips_where_a_hand_computed_root_lies() -> None:
    # 0.5 flat against 0.1 + 0.0079 L: equal at 50.6, so the rising one is slower from 51 on
    rising, flat = Polynomial((0.1, 0.0079)), Polynomial((0.5,))
    assert _first_flip(flat, rising, 10, 100) == 51 and _first_flip(rising, flat, 10, 100) == 51
    assert _first_flip(flat, rising, 10, 50) is None
    assert rising(50) < 0.5 < rising(51)
