"""A curve through timings: the polynomial in a length of the lowest degree (0 to 2) that the points support,
fitted to relative residuals, and where two such curves cross or how low one falls over a range.

What grows with a length (a forward over L tokens, a run over a context) is fitted so, from a few points, and a
higher degree is taken only where it predicts held-out points better. Pure Python, exactly checkable by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["MAX_DEGREE", "Polynomial", "crossing", "fit_polynomial", "lowest"]

MAX_DEGREE = 2


@dataclass(frozen=True)
class Polynomial:
    """``coefficients[k] * L**k`` summed: seconds as a function of a length."""

    coefficients: tuple[float, ...]

    @property
    def degree(self) -> int:
        return len(self.coefficients) - 1

    def __call__(self, length: float) -> float:
        return sum(c * length**k for k, c in enumerate(self.coefficients))

    def describe(self) -> str:
        terms = [
            f"{c:.3g}" if k == 0 else f"{c:+.3g}*L" + ("" if k == 1 else f"^{k}")
            for k, c in enumerate(self.coefficients)
        ]
        return " ".join(terms) + " s"


def _least_squares(points: Sequence[tuple[float, float]], degree: int) -> Polynomial:
    """Least squares of the relative residuals ``(p(L) - t) / t``, through the normal equations.

    Relative, because a speed-up is a ratio: a short length's few milliseconds matter as much as a
    long one's hundred. Lengths are scaled to [0, 1] to keep the system well conditioned.
    """
    scale = max(abs(x) for x, _ in points) or 1.0
    size = degree + 1
    weighted = [(x / scale, y, 1 / (y * y)) for x, y in points]
    matrix = [[sum(w * x ** (i + j) for x, _, w in weighted) for j in range(size)] for i in range(size)]
    vector = [sum(w * y * x**i for x, y, w in weighted) for i in range(size)]
    solution = _solve(matrix, vector)
    return Polynomial(tuple(c / scale**k for k, c in enumerate(solution)))


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (at most 3 x 3 here)."""
    size = len(vector)
    rows = [[*row, value] for row, value in zip(matrix, vector)]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(rows[r][col]))
        rows[col], rows[pivot] = rows[pivot], rows[col]
        if rows[col][col] == 0:
            raise ValueError("singular system: the lengths do not determine this degree")
        for r in range(col + 1, size):
            factor = rows[r][col] / rows[col][col]
            rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col])]
    solution = [0.0] * size
    for r in reversed(range(size)):
        solution[r] = (rows[r][size] - sum(rows[r][c] * solution[c] for c in range(r + 1, size))) / rows[r][r]
    return solution


def _held_out_error(points: Sequence[tuple[float, float]], degree: int) -> float:
    """Mean squared relative error predicting each point from a fit to the others (leave-one-out)."""
    errors = []
    for index, (x, y) in enumerate(points):
        rest = [p for i, p in enumerate(points) if i != index]
        errors.append((_least_squares(rest, degree)(x) / y - 1) ** 2)
    return sum(errors) / len(errors)


def fit_polynomial(points: Sequence[tuple[float, float]], max_degree: int = MAX_DEGREE) -> Polynomial:
    """The polynomial of degree 0..``max_degree`` that best predicts held-out points.

    A degree is a candidate only with one distinct length more than it has coefficients, so that
    leaving one out still leaves it determined; a higher degree must cut the held-out error by 10%
    to be chosen, so noise alone rarely buys a curve. Errors count relative to each timing.
    """
    if not points:
        raise ValueError("no points to fit")
    if any(y <= 0 for _, y in points):
        raise ValueError("timings must be positive: residuals count relative to them")
    distinct = len({x for x, _ in points})
    best_degree, best_error = 0, math.inf
    for degree in range(max_degree + 1):
        if distinct < degree + 2:
            break
        error = _held_out_error(points, degree)
        if error < 0.9 * best_error:
            best_degree, best_error = degree, error
    return _least_squares(points, best_degree)


def crossing(first: Polynomial, second: Polynomial, low: int, high: int) -> int | None:
    """The first whole length in (``low``, ``high``] at which the order of two curves has flipped from theirs at
    ``low``: where the one that was slower there becomes the faster. None where they keep their order (a tie at
    ``low`` is no order to flip), or only touch. Found from the roots of their difference (degree 2 at most)."""
    size = max(len(first.coefficients), len(second.coefficients))
    padded = [tuple(c.coefficients) + (0.0,) * (size - len(c.coefficients)) for c in (first, second)]
    difference = Polynomial(tuple(a - b for a, b in zip(*padded)))
    before = difference(low)
    if before == 0:
        return None
    for root in sorted(_roots(difference)):
        after = math.floor(root) + 1
        if low < root and after <= high and (difference(after) > 0) != (before > 0):
            return after
    return None


def lowest(curve: Polynomial, low: float, high: float) -> float:
    """The least value ``curve`` (degree 2 at most) takes over [``low``, ``high``]: at an end, or at its vertex."""
    c = [*curve.coefficients, 0.0, 0.0]
    candidates = [low, high]
    if c[2] > 0 and low < -c[1] / (2 * c[2]) < high:
        candidates.append(-c[1] / (2 * c[2]))
    return min(curve(length) for length in candidates)


def _roots(curve: Polynomial) -> list[float]:
    """The real roots of a polynomial of degree 2 at most (highest coefficients 0 count as absent)."""
    c = list(curve.coefficients)
    while len(c) > 1 and c[-1] == 0:
        c.pop()
    if len(c) == 2:
        return [-c[0] / c[1]]
    if len(c) == 3:
        discriminant = c[1] ** 2 - 4 * c[2] * c[0]
        if discriminant < 0:
            return []
        return [(-c[1] + sign * math.sqrt(discriminant)) / (2 * c[2]) for sign in (1, -1)]
    if len(c) > 3:
        raise ValueError(f"roots of degree {len(c) - 1}: the curves here are of degree {MAX_DEGREE} at most")
    return []
