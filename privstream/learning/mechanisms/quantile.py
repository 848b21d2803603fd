"""A private quantile on a public grid (the exponential mechanism of Smith 2011), and per-feature
bounds from two of them.

**The quantile.** The domain is a public range ``[lo, hi]`` cut into ``cells`` equal cells; the
candidates are the ``cells + 1`` grid points ``g_j = lo + j (hi - lo)/cells``. A value outside the
range is clipped to it. With ``L_j = #{i : x_i < g_j}`` and ``R_j = #{i : x_i <= g_j}``, ``g_j`` is a
``q``-quantile of the ``n`` values when ``L_j <= q·n <= R_j``; its score is how far it is from one,

    ``u(g_j) = -max(0, L_j - q·n, q·n - R_j)``

(``-|L_j - q·n|`` where no value sits on ``g_j``), and the release is ``g_j`` with probability
``∝ exp(ε u(g_j) / 2)`` (the exponential mechanism, McSherry & Talwar 2007; on intervals between
data points, Smith 2011). A feature whose values pile up on one point (a count that is often 0)
gets that point. **Sensitivity 1**: replacing one value moves each count by at most 1 (``n``
fixed); adding or removing one moves ``L_j - q·n`` and ``q·n - R_j`` each by ``1 - q`` or ``q``
in size; each term of the maximum moves by at most 1, so the maximum does. So the release is ε-DP
for either neighbouring relation.

Grid points between two consecutive data values share one score, so the mechanism runs over at
most ``n + 1`` blocks of grid points (:meth:`ExponentialMechanism.select_member`): exact sampling,
any number of cells.

**Accuracy.** The empty cells far from the quantile weigh ``exp(-ε q n / 2)`` each against the
cells at it, and there are up to ``cells`` of them: the estimate is good once
``ε·q·n/2`` is well above ``ln(cells)`` (a wide range or a fine grid costs examples, not privacy).

**Bounds.** :func:`private_bounds` releases, for each of ``d`` features, the ``q``- and
``(1 - q)``-quantiles at ``ε/(2d)`` each: ``2d`` ε/(2d)-DP releases on the same rows, ε-DP in total
by basic composition (Dwork & Roth 2014, Thm 3.16). An upper bound drawn at or below its lower bound
becomes the lower bound plus one cell (post-processing).

>>> from privstream.learning.randomness import seeded
>>> values = list(range(1000))
>>> m = PrivateQuantile(epsilon=1.0, lo=0, hi=1000, cells=1000, rng=seeded(3))
>>> 480 <= m.release(values, 0.5) <= 520
True
>>> rows = [[v, -v / 100] for v in range(10_000)]           # 1% of 10,000 rows: 100 per tail
>>> b = private_bounds(rows, epsilon=4.0, lo=-20_000, hi=20_000, cells=40_000, rng=seeded(4))
>>> b.epsilon, b.epsilon_per_quantile, b.bounds[0][0] in range(0, 300), b.bounds[0][1] in range(9700, 10_000)
(4.0, 1.0, True, True)
>>> -100 <= b.bounds[1][0] <= -97 and -3 <= b.bounds[1][1] <= 0       # on the grid: cells of width 1
True
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.errors import PrivacyParameterError
from privstream.learning.mechanisms._common import (
    ExactReal,
    Mechanism,
    exact_real,
    positive_int,
    positive_real,
)
from privstream.learning.mechanisms.exponential import Block, ExponentialMechanism
from privstream.learning.randomness import RandomSource

__all__ = ["PrivateBounds", "PrivateQuantile", "private_bounds"]


class PrivateQuantile(Mechanism):
    """The ε-DP ``q``-quantile of values on the public grid of ``cells`` cells over ``[lo, hi]``."""

    name: ClassVar[str] = "quantile"

    def __init__(
        self,
        epsilon: ExactReal,
        *,
        lo: float,
        hi: float,
        cells: int = 1024,
        rng: RandomSource | None = None,
    ) -> None:
        super().__init__(rng)
        self.epsilon = float(positive_real(epsilon, "epsilon"))
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise PrivacyParameterError(f"the range must be finite with lo < hi, got [{lo}, {hi}]")
        self.lo, self.hi = float(lo), float(hi)
        self.cells = positive_int(cells, "cells")
        self._selection = ExponentialMechanism(epsilon, 1, rng=self.rng)

    def guarantee(self) -> PrivacyGuarantee:
        return self._selection.guarantee()

    def point(self, j: int) -> float:
        """The grid point ``g_j``."""
        return self.lo + j * (self.hi - self.lo) / self.cells

    def _first_above(self, value: float, strict: bool) -> int:
        """The first grid index ``j`` with ``value < g_j`` (``strict``) or ``value <= g_j``
        (``cells + 1`` if none), the value clipped to the range: a public function of the value."""
        value = min(max(value, self.lo), self.hi)
        j = math.floor((value - self.lo) * self.cells / (self.hi - self.lo))
        j = min(max(j, 0), self.cells)
        while j > 0 and (value < self.point(j - 1) if strict else value <= self.point(j - 1)):
            j -= 1  # the division's float rounding, either way
        while j <= self.cells and (value >= self.point(j) if strict else value > self.point(j)):
            j += 1
        return j

    def blocks(self, values: Sequence[float], q: float) -> list[Block]:
        """The grid as blocks of equal score: ``(number of grid points, score)`` in grid order."""
        quantile = Fraction(repr(float(exact_real(q, "q"))))  # q as the decimal it is written as
        if not 0 < quantile < 1:
            raise PrivacyParameterError(f"q must be in (0, 1), got {q}")
        # x_i < g_j  ⟺  j >= below_i;  x_i <= g_j  ⟺  j >= at_i
        below = sorted(self._first_above(float(v), True) for v in values)
        at = sorted(self._first_above(float(v), False) for v in values)
        target = quantile * len(values)
        changes = sorted({0, *below, *at, self.cells + 1})
        out: list[Block] = []
        for j, nxt in itertools.pairwise(c for c in changes if c <= self.cells + 1):
            less = bisect.bisect_right(below, j)  # #{i : x_i < g_j}
            most = bisect.bisect_right(at, j)  # #{i : x_i <= g_j}
            out.append((nxt - j, -max(Fraction(0), less - target, target - most)))
        return out

    def release_index(self, values: Sequence[float], q: float) -> int:
        """The released grid index ``j`` (``g_j`` is :meth:`release`)."""
        blocks = self.blocks(values, q)
        block, offset = self._selection.select_member(blocks)
        return sum(size for size, _ in blocks[:block]) + offset

    def release(self, values: Sequence[float], q: float) -> float:
        """The ε-DP ``q``-quantile (a grid point)."""
        return self.point(self.release_index(values, q))

    def probabilities(self, values: Sequence[float], q: float) -> list[float]:
        """The exact law of :meth:`release_index` (floats: for tests and audits, never to sample)."""
        blocks = self.blocks(values, q)
        per_block = self._selection.block_probabilities(blocks)
        return [p / size for (size, _), p in zip(blocks, per_block, strict=True) for _ in range(size)]


@dataclass(frozen=True)
class PrivateBounds:
    """Per-feature bounds released by :func:`private_bounds`, with what they cost."""

    bounds: list[tuple[float, float]]
    epsilon: float
    epsilon_per_quantile: float
    quantile: float
    lo: float
    hi: float
    cells: int

    def as_dict(self) -> dict[str, object]:
        return {
            "bounds": [list(b) for b in self.bounds],
            "epsilon": self.epsilon,
            "delta": 0.0,
            "epsilon_per_quantile": self.epsilon_per_quantile,
            "quantiles": [self.quantile, 1 - self.quantile],
            "composition": f"basic: {2 * len(self.bounds)} quantiles at ε/{2 * len(self.bounds)} each",
            "range": [self.lo, self.hi],
            "cells": self.cells,
            "mechanism": "exponential mechanism on a public grid (Smith 2011)",
        }


def private_bounds(
    rows: Sequence[Sequence[float]],
    *,
    epsilon: float,
    lo: float,
    hi: float,
    cells: int = 1024,
    quantile: float = 0.01,
    rng: RandomSource | None = None,
) -> PrivateBounds:
    """ε-DP bounds per feature: the ``quantile``- and ``(1 - quantile)``-quantiles of each column,
    each at ``ε/(2d)`` (module docstring)."""
    if not rows:
        raise PrivacyParameterError("private bounds need at least one row")
    d = len(rows[0])
    if d < 1 or any(len(r) != d for r in rows):
        raise PrivacyParameterError("every row must have the same number of features (at least 1)")
    if not 0 < quantile < 0.5:
        raise PrivacyParameterError(f"quantile must be in (0, 0.5), got {quantile}")
    share = Fraction(str(epsilon)) / (2 * d)
    mechanism = PrivateQuantile(share, lo=lo, hi=hi, cells=cells, rng=rng)
    bounds = []
    for t in range(d):
        column = [float(r[t]) for r in rows]
        low = mechanism.release_index(column, quantile)
        high = mechanism.release_index(column, 1 - quantile)
        if high <= low:  # post-processing: a non-empty interval on the grid
            low, high = (low, low + 1) if low < mechanism.cells else (low - 1, low)
        bounds.append((mechanism.point(low), mechanism.point(high)))
    return PrivateBounds(
        bounds=bounds,
        epsilon=float(epsilon),
        epsilon_per_quantile=float(share),
        quantile=quantile,
        lo=float(lo),
        hi=float(hi),
        cells=mechanism.cells,
    )
