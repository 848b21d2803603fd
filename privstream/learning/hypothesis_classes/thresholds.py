"""``thresholds:N``: ``h_t(x) = 1[x >= t]`` for ``t = 0..N`` on ``{0..N-1}`` (N+1 functions).

Version spaces are intervals of cuts ``t in [lo, hi]`` (a chain), so everything is O(1)
integer arithmetic on Python ints (exact for any N), and the batch SOA is a prefix max/min.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privstream.learning.errors import StateError
from privstream.learning.hypotheses import Hypothesis, hypothesis_from_runs
from privstream.learning.hypothesis_classes._vector import CHUNK, FLOAT_EXACT, UINT64_MAX, soa_rule
from privstream.learning.hypothesis_classes.base import HypothesisClass, VersionSpace, floor_log2


def threshold_hypothesis(n: int, t: int) -> Hypothesis:
    """The function ``1[x >= t]`` on ``{0..n-1}`` (``t = 0``: all ones, ``t = n``: all zeros)."""
    if t <= 0:
        return hypothesis_from_runs(n, 1, ())
    if t >= n:
        return hypothesis_from_runs(n, 0, ())
    return hypothesis_from_runs(n, 0, (t,))


def chain_predict(x: int, lo: int, size: int, tie: int) -> int:
    """SOA on a chain of ``size`` cuts starting at ``lo``: ``x`` is labelled 1 by the first ``c1``.

    ``c1 = #{t in [lo, lo+size) : t <= x}``; both sides are chains, so their Ldims are
    ``floor(log2)`` of their sizes and the comparison is one of bit lengths.
    """
    c1 = x - lo + 1
    if c1 <= 0:
        return 0 if size else tie
    if c1 >= size:
        return 1 if size else tie
    a, b = c1.bit_length(), (size - c1).bit_length()
    return 1 if a > b else 0 if a < b else tie


class ThresholdVersionSpace(VersionSpace):
    """The cuts ``t`` with ``lo <= t <= hi`` (never empty)."""

    __slots__ = ("hi", "lo", "n")

    def __init__(self, n: int, lo: int, hi: int) -> None:
        self.n, self.lo, self.hi = n, lo, hi

    def size(self) -> int:
        return self.hi - self.lo + 1

    def ldim(self) -> int:
        return floor_log2(self.hi - self.lo + 1)

    def soa_predict(self, x: int, tie: int) -> int:
        return chain_predict(x, self.lo, self.hi - self.lo + 1, tie)

    def update(self, x: int, y: int) -> bool:
        if y:  # h_t(x) = 1  <=>  t <= x
            if x < self.lo:
                return False
            if x < self.hi:
                self.hi = x
        else:  # t > x
            if x >= self.hi:
                return False
            if x >= self.lo:
                self.lo = x + 1
        return True

    def soa_predictor(self, tie: int) -> Hypothesis:
        # The prediction is monotone in x (c1 grows, c0 shrinks), so it is the threshold at
        # the first point predicted 1; find it by binary search over [lo - 1, hi].
        size = self.hi - self.lo + 1
        left, right = max(self.lo - 1, 0), min(self.hi, self.n)  # pred(right) = 1 or right = n
        while left < right:
            mid = (left + right) // 2
            if chain_predict(mid, self.lo, size, tie):
                right = mid
            else:
                left = mid + 1
        return threshold_hypothesis(self.n, left)

    def copy(self) -> ThresholdVersionSpace:
        return ThresholdVersionSpace(self.n, self.lo, self.hi)

    def to_state(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi}

    def soa_batch(self, xs: np.ndarray, ys: np.ndarray, tie: int) -> tuple[np.ndarray, int]:
        if self.n > UINT64_MAX - 1 or xs.dtype == object:
            return super().soa_batch(xs, ys, tie)
        # Chunks that stay in cache; each continues from the state the previous one left.
        preds = np.empty(xs.shape[0], dtype=np.uint8)
        for start in range(0, xs.shape[0], CHUNK):
            chunk = xs[start : start + CHUNK]
            p, k = self._batch_chunk(chunk, ys[start : start + CHUNK], tie)
            preds[start : start + k] = p
            if k < chunk.shape[0]:
                return preds[: start + k], start + k
        return preds, xs.shape[0]

    def _batch_chunk(self, xs: np.ndarray, ys: np.ndarray, tie: int) -> tuple[np.ndarray, int]:
        # Wrapping uint64 arithmetic: branch-free selects with bit masks, in place where possible.
        one, n = np.uint64(1), np.uint64(self.n)
        x = xs.astype(np.uint64)
        mask = ys.astype(np.uint64)
        mask -= one  # all ones for a negative example, 0 for a positive
        # State after each prefix: lo = max(x+1 over negatives), hi = min(x over positives).
        lo_after = x + one
        lo_after &= mask
        np.maximum.accumulate(lo_after, out=lo_after)
        np.maximum(lo_after, np.uint64(self.lo), out=lo_after)
        np.invert(mask, out=mask)  # now all ones for a positive example
        hi_after = x - n
        hi_after &= mask
        hi_after += n
        np.minimum.accumulate(hi_after, out=hi_after)
        np.minimum(hi_after, np.uint64(self.hi), out=hi_after)
        broken = lo_after > hi_after
        k = int(broken.argmax()) if broken.any() else x.shape[0]
        if k == 0:
            return np.zeros(0, dtype=np.uint8), 0
        lo_b = mask[:k]  # reuse: the state before each example
        lo_b[0], lo_b[1:] = self.lo, lo_after[: k - 1]
        size = np.empty(k, dtype=np.uint64)
        size[0], size[1:] = self.hi, hi_after[: k - 1]
        size -= lo_b
        size += one
        # c1 = #{cuts t in [lo, hi] : t <= x} = clip(x + 1 - lo, 0, size)
        c1 = x[:k]
        c1 += one
        below = c1 <= lo_b
        c1 -= lo_b
        c1[below] = 0
        np.minimum(c1, size, out=c1)
        size -= c1  # now c0
        preds = soa_rule(c1, size, tie, exact_in_float=self.n < FLOAT_EXACT - 1)
        self.lo, self.hi = int(lo_after[k - 1]), int(hi_after[k - 1])
        return preds, k


class Thresholds(HypothesisClass):
    """``thresholds:N``.

    Closed forms (``N >= 1``), checked against the exact matrix computation in the tests:

    * Ldim = ``floor(log2(N+1))``: a version space is a chain of K consecutive cuts; a query
      splits it into chains of sizes a and K-a, so ``L(K) = max_a 1 + min(L(a), L(K-a))
      = 1 + L(floor(K/2))`` with ``L(1) = 0``, i.e. ``L(K) = floor(log2 K)``.
    * VC = 1: one point is shattered (cuts 0 and N); two points ``x < x'`` cannot get
      ``(1, 0)`` since thresholds are monotone.
    * Tdim = N: points ``x_j = j-1`` and ``h_i = h_{i-1}`` give ``h_i(x_j) = 1 iff i <= j``,
      and there are only N points.
    * Dual: the column of x is ``t -> 1[t <= x]``; the N columns are distinct and nested,
      a chain of N functions, so dual Ldim = ``floor(log2 N)`` and dual VC = ``min(1, N-1)``.
    """

    def __init__(self, n: int) -> None:
        self.domain_size = n
        self.size = n + 1
        self.spec = f"thresholds:{n}"

    def version_space(self) -> ThresholdVersionSpace:
        return ThresholdVersionSpace(self.domain_size, 0, self.domain_size)

    def version_space_from_state(self, state: dict[str, Any]) -> ThresholdVersionSpace:
        lo, hi = state.get("lo"), state.get("hi")
        if type(lo) is not int or type(hi) is not int or not 0 <= lo <= hi <= self.domain_size:
            raise StateError(f"bad thresholds version space {state!r} for {self.spec}")
        return ThresholdVersionSpace(self.domain_size, lo, hi)

    def hypothesis(self, index: int) -> Hypothesis:
        if not 0 <= index < self.size:
            raise IndexError(index)
        return threshold_hypothesis(self.domain_size, index)

    def littlestone(self) -> int:
        return floor_log2(self.domain_size + 1)

    def vc(self) -> int:
        return 1

    def threshold(self) -> int:
        return self.domain_size

    def dual_littlestone(self) -> int:
        return floor_log2(self.domain_size)

    def dual_vc(self) -> int:
        return min(1, self.domain_size - 1)
