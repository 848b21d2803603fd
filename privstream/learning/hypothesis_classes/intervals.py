"""``intervals:N``: ``h_{a,b}(x) = 1[a <= x < b]`` for ``0 <= a <= b <= N`` (the empty set once).

Version spaces come in two shapes:

* after a positive example: the positives span ``[lo_pos, hi_pos]``, the nearest negatives
  around it are ``left_neg < lo_pos`` and ``right_neg > hi_pos``; the consistent intervals are
  ``a in (left_neg, lo_pos]`` times ``b in (hi_pos, right_neg]``, a product of two chains, so
  ``Ldim = floor(log2 A) + floor(log2 B)`` and the SOA is two independent chain rules;
* before any positive: the empty set plus the intervals inside the gaps between negatives;
  its Ldim is ``G(gaps)`` of :mod:`._interval_ldim`, kept incrementally as per-t sums.

The batch SOA is vectorised from the first positive on (prefix min/max of positives, nearest
negatives by prefix max/min); before it, it runs the exact per-example rule.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import pairwise
from typing import Any

import numpy as np

from privstream.learning.errors import InvariantError, StateError
from privstream.learning.hypotheses import Hypothesis, hypothesis_from_runs
from privstream.learning.hypothesis_classes._interval_ldim import GapProfile, intervals_ldim
from privstream.learning.hypothesis_classes._vector import CHUNK, FLOAT_EXACT, UINT64_MAX, soa_rule
from privstream.learning.hypothesis_classes.base import HypothesisClass, VersionSpace, floor_log2, soa_choice


def interval_hypothesis(n: int, a: int, b: int) -> Hypothesis:
    """``1[a <= x < b]`` on ``{0..n-1}`` (empty when ``a >= b``)."""
    if a >= b:
        return hypothesis_from_runs(n, 0, ())
    changes = [c for c in (a, b) if 0 < c < n]
    return hypothesis_from_runs(n, 1 if a == 0 else 0, changes)


def _side_predict(c1: int, size: int, tie: int) -> int:
    """Chain rule: ``c1`` of ``size`` chain elements label the point 1 (``size - c1 >= 1``)."""
    if c1 <= 0:
        return 0
    a, b = c1.bit_length(), (size - c1).bit_length()
    return 1 if a > b else 0 if a < b else tie


class IntervalVersionSpace(VersionSpace):
    """State: sorted negatives (until the first positive), or the positive span and its fences."""

    __slots__ = ("hi_pos", "left_neg", "lo_pos", "negatives", "owner", "right_neg", "sums")

    def __init__(self, owner: Intervals, negatives: list[int], span: tuple[int, int, int, int] | None):
        self.owner = owner
        self.negatives = negatives
        if span is None:
            self.lo_pos = self.hi_pos = self.left_neg = self.right_neg = -1
            self.sums: list[int] | None = self._sums_from_scratch()
        else:
            self.left_neg, self.lo_pos, self.hi_pos, self.right_neg = span
            self.sums = None

    # -- helpers ----------------------------------------------------------------------------
    def _gaps(self) -> list[int]:
        n, negs = self.owner.domain_size, self.negatives
        edges = [-1, *negs, n]
        return [edges[i + 1] - edges[i] - 1 for i in range(len(edges) - 1)]

    def _sums_from_scratch(self) -> list[int]:
        prof = self.owner.profile
        sums = [0] * prof.width
        for g in self._gaps():
            for t, v in enumerate(prof.m(g)):
                sums[t] += v
        return sums

    def _gap_of(self, x: int) -> tuple[int, int]:
        """``(start, length)`` of the gap holding the non-negative point x."""
        negs = self.negatives
        j = bisect_left(negs, x)
        start = negs[j - 1] + 1 if j else 0
        end = negs[j] if j < len(negs) else self.owner.domain_size
        return start, end - start

    def _split_ldims(self, start: int, length: int, x: int, base: list[int]) -> tuple[int, int]:
        """Ldims of the 1-side and the 0-side of querying x (in gap ``start, length``)."""
        i = x - start
        prof = self.owner.profile
        left, right = prof.m(i), prof.m(length - 1 - i)
        zero = prof.ldim_of_sums([s + u + v for s, u, v in zip(base, left, right, strict=True)])
        return (i + 1).bit_length() + (length - i).bit_length() - 2, zero

    def _base_without(self, length: int) -> list[int]:
        if self.sums is None:
            raise InvariantError("invariant broken: self.sums is not None")
        return [s - v for s, v in zip(self.sums, self.owner.profile.m(length), strict=True)]

    @property
    def has_positive(self) -> bool:
        return self.sums is None

    # -- VersionSpace API ---------------------------------------------------------------------
    def size(self) -> int:
        if self.has_positive:
            return (self.lo_pos - self.left_neg) * (self.right_neg - self.hi_pos)
        return 1 + sum(g * (g + 1) // 2 for g in self._gaps())

    def ldim(self) -> int:
        if self.has_positive:
            return floor_log2(self.lo_pos - self.left_neg) + floor_log2(self.right_neg - self.hi_pos)
        if self.sums is None:
            raise InvariantError("invariant broken: self.sums is not None")
        return self.owner.profile.ldim_of_sums(self.sums)

    def soa_predict(self, x: int, tie: int) -> int:
        if self.has_positive:
            if x < self.lo_pos:  # 1 iff a <= x, a in (left_neg, lo_pos]
                return _side_predict(x - self.left_neg, self.lo_pos - self.left_neg, tie)
            if x > self.hi_pos:  # 1 iff b > x, b in (hi_pos, right_neg]
                return _side_predict(self.right_neg - x, self.right_neg - self.hi_pos, tie)
            return 1
        negs = self.negatives
        j = bisect_left(negs, x)
        if j < len(negs) and negs[j] == x:
            return 0
        start, length = self._gap_of(x)
        one, zero = self._split_ldims(start, length, x, self._base_without(length))
        return soa_choice(one, zero, tie)

    def update(self, x: int, y: int) -> bool:
        if self.has_positive:
            if y:
                if x < self.lo_pos:
                    if x <= self.left_neg:
                        return False
                    self.lo_pos = x
                elif x > self.hi_pos:
                    if x >= self.right_neg:
                        return False
                    self.hi_pos = x
            elif self.lo_pos <= x <= self.hi_pos:
                return False
            elif x < self.lo_pos:
                self.left_neg = max(self.left_neg, x)
            else:
                self.right_neg = min(self.right_neg, x)
            return True
        negs = self.negatives
        j = bisect_left(negs, x)
        is_neg = j < len(negs) and negs[j] == x
        if y:
            if is_neg:
                return False
            self.left_neg = negs[j - 1] if j else -1
            self.right_neg = negs[j] if j < len(negs) else self.owner.domain_size
            self.lo_pos = self.hi_pos = x
            self.sums = None
            self.negatives = []
        elif not is_neg:
            start, length = self._gap_of(x)
            prof, sums = self.owner.profile, self.sums
            if sums is None:
                raise InvariantError("invariant broken: sums is not None")
            for t, (g, u, v) in enumerate(
                zip(prof.m(length), prof.m(x - start), prof.m(start + length - 1 - x), strict=True)
            ):
                sums[t] += u + v - g
            negs.insert(j, x)
        return True

    def soa_predictor(self, tie: int) -> Hypothesis:
        n = self.owner.domain_size
        if self.has_positive:
            # Left of the span the rule is monotone (1 from some a* on), right of it 1 up to b*.
            lo, hi = self.left_neg + 1, self.lo_pos  # a* in [lo, hi]
            while lo < hi:
                mid = (lo + hi) // 2
                if self.soa_predict(mid, tie):
                    hi = mid
                else:
                    lo = mid + 1
            a_star = lo
            lo, hi = self.hi_pos + 1, self.right_neg  # b* in [lo, hi]: first x > hi_pos predicted 0
            while lo < hi:
                mid = (lo + hi) // 2
                if self.soa_predict(mid, tie):
                    lo = mid + 1
                else:
                    hi = mid
            return interval_hypothesis(n, a_star, lo)
        return self._predictor_without_positive(tie)

    def _predictor_without_positive(self, tie: int) -> Hypothesis:
        # Negatives predict 0. Inside a gap the prediction is constant between the offsets
        # where P or either side's m(l, .) changes, so evaluate once per segment, and once
        # per distinct gap length (gaps of equal length predict identically).
        n = self.owner.domain_size
        prof = self.owner.profile
        pattern_of: dict[int, list[tuple[int, int]]] = {}
        for g in set(self._gaps()):
            if g:
                base = self._base_without(g)
                # The 0-side has Ldim >= G(other gaps) (G is monotone), so a gap whose best
                # 1-side cannot beat (or, with tie 1, reach) that predicts 0 throughout.
                floor_zero, best_one = prof.ldim_of_sums(base), prof.max_one_side(g)
                if best_one < floor_zero or (best_one == floor_zero and not tie):
                    pattern_of[g] = [(0, 0)]
                    continue
                pattern_of[g] = [
                    (s, soa_choice(*self._split_ldims(0, g, s, base), tie)) for s in prof.segment_starts(g)
                ]
        # Runs in increasing position: each gap's segments, then the negative after it (0).
        runs: list[tuple[int, int]] = []
        start = 0
        for end in [*self.negatives, n]:
            runs.extend((start + off, v) for off, v in pattern_of.get(end - start, ()))
            if end < n:
                runs.append((end, 0))
            start = end + 1
        first = runs[0][1]
        changes = [p for (p, v), (_, prev) in zip(runs[1:], runs, strict=False) if v != prev]
        return hypothesis_from_runs(n, first, changes)

    def copy(self) -> IntervalVersionSpace:
        vs = IntervalVersionSpace.__new__(IntervalVersionSpace)
        vs.owner, vs.negatives = self.owner, list(self.negatives)
        vs.lo_pos, vs.hi_pos = self.lo_pos, self.hi_pos
        vs.left_neg, vs.right_neg = self.left_neg, self.right_neg
        vs.sums = None if self.sums is None else list(self.sums)
        return vs

    def to_state(self) -> dict[str, Any]:
        if self.has_positive:
            return {"span": [self.left_neg, self.lo_pos, self.hi_pos, self.right_neg]}
        return {"negatives": list(self.negatives)}

    def soa_batch(self, xs: np.ndarray, ys: np.ndarray, tie: int) -> tuple[np.ndarray, int]:
        total = xs.shape[0]
        preds = np.empty(total, dtype=np.uint8)
        i = 0
        # Before the first positive: exact per-example rule (the state is a set of gaps).
        while i < total and not self.has_positive:
            x, y = int(xs[i]), int(ys[i])
            preds[i] = self.soa_predict(x, tie)
            if not self.update(x, y):
                return preds[:i], i
            i += 1
        if i == total:
            return preds, total
        n = self.owner.domain_size
        if n > UINT64_MAX - 2 or xs.dtype == object:
            rest, k = super().soa_batch(xs[i:], ys[i:], tie)
            preds[i : i + k] = rest
            return preds[: i + k], i + k
        # Chunks that stay in cache; each continues from the state the previous one left.
        for start in range(i, total, CHUNK):
            chunk = xs[start : start + CHUNK]
            k = self._span_batch(chunk, ys[start : start + CHUNK].astype(bool), tie, preds[start:])
            if k < chunk.shape[0]:
                return preds[: start + k], start + k
        return preds, total

    def _span_batch(self, x: np.ndarray, pos: np.ndarray, tie: int, out: np.ndarray) -> int:
        # Shifted by +1 so every quantity (left_neg >= -1, right_neg <= n) is a uint64.
        one = np.uint64(1)
        xu = x.astype(np.uint64) + one
        big = np.uint64(self.owner.domain_size + 1)
        lo_after = np.minimum.accumulate(np.where(pos, xu, big))
        np.minimum(lo_after, np.uint64(self.lo_pos + 1), out=lo_after)
        hi_after = np.maximum.accumulate(np.where(pos, xu, np.uint64(0)))
        np.maximum(hi_after, np.uint64(self.hi_pos + 1), out=hi_after)
        # While realizable, a negative lies left of the span iff it is below the span's low end
        # at its arrival (the span only grows, and may never swallow a negative).
        neg = ~pos
        left = neg & (xu < lo_after)
        right = neg & ~left
        ln_after = np.maximum.accumulate(np.where(left, xu, np.uint64(0)))
        np.maximum(ln_after, np.uint64(self.left_neg + 1), out=ln_after)
        rn_after = np.minimum.accumulate(np.where(right, xu, big))
        np.minimum(rn_after, np.uint64(self.right_neg + 1), out=rn_after)
        bad = np.flatnonzero((ln_after >= lo_after) | (rn_after <= hi_after))
        k = int(bad[0]) if bad.size else xu.shape[0]
        if k == 0:
            return 0

        def before(after: np.ndarray, initial: int) -> np.ndarray:
            return np.concatenate(([np.uint64(initial + 1)], after[: k - 1]))

        lo_b, hi_b = before(lo_after, self.lo_pos), before(hi_after, self.hi_pos)
        ln_b, rn_b = before(ln_after, self.left_neg), before(rn_after, self.right_neg)
        xk = xu[:k]
        is_left, is_right = xk < lo_b, xk > hi_b
        # Left: chain a in (ln, lo], c1 = #{a <= x}; right: chain b in (hi, rn], c1 = #{b > x}.
        size = np.where(is_left, lo_b - ln_b, rn_b - hi_b)
        c1 = np.where(is_left, np.where(xk > ln_b, xk - ln_b, 0), np.where(rn_b > xk, rn_b - xk, 0))
        c1 = c1.astype(np.uint64)
        exact = self.owner.domain_size < FLOAT_EXACT - 2
        side = soa_rule(c1, size - np.minimum(c1, size), tie, exact_in_float=exact)
        side[c1 == 0] = 0
        out[:k] = np.where(is_left | is_right, side, 1)
        self.lo_pos, self.hi_pos = int(lo_after[k - 1]) - 1, int(hi_after[k - 1]) - 1
        self.left_neg, self.right_neg = int(ln_after[k - 1]) - 1, int(rn_after[k - 1]) - 1
        return k


class Intervals(HypothesisClass):
    """``intervals:N``.

    Closed forms (``N >= 1``), checked against the exact matrix computation in the tests:

    * size ``N(N+1)/2 + 1``.
    * Ldim ``= I(N) = #{D >= 0 : F(D) <= N}`` with ``F = 1, 2, 4, 6, 9, 13, 19, 27, 39, ...``
      (:func:`~._interval_ldim.intervals_ldim`; matches the exhaustive recursion for N = 1..18;
      see :mod:`._interval_ldim` for its status: verified, not proved).
    * VC = ``min(2, N)``: ``{0, 1}`` is shattered; no interval labels ``x < y < z`` as 1, 0, 1.
    * Tdim = N: ``x_j = j - 1`` and ``h_i = [i - 1, N)``.
    * Dual: the N columns are distinct (``[x, x+1)`` contains only x), so dual Ldim and dual VC
      are at most ``floor(log2 N)``. Dual Ldim ``= floor(log2 N)``: restricted to the dual
      points ``[t, N)`` the dual is the thresholds' dual, a chain of N functions. Dual VC
      ``= min(2, floor(log2 N))``: k intervals cut the line into at most ``2k + 1`` cells and
      ``2^3 > 7``; ``[0, 2)`` and ``[1, 3)`` are shattered by the points 3, 0, 2, 1.
    """

    def __init__(self, n: int) -> None:
        self.domain_size = n
        self.size = n * (n + 1) // 2 + 1
        self.spec = f"intervals:{n}"
        self.profile = GapProfile(n)

    def version_space(self) -> IntervalVersionSpace:
        return IntervalVersionSpace(self, [], None)

    def version_space_from_state(self, state: dict[str, Any]) -> IntervalVersionSpace:
        n = self.domain_size
        if "span" in state:
            span = state["span"]
            ok = isinstance(span, list) and len(span) == 4 and all(type(v) is int for v in span)
            if ok:
                ln, lo, hi, rn = span
                ok = -1 <= ln < lo <= hi < rn <= n
            if not ok:
                raise StateError(f"bad intervals version space {state!r} for {self.spec}")
            return IntervalVersionSpace(self, [], tuple(span))
        negs = state.get("negatives")
        if (
            not isinstance(negs, list)
            or any(type(v) is not int or not 0 <= v < n for v in negs)
            or any(a >= b for a, b in pairwise(negs))
        ):
            raise StateError(f"bad intervals version space for {self.spec}: negatives must be sorted points")
        return IntervalVersionSpace(self, list(negs), None)

    def hypothesis(self, index: int) -> Hypothesis:
        """Index 0 is the empty interval; then ``(a, b)``, ``a < b``, in lexicographic order."""
        n = self.domain_size
        if not 0 <= index < self.size:
            raise IndexError(index)
        if index == 0:
            return interval_hypothesis(n, 0, 0)
        off = index - 1
        lo, hi = 0, n - 1  # largest a with (intervals starting before a) <= off

        def before(a: int) -> int:
            return a * n - a * (a - 1) // 2

        while lo < hi:
            mid = (lo + hi + 1) // 2
            if before(mid) <= off:
                lo = mid
            else:
                hi = mid - 1
        a = lo
        return interval_hypothesis(n, a, a + 1 + off - before(a))

    def littlestone(self) -> int:
        return intervals_ldim(self.domain_size)

    def vc(self) -> int:
        return min(2, self.domain_size)

    def threshold(self) -> int:
        return self.domain_size

    def dual_littlestone(self) -> int:
        return floor_log2(self.domain_size)

    def dual_vc(self) -> int:
        return min(2, floor_log2(self.domain_size))
