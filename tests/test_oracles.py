"""The judgement layer against oracles written here from its documents, not from its code: a brute-force trade-off
frontier over random rows, the significance test of ``--compare`` at every size from 2 to 8 rounds a side against an
exact enumeration, the intervals' invariances, and the progress bar's time left against a hand computation on an
injected clock."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvmagic.addons.baseline.compare import compare
from kvmagic.core import intervals, sequential, stats
from kvmagic.core.config import Config
from kvmagic.core.pareto import Point, beats, better, on_frontier
from kvmagic.core.spec import BenchSpec
from kvmagic.results.result import BenchmarkResult
from kvmagic.runner.progress import HELD_SHORT, LEFT_OF_LATE, Eta

from .records import timed

# --- the trade-off frontier ------------------------------------------------------------------------------------------

# As docs/choosing.md and core/pareto.py state it: lower is better on every figure; KV bytes within 1% of the larger
# tie; an unknown figure is not guessed, so a row leaves the frontier only to one that beats it whatever the unknown
# is: the worst case for the one who beats is the beaten row's unknown at its best (no bytes, KL 0) and its own
# unknown at a value past any other. Two rows that both lack a figure tie on it.
_WORST = 1e300  # an unknown figure of the row that would beat: worse than any figure a row has
_SHARES = (0.0, 0.01, 0.0)  # how close two figures tie, as a share of the larger: KV bytes within 1%


def _tie(mine: float, theirs: float, share: float) -> bool:
    return abs(mine - theirs) <= share * max(abs(mine), abs(theirs))


def _oracle_beats(a: Point, b: Point, same_speed: bool = False) -> bool:
    """Pareto dominance, ties and unknowns as the docs say, written as "no worse everywhere, strictly better once"."""
    no_worse, strictly = [], []
    for index, (mine, theirs, share) in enumerate(zip(a.figures(), b.figures(), _SHARES)):
        if index == 0 and same_speed:
            mine = theirs = 1.0  # the rounds cannot tell the two times apart: a tie
        if mine is None and theirs is None:
            mine = theirs = 0.0
        elif theirs is None:
            theirs = 0.0  # the beaten row's unknown, at the best it could be
        elif mine is None:
            mine = _WORST
        assert mine is not None and theirs is not None
        tied = _tie(mine, theirs, share)
        no_worse.append(tied or mine < theirs)
        strictly.append(not tied and mine < theirs)
    return all(no_worse) and any(strictly)


def _oracle_better(a: Point, b: Point, same_speed: bool = False) -> tuple[bool | None, ...]:
    found: list[bool | None] = []
    for index, (mine, theirs, share) in enumerate(zip(a.figures(), b.figures(), _SHARES)):
        if mine is None or theirs is None:
            found.append(None)
        else:
            found.append(not (index == 0 and same_speed) and mine < theirs and not _tie(mine, theirs, share))
    return tuple(found)


def _oracle_frontier(
    points: Sequence[Point], close: set[frozenset[int]], undecided: set[frozenset[int]] = frozenset()
) -> list[bool]:
    """Each point on the frontier where no other beats it; an ``undecided`` pair's two never beat each other."""
    return [
        all(
            frozenset((i, j)) in undecided or not _oracle_beats(other, point, frozenset((i, j)) in close)
            for j, other in enumerate(points)
            if j != i
        )
        for i, point in enumerate(points)
    ]


# Few distinct values, so that ties, near ties (1% of the bytes, measured against the larger: 1090 and 1101 tie, 1000
# and 1011 do not) and unknowns are common.
_SECONDS = st.sampled_from([0.5, 0.75, 1.0, 1.0, 2.0, 3.57])
_BYTES = st.sampled_from([None, 0.0, 250.0, 1000.0, 1008.0, 1010.0, 1011.0, 1090.0, 1101.0, 4000.0])
_KL = st.sampled_from([None, 0.0, 0.0, 1e-9, 0.001, 0.002])
_POINTS = st.lists(st.builds(Point, _SECONDS, _BYTES, _KL), min_size=1, max_size=7)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(_POINTS, st.data())
def test_the_frontier_is_the_brute_force_one(points: list[Point], data: st.DataObject) -> None:
    pairs = [frozenset(p) for p in itertools.combinations(range(len(points)), 2)]
    close = set(data.draw(st.lists(st.sampled_from(pairs), unique=True)) if pairs else [])
    undecided = set(data.draw(st.lists(st.sampled_from(sorted(close, key=sorted)), unique=True)) if close else [])
    assert on_frontier(points, close, undecided) == _oracle_frontier(points, close, undecided)
    for i, j in itertools.permutations(range(len(points)), 2):
        noise = frozenset((i, j)) in close
        assert beats(points[i], points[j], noise) == _oracle_beats(points[i], points[j], noise)
        assert better(points[i], points[j], noise) == _oracle_better(points[i], points[j], noise)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(_POINTS, st.randoms(use_true_random=False))
def test_the_frontier_does_not_depend_on_the_rows_order(points: list[Point], rng: random.Random) -> None:
    order = list(range(len(points)))
    rng.shuffle(order)
    shuffled = [points[i] for i in order]
    marks = on_frontier(points)
    assert on_frontier(shuffled) == [marks[i] for i in order]


@pytest.mark.parametrize(
    ("a", "b", "same_speed", "expected"),
    [
        (Point(1.0, 1000, 0.0), Point(1.0, 1000, 0.0), False, False),  # equal on every figure: no one beats
        (Point(2.0, 500, 0.0), Point(1.0, 1000, 0.0), True, True),  # speed within noise, half the bytes
        (Point(2.0, 500, 0.0), Point(1.0, 1000, 0.0), False, False),  # the medians decide: slower
        (Point(0.5, 1009, 0.0), Point(1.0, 1000, 0.0), False, True),  # 9 bytes of 1009 tie
        (Point(0.5, 1011, 0.0), Point(1.0, 1000, 0.0), False, False),  # 11 bytes of 1011 do not
        (Point(0.5, 1101, 0.0), Point(1.0, 1090, 0.0), False, True),  # 11 bytes of 1101 do: 1% of the larger
        (Point(1.0, 1090, 0.0), Point(1.0, 1101, 0.0), False, False),  # ... so 1090 is not fewer than 1101
        (Point(0.5, 0, None), Point(1.0, 0, None), False, True),  # neither read quality: speed decides
        (Point(0.5, 0, 0.0), Point(1.0, 0, None), False, True),  # KL 0 is as good as any unknown
        (Point(0.5, 0, 1e-9), Point(1.0, 0, None), False, False),  # the least loss might still be a loss
        (Point(0.5, 0, None), Point(1.0, 0, 0.5), False, False),  # an unread row beats none that was read
        (Point(0.5, None, 0.0), Point(1.0, 0, 0.0), False, False),  # bytes not counted: might be more
    ],
)
def test_the_oracle_reads_the_docs_as_written(a: Point, b: Point, same_speed: bool, expected: bool) -> None:
    """The oracle's own reading of docs/choosing.md, on cases worked out by hand, so that it cannot agree with a
    wrong code by sharing its mistake."""
    assert _oracle_beats(a, b, same_speed) is expected
    assert beats(a, b, same_speed) is expected


# --- the significance test of --compare ------------------------------------------------------------------------------

ALPHA = intervals.SIGNIFICANCE
SIZES = range(2, 9)


def _u_null(m: int, n: int) -> Counter[int]:
    """Mann-Whitney's U = (rank sum of the first sample) - m(m+1)/2 over every one of the C(m+n, m) ways to give
    the first sample m of the ranks 1..m+n: its exact distribution where the two samples are alike."""
    return Counter(sum(ranks) - m * (m + 1) // 2 for ranks in itertools.combinations(range(1, m + n + 1), m))


_NULLS = {(m, n): _u_null(m, n) for m in SIZES for n in SIZES}


def _u(x: Sequence[float], y: Sequence[float]) -> int:
    """U counted pair by pair: how many (x, y) pairs have the x above (the samples have no tie)."""
    return sum(a > b for a in x for b in y)


def _exact_p(x: Sequence[float], y: Sequence[float]) -> Fraction:
    null, u = _NULLS[len(x), len(y)], _u(x, y)
    total = sum(null.values())
    low = Fraction(sum(c for value, c in null.items() if value <= u), total)
    high = Fraction(sum(c for value, c in null.items() if value >= u), total)
    return min(Fraction(1), 2 * min(low, high))


def _rank_test_reaches(m: int, n: int) -> bool:
    """Whether the exact test can fire at all: its smallest p-value, every x above every y, is at most 5%."""
    return _exact_p([float(n + i) for i in range(m)], [float(j) for j in range(n)]) <= ALPHA


def _t_tail(t: float, df: float) -> float:
    """P(|T| >= t) for Student's t, by Simpson's rule on the density over [0, atan t] after x = tan(theta), a
    finite and smooth integrand, from the density's own formula: nothing shared with core/distributions."""
    norm = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))

    def integrand(theta: float) -> float:
        x = math.tan(theta)
        return norm * (1 + x * x / df) ** (-(df + 1) / 2) / math.cos(theta) ** 2

    end, steps = math.atan(abs(t)), 4000
    h = end / steps
    inner = sum((4 if k % 2 else 2) * integrand(k * h) for k in range(1, steps))
    return max(0.0, 1 - 2 * (integrand(0.0) + inner + integrand(end)) * h / 3)


def _welch_oracle_p(x: Sequence[float], y: Sequence[float]) -> float:
    vx, vy = statistics.variance(x) / len(x), statistics.variance(y) / len(y)
    t = (statistics.fmean(x) - statistics.fmean(y)) / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    return _t_tail(t, df)


def _rounds(logs: Sequence[float], rng: random.Random) -> list[tuple[float, float]]:
    """Rounds whose log speed-ups are ``logs``, each with its own drift shared by both of its runs."""
    rounds = []
    for log in logs:
        cached = rng.uniform(0.01, 2.0)
        rounds.append((cached * math.exp(log), cached))
    return rounds


def test_the_exact_test_is_used_exactly_where_it_can_reach_five_per_cent() -> None:
    reaches = {(m, n) for m in SIZES for n in SIZES if _rank_test_reaches(m, n)}
    # 2 against 8 and 3 against 5 can; 2 against 7, 3 against 4 cannot (2/36, 2/35 > 5%)
    assert {(2, 8), (8, 2), (3, 5), (4, 4)} <= reaches and not {(2, 7), (3, 4), (3, 3), (2, 2)} & reaches
    rng = random.Random(7)
    for m, n in itertools.product(SIZES, SIZES):
        # every "now" above every "was", one of them far out: the exact test fires where it can; Welch's t, which
        # the outlier's spread keeps quiet, does not
        x, y = [1.0 + 0.01 * i for i in range(m - 1)] + [30.0], [0.5 + 0.01 * j for j in range(n)]
        assert _welch_oracle_p(x, y) > ALPHA
        assert intervals.significant_change(_rounds(x, rng), _rounds(y, rng)) is ((m, n) in reaches), (m, n)


@pytest.mark.parametrize("m", SIZES)
def test_every_size_decides_as_the_exact_enumeration_or_welch_where_it_cannot_reach(m: int) -> None:
    rng = random.Random(m)
    for n in SIZES:
        exact = _rank_test_reaches(m, n)
        for trial in range(40):
            shift = rng.choice([0.0, 0.05, 0.2, 0.6])
            x = [rng.gauss(shift, 0.1) for _ in range(m)]
            y = [rng.gauss(0.0, 0.1) for _ in range(n)]
            if trial % 4 == 0:
                x[0] = 3.0  # a slow round, as a loaded machine makes one
            now, was = _rounds(x, rng), _rounds(y, rng)
            logs = [[math.log(u / c) for u, c in side] for side in (now, was)]
            if exact:
                expected = _exact_p(*logs)
                assert intervals._rank_sum_p(*logs) == pytest.approx(float(expected), rel=1e-12)
                decided = expected <= ALPHA
            else:
                p = _welch_oracle_p(*logs)
                assert intervals._welch_p(*logs) == pytest.approx(p, rel=1e-6, abs=1e-9)
                if abs(p - ALPHA) < 1e-6:
                    continue  # too close to call by quadrature
                decided = p <= ALPHA
            assert intervals.significant_change(now, was) is decided, (m, n, x, y)


def test_a_single_round_on_either_side_has_no_answer() -> None:
    two = [(2.0, 1.0), (2.2, 1.0)]
    for n in SIZES:
        assert intervals.significant_change([(3.0, 1.0)], two * (n // 2)) is None
        assert intervals.significant_change(two * (n // 2), [(3.0, 1.0)]) is None


def _decides(now: Sequence[float], was: Sequence[float]) -> bool | None:
    """The oracle's verdict on two runs' per-round log speed-ups: the exact test where it can reach 5%, else Welch."""
    if min(len(now), len(was)) < 2:
        return None
    if _rank_test_reaches(len(now), len(was)):
        return _exact_p(now, was) <= ALPHA
    return _welch_oracle_p(now, was) <= ALPHA


def _run(rounds: int, rng: random.Random, speedups: dict[str, float]) -> BenchmarkResult:
    names = ["off", *speedups]
    rows = []
    for prompt in (16, 64):
        drift = [rng.uniform(0.5, 2.0) for _ in range(rounds)]
        rows.append(timed((prompt, 8), "off", [d * prompt / 16 for d in drift]))
        for name, speedup in speedups.items():
            times = [d * prompt / 16 / (speedup * math.exp(rng.gauss(0.0, 0.1))) for d in drift]
            rows.append(timed((prompt, 8), name, times))
    return BenchmarkResult(model="tiny", measurements=rows, spec=BenchSpec(cache=tuple(names)), strategies=names)


@pytest.mark.parametrize(("now_rounds", "was_rounds"), [(1, 3), (2, 2), (3, 4), (2, 8), (4, 5), (5, 5), (8, 3)])
def test_compare_judges_each_row_on_its_own_rounds_against_the_saved_ones(now_rounds: int, was_rounds: int) -> None:
    """``--compare`` marks a row significant as the oracle judges that row's per-round speed-ups (its own rounds
    against ``off``'s, at its own configuration) against the saved run's of the same row."""
    rng = random.Random(now_rounds * 10 + was_rounds)
    was = _run(was_rounds, rng, {"dynamic": 3.0, "static": 2.5, "quantized:fp8": 2.0})
    now = _run(now_rounds, rng, {"dynamic": 3.0, "static": 2.0, "quantized:fp8": 2.6})
    rows = compare(now, was).rows()
    assert [row["strategy"] for row in rows] == [str(m.strategy) for m in now.measurements]
    for row in rows:
        config, strategy = Config(row["prompt_tokens"], row["new_tokens"]), row["strategy"]
        if strategy == "off":
            assert row["significant"] is None and math.isnan(row["speedup_was"])
            continue
        logs = []
        for run in (now, was):
            off, other = run.measurement("off", config), run.measurement(strategy, config)
            assert off is not None and other is not None
            logs.append([math.log(u / c) for u, c in zip(off.seconds, other.seconds)])
        assert row["significant"] is _decides(*logs), (config, strategy)
        saved = statistics.median(was.measurement("off", config).seconds) / statistics.median(
            was.measurement(strategy, config).seconds
        )
        assert row["speedup_was"] == pytest.approx(saved)
        assert row["speedup_change"] == pytest.approx(row["speedup"] / saved - 1)


# --- the intervals ---------------------------------------------------------------------------------------------------

_TIMES = st.floats(min_value=0.01, max_value=100.0, allow_nan=False)
_RUNS = st.integers(2, 12).flatmap(lambda n: st.tuples(st.lists(_TIMES, min_size=n, max_size=n),
                                                       st.lists(_TIMES, min_size=n, max_size=n)))  # fmt: skip


@settings(max_examples=300, derandomize=True, deadline=None)
@given(_RUNS, st.sampled_from([2.0**-6, 0.5, 2.0, 2.0**10]), st.lists(st.sampled_from([0.25, 1.0, 4.0]), min_size=12))
def test_the_speedup_interval_ignores_the_machine_s_speed_and_each_round_s_drift(
    runs: tuple[list[float], list[float]], scale: float, drift: list[float]
) -> None:
    uncached, cached = runs
    found = intervals.speedup_interval(uncached, cached)
    scaled = intervals.speedup_interval([u * scale for u in uncached], [c * scale for c in cached])
    drifted = intervals.speedup_interval(
        [u * d for u, d in zip(uncached, drift)], [c * d for c, d in zip(cached, drift)]
    )
    if found is None:
        assert scaled is None and drifted is None
        return
    assert scaled == pytest.approx(found, rel=1e-9) and drifted == pytest.approx(found, rel=1e-9)
    swapped = intervals.speedup_interval(cached, uncached)
    assert swapped is not None and swapped == pytest.approx((1 / found[1], 1 / found[0]), rel=1e-9)
    estimate = intervals.speedup_estimate(uncached, cached)
    assert intervals.speedup_estimate(cached, uncached) == pytest.approx(1 / estimate, rel=1e-9)
    # an interval bounds the median of the per-round speed-ups, whichever way the rounds are listed
    order = sorted(range(len(uncached)), key=lambda i: drift[i % len(drift)])
    assert intervals.speedup_interval([uncached[i] for i in order], [cached[i] for i in order]) == pytest.approx(found)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(_RUNS)
def test_the_half_width_is_the_wider_side(runs: tuple[list[float], list[float]]) -> None:
    uncached, cached = runs
    found = intervals.speedup_interval(uncached, cached)
    if found is None:
        return
    low, high = found
    estimate = intervals.speedup_estimate(uncached, cached)
    below, above = (estimate - low) / estimate, (high - estimate) / estimate
    width = stats.relative_half_width(estimate, low, high)
    assert width == pytest.approx(max(below, above), rel=1e-12)
    assert width >= below and width >= above


def test_the_half_width_of_a_lopsided_interval_is_its_long_side() -> None:
    assert stats.relative_half_width(2.0, 1.9, 3.0) == pytest.approx(0.5)  # +50%, -5%
    assert stats.relative_half_width(2.0, 1.0, 2.1) == pytest.approx(0.5)  # -50%, +5%


@pytest.mark.parametrize("ratios", [[1.98, *[2.0] * 8, 2.16], [1.84, *[2.0] * 8, 2.02]])
def test_auto_stops_only_when_the_wider_side_meets_the_target(ratios: list[float]) -> None:
    """At 10 rounds the anytime interval runs from the lowest per-round speed-up to the highest: 1% on one side of
    the median 2.0, 8% on the other, 4.5% on average. A target of 5% is not met on the wider side, so the rounds
    go on; 8.1% is."""
    ones = [1.0] * 10
    assert not sequential.auto_should_stop(ratios, ones, 0.05)
    assert sequential.auto_should_stop(ratios, ones, 0.081)


@pytest.mark.parametrize("pairs", range(1, 15))
def test_the_order_statistic_depth_is_the_deepest_that_covers_over_every_sign_pattern(pairs: int) -> None:
    """Each round falls below the true median like a fair coin: over all 2^n patterns, the k-th lowest and k-th
    highest bound it unless k or more fell on one side, so the depth is the largest k covering at least 95%."""

    def covered(depth: int) -> Fraction:
        inside = sum(depth <= bin(flips).count("1") <= pairs - depth for flips in range(2**pairs))
        return Fraction(inside, 2**pairs)

    deepest = max((k for k in range(1, pairs // 2 + 1) if covered(k) >= Fraction(95, 100)), default=0)
    assert intervals.order_statistic_depth(pairs, 0.95) == deepest


# --- the progress bar's time left ------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _plan(rng: random.Random) -> tuple[list[dict[str, float]], int]:
    strategies = ["off", "dynamic", "static", "quantized:fp8"][: rng.randint(1, 4)]
    configs = [{s: rng.choice([0.5, 1.0, 2.0, 7.0]) * (c + 1) for s in strategies} for c in range(rng.randint(1, 4))]
    return configs, rng.randint(1, 3)


@pytest.mark.parametrize("seed", range(30))
def test_a_machine_at_a_steady_pace_is_told_its_time_left_exactly(seed: int) -> None:
    """Every run takes ``pace`` times its estimate, as the runs made (the warm-up first) project it: at any moment
    within a run, the time left is pace x (the estimates of every run still to come, the one under way included)
    less what it has run, and the gaps between configurations measured so far, at their mean, once after this
    configuration and once before each later one; the bar's share is the time spent over the time spent plus
    that."""
    rng = random.Random(seed)
    runs, rounds = _plan(rng)
    pace = rng.choice([0.5, 1.0, 3.0])
    clock = Clock()
    eta = Eta([{s: pace * seconds for s, seconds in c.items()} for c in runs], rounds, clock=clock)
    start = clock.t
    to_come = [runs[i][s] for i in range(len(runs)) for _ in range(rounds) for s in runs[i]]
    gaps: list[float] = []
    for index, config in enumerate(runs):
        gap = rng.uniform(0.0, 5.0)  # one-token runs, a warm-up: not a timed run
        clock.t += gap
        eta.begin(index, list(config))
        for done in range(rounds * len(config)):
            name = list(config)[done % len(config)]
            estimate = to_come[0]
            assert estimate == config[name]
            into = rng.uniform(0.0, 0.999) * pace * estimate
            clock.t += into
            share, left = eta.now()
            between = sum(gaps) / len(gaps) * (len(runs) - index) if gaps else 0.0
            assert left == pytest.approx(pace * sum(to_come) - into + between, rel=1e-9, abs=1e-9)
            spent = clock.t - start
            assert share == pytest.approx(min(HELD_SHORT, spent / (spent + left)), rel=1e-9)
            clock.t += pace * estimate - into
            eta.ran(pace * estimate)
            to_come.pop(0)
            if index and not done:
                gaps.append(gap)


def test_first_estimates_are_forgotten_once_the_runs_renew_them() -> None:
    """The first estimates are wrong together (a busy machine), by any factor; the first run renews them from what
    it took, and from then on the time left does not depend on the factor."""
    rng = random.Random(3)
    for _ in range(20):
        runs, rounds = _plan(rng)
        taken = rng.uniform(0.1, 5.0)
        pace = taken / runs[0][next(iter(runs[0]))]
        lefts = []
        for factor in (1.0, 0.01, 40.0):
            clock = Clock()
            eta = Eta([{s: factor * v for s, v in c.items()} for c in runs], rounds, clock=clock)
            eta.begin(0, list(runs[0]))
            clock.t += taken
            eta.ran(taken)
            eta.update([{s: pace * v for s, v in c.items()} for c in runs])
            clock.t += 1e-3  # into the next run, before any estimate is passed
            lefts.append(eta.now()[1])
        assert lefts[1] == pytest.approx(lefts[0], rel=1e-9) and lefts[2] == pytest.approx(lefts[0], rel=1e-9)


def test_a_run_past_its_estimate_sets_the_pace_by_hand() -> None:
    """One configuration of off 4 s and dynamic 1 s, 2 rounds. The first run takes 4 s, as projected; the second
    is 3 s in against its 1 s: late by 2 s (3 times its projection), it is taken to need half those 2 s again,
    and the two runs left (4 + 1 s) at its pace, 3 x 5 = 15 s: 16 s in all."""
    clock = Clock()
    eta = Eta([{"off": 4.0, "dynamic": 1.0}], 2, clock=clock)
    eta.begin(0, ["off", "dynamic"])
    clock.t += 4.0
    eta.ran(4.0)
    clock.t += 3.0
    share, left = eta.now()
    assert left == pytest.approx(LEFT_OF_LATE * (3.0 - 1.0) + 3.0 * (4.0 + 1.0))
    assert share == pytest.approx(7.0 / (7.0 + left))
