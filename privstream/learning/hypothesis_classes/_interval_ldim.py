"""Littlestone dimension of interval version spaces with no positive example yet.

Such a version space is "the empty interval plus every interval inside one of the gaps
between negative points", so it is described by the multiset of gap lengths. Its Ldim,
``G(gaps)``, is what the SOA for ``intervals:N`` needs before the first positive label.

Reduction (proved): along the all-0 branch of a mistake tree nothing but gaps change, and
a 1-answer at offset ``i`` of a gap of length ``l`` leaves the product of two chains of
sizes ``i+1`` and ``l-i`` (left end, right end), whose Ldim is
``P(i, l) = floor(log2(i+1)) + floor(log2(l-i))``. Hence ``G(gaps) >= k`` iff there are k
queries, the j-th (j = 1..k) with ``P >= k - j`` in the gaps left by the earlier ones: the
*demands* ``k-1, ..., 0`` are served by the gaps, each gap serving a heap-ordered tree.

Closed form (ours; verified, not proved): with ``m(l, t)`` the largest m such that one gap
of length l serves the demands ``{t, ..., t+m-1}``,

* ``G(gaps) = max k  s.t.  for every t < k:  sum over gaps of m(l, t) >= k - t``
  (a Hall-type condition);
* ``m(l, t) = I(l) - t`` if that is ``>= 3``, else 2 if ``l >= first2(t)``, else 1 if
  ``l >= C1(t)``, else 0, where ``I(l) = Ldim(intervals on l points) = #{D >= 0 : F(D) <= l}``,
  ``F(0) = 1, F(1) = 2, F(2j) = 5*2^(j-1) - 1, F(2j+1) = 7*2^(j-1) - 1``,
  ``C1(t) = 2^floor(t/2) + 2^ceil(t/2) - 1`` (the shortest gap with ``max P >= t``), and
  ``first2(t) = 3*2^(t/2) - 1`` for even t, ``F(t+1)`` for odd t.

Both were checked against the exact recursion on gap multisets (scratch runs, 0 mismatches):
every single gap up to length 60, every pair up to 40, every triple up to 16 and every
quadruple up to 8; the test-suite checks the resulting Ldim, SOA predictions and predictors
against the exact matrix computation for small N (tests/learning/test_soa.py).
"""

from __future__ import annotations

from bisect import bisect_right


def chain_f(d: int) -> int:
    """``F(D)``: the shortest domain on which intervals (plus empty) have Ldim ``>= D + 1``."""
    if d <= 1:
        return d + 1
    j, odd = divmod(d, 2)
    return ((7 if odd else 5) << (j - 1)) - 1


def single_query_len(t: int) -> int:
    """``C1(t)``: the shortest gap with a point whose 1-side has Ldim ``>= t``."""
    return (1 << (t // 2)) + (1 << ((t + 1) // 2)) - 1


def pair_len(t: int) -> int:
    """``first2(t)``: the shortest gap serving demands ``{t, t+1}``."""
    return 3 * (1 << (t // 2)) - 1 if t % 2 == 0 else chain_f(t + 1)


def intervals_ldim(length: int) -> int:
    """``I(l)``: Ldim of intervals-plus-empty on ``l`` points (``I(0) = 0``: only the empty set).

    >>> [intervals_ldim(n) for n in range(1, 19)]
    [1, 2, 2, 3, 3, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6]
    """
    d = 0
    while chain_f(d) <= length:
        d += 1
    return d


class GapProfile:
    """Per-class tables: ``m(l, t)`` for ``t < width`` and the largest 1-side Ldim in a gap.

    Both are constant between consecutive *critical lengths* (where some ``F``, ``C1``,
    ``first2`` or power of two is crossed), so they are tabulated once per critical length
    and looked up by bisection: O(log) per gap, whatever N is.
    """

    def __init__(self, n: int) -> None:
        t = 0
        while single_query_len(t) <= n:
            t += 1
        self.width = t  # m(l, t) = 0 for every l <= n and t >= width
        crit = {0, 1}
        for d in range(2 * n.bit_length() + 4):
            crit.update((chain_f(d), single_query_len(d), pair_len(d), (1 << d) - 1, 1 << d))
        self.critical = sorted(c for c in crit if c <= n)
        self._m_table = [self._m(c) for c in self.critical]
        self._max_one_side = [self._max_one(c) for c in self.critical]

    def m(self, length: int) -> tuple[int, ...]:
        """``(m(length, t) for t < width)``."""
        return self._m_table[bisect_right(self.critical, length) - 1]

    def max_one_side(self, length: int) -> int:
        """``max over i of P(i, length)``: the best 1-side Ldim of a query in this gap (-1 if empty)."""
        return self._max_one_side[bisect_right(self.critical, length) - 1]

    def _max_one(self, length: int) -> int:
        t = -1
        while single_query_len(t + 1) <= length:
            t += 1
        return t

    def _m(self, length: int) -> tuple[int, ...]:
        if length <= 0:
            return (0,) * self.width
        top = intervals_ldim(length)
        out = []
        for t in range(self.width):
            if top - t >= 3:
                out.append(top - t)
            elif pair_len(t) <= length:
                out.append(2)
            elif single_query_len(t) <= length:
                out.append(1)
            else:
                out.append(0)
        return tuple(out)

    def ldim_of_sums(self, sums: list[int] | tuple[int, ...]) -> int:
        """``G`` from the per-t sums of ``m`` over all gaps: ``max k, k - t <= sums[t] for t < k``.

        Monotone in ``sums`` (more gaps never lower it).
        """
        k, bound = 0, None
        for t, s in enumerate(sums):
            bound = s + t if bound is None else min(bound, s + t)
            if k + 1 > bound:
                break
            k += 1
        return k

    def segment_starts(self, length: int) -> list[int]:
        """Offsets in a gap where ``P`` or the ``m`` of either side can change (plus 0)."""
        starts = {0}
        hi = bisect_right(self.critical, length)
        for c in self.critical[:hi]:
            starts.add(c)
            starts.add(length - c)
        return sorted(s for s in starts if 0 <= s < length)
