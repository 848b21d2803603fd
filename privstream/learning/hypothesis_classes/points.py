"""``points:N``: ``h_i(x) = 1[x = i]`` for ``i = 0..N-1`` plus the all-zero function (N+1 functions).

A version space is either one point function (after a positive example) or "all-zero plus
every ``h_i`` whose point was not seen negative"; only the number of remaining candidate
points and, when one remains, which one, matter to the SOA. Everything is O(1) per example.
"""

from __future__ import annotations

from typing import Any

from privstream.learning.errors import StateError
from privstream.learning.hypotheses import Hypothesis, hypothesis_from_runs
from privstream.learning.hypothesis_classes.base import HypothesisClass, VersionSpace, soa_choice


def point_hypothesis(n: int, i: int | None) -> Hypothesis:
    """``1[x = i]`` on ``{0..n-1}``; ``i = None`` is the all-zero function."""
    if i is None:
        return hypothesis_from_runs(n, 0, ())
    if i == 0:
        return hypothesis_from_runs(n, 1, (1,) if n > 1 else ())
    return hypothesis_from_runs(n, 0, (i, i + 1) if i + 1 < n else (i,))


class PointsVersionSpace(VersionSpace):
    """Either ``{h_pos}`` or ``{0} + {h_i : i not in negatives}``."""

    __slots__ = ("n", "neg_sum", "negatives", "pos")

    def __init__(self, n: int, pos: int | None, negatives: set[int]) -> None:
        self.n, self.pos, self.negatives = n, pos, negatives
        self.neg_sum = sum(negatives)  # identifies the last candidate point in O(1)

    def size(self) -> int:
        return 1 if self.pos is not None else self.n - len(self.negatives) + 1

    def ldim(self) -> int:
        return 0 if self.size() == 1 else 1

    def soa_predict(self, x: int, tie: int) -> int:
        if self.pos is not None:
            return 1 if x == self.pos else 0
        if x in self.negatives:
            return 0  # V^1 is empty (Ldim -1), V^0 = V
        # V^1 = {h_x} has Ldim 0; V^0 = {0} + the other candidates has Ldim 1 unless it is {0}.
        remaining = self.n - len(self.negatives)
        return soa_choice(0, 0 if remaining == 1 else 1, tie)

    def update(self, x: int, y: int) -> bool:
        if self.pos is not None:
            return (x == self.pos) == bool(y)
        if y:
            if x in self.negatives:
                return False
            self.pos = x
            self.negatives = set()
            self.neg_sum = 0
        elif x not in self.negatives:
            self.negatives.add(x)
            self.neg_sum += x
        return True

    def soa_predictor(self, tie: int) -> Hypothesis:
        if self.pos is not None:
            return point_hypothesis(self.n, self.pos)
        if self.n - len(self.negatives) == 1 and tie == 1:
            return point_hypothesis(self.n, self.n * (self.n - 1) // 2 - self.neg_sum)
        return point_hypothesis(self.n, None)

    def copy(self) -> PointsVersionSpace:
        return PointsVersionSpace(self.n, self.pos, set(self.negatives))

    def to_state(self) -> dict[str, Any]:
        return {"pos": self.pos, "negatives": sorted(self.negatives)}


class Points(HypothesisClass):
    """``points:N``.

    Closed forms (``N >= 1``), checked against the matrix computation in the tests:

    * Ldim = 1: two functions differ, and every split of a version space puts at most one
      point function on the 1-side, so ``min`` of the two sides is at most 0.
    * VC = 1: one point is shattered (``h_x`` and 0); no two points both get 1.
    * Tdim = 1: ``k = 2`` needs ``h_1`` with two ones.
    * Dual: the column of x is ``i -> 1[i = x]`` (the all-zero row contributes 0), so the dual
      is "points only" with N functions: dual Ldim = dual VC = ``min(1, N-1)``.
    """

    def __init__(self, n: int) -> None:
        self.domain_size = n
        self.size = n + 1
        self.spec = f"points:{n}"

    def version_space(self) -> PointsVersionSpace:
        return PointsVersionSpace(self.domain_size, None, set())

    def version_space_from_state(self, state: dict[str, Any]) -> PointsVersionSpace:
        pos, negs = state.get("pos"), state.get("negatives")
        n = self.domain_size
        if not (
            (pos is None or (type(pos) is int and 0 <= pos < n))
            and isinstance(negs, list)
            and all(type(v) is int and 0 <= v < n for v in negs)
            and (pos is None or not negs)
        ):
            raise StateError(f"bad points version space for {self.spec}")
        return PointsVersionSpace(n, pos, set(negs))

    def hypothesis(self, index: int) -> Hypothesis:
        """Index ``i < N`` is ``h_i``; index ``N`` is the all-zero function."""
        if not 0 <= index < self.size:
            raise IndexError(index)
        return point_hypothesis(self.domain_size, index if index < self.domain_size else None)

    def littlestone(self) -> int:
        return 1

    def vc(self) -> int:
        return 1

    def threshold(self) -> int:
        return 1

    def dual_littlestone(self) -> int:
        return min(1, self.domain_size - 1)

    def dual_vc(self) -> int:
        return min(1, self.domain_size - 1)
