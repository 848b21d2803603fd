"""A hypothesis class partitioned by empirical error on a sample: exact counts and members.

For a sample S of size n and a class H, level ``e`` is ``{h in H : errors_S(h) = e}``
(``e = 0..n``). The exponential mechanism with score ``-errors`` only needs, for every level,
its *exact* size ``counts[e]`` (a Python int, possibly astronomically large), and then a way to
pick the ``r``-th member of a level (``0 <= r < counts[e]``) in some fixed order. Sampling a
level with probability ``∝ counts[e]·exp(-ε·e/2)`` and then a member uniformly gives every
``h`` the probability ``exp(-ε·errors_S(h)/2) / Σ_e counts[e]·exp(-ε·e/2)``: exactly the
exponential mechanism over H, without enumerating H.

How each class is partitioned (``v_0 < ... < v_{k-1}`` are the distinct sample points; all
hypotheses whose restriction to ``{v_j}`` is the same have the same error, so H splits into
*blocks* delimited by consecutive distinct sample points; levels are unions of blocks):

* ``thresholds:N`` (``1[x >= t]``, ``t = 0..N``): the ``k+1`` blocks ``t ∈ [0, v_0]``,
  ``[v_{j-1}+1, v_j]``, ``[v_{k-1}+1, N]``; block j misclassifies the ones below ``v_j`` and the
  zeros from ``v_j`` on, i.e. ``#zeros + W[j]`` with ``W`` the prefix sums of
  ``ones(v) - zeros(v)``. Sizes sum to ``N + 1``. O(n log n).
* ``points:N`` (``1[x = i]`` plus the all-zero function): one block of size 1 per distinct
  sample point (``#ones - ones(v) + zeros(v)`` errors) and one block of the ``N - k``
  unsampled points *and* the all-zero function (all ``#ones`` errors; they agree on the
  sample). Sizes sum to ``N + 1``; the zero function is counted once. O(n log n).
* ``intervals:N`` (``1[a <= x < b]``, ``a < b``, plus the empty function): the nonempty
  intervals split by ``α = #{v_j < a}`` and ``β = #{v_j < b}``; for ``α < β`` the block is a
  product of an a-range and a b-range (``|A_α|·|B_β|`` intervals, ``#ones - (W[β] - W[α])``
  errors); ``α > β`` is impossible; ``α = β`` are the ``g(g+1)/2`` intervals inside a gap of
  ``g`` unsampled points, which agree with the empty function on the sample. So the empty
  function and all in-gap intervals form one block at ``#ones`` errors, and the empty function
  is counted once. Sizes sum to ``N(N+1)/2 + 1``. O(k²) time (all ``α < β`` pairs, vectorised
  in chunks of bounded memory): fine for n up to a few thousand. These exact level counts serve
  the exact checks (:func:`~privstream.learning.private_learners.generic.output_law`, tests,
  audits) and ERM baselines; the generic learner does not use them: it samples intervals in
  O(n log n) (:mod:`~privstream.learning.private_learners.generic.interval_sampler`).
* finite (file) classes: the errors of every row from the packed truth table, one bit-plane
  of the per-point label counts at a time (``popcount(row & plane)``); O(|H|·N/8·log n).

Exactness: every count is an exact integer. Sizes use ``uint64`` only where every partial sum
is bounded by ``|H| < 2**64`` (so nothing can overflow), else Python ints; the interval pair
sums for ``|H| >= 2**64`` are split into 16-bit limbs and their ``uint64`` accumulators added
into Python ints before they can reach ``2**64`` (proved at :func:`_pair_level_sums`). The tests
compare every count and the member maps with brute-force enumeration.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from privstream.learning.domain import INT64_MAX
from privstream.learning.errors import LearningInputError
from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import (
    HypothesisClass,
    Intervals,
    Points,
    Thresholds,
    interval_hypothesis,
    point_hypothesis,
    threshold_hypothesis,
)
from privstream.learning.hypothesis_classes.finite import FiniteClass

__all__ = [
    "MAX_DENSE_ENTRIES",
    "ErrorLevels",
    "SampleSummary",
    "VersionSpace",
    "error_levels",
    "nth_pair",
    "summarise",
    "version_space",
]

#: Largest ``|H| x N`` truth table built for a class that is neither structured nor a file class.
MAX_DENSE_ENTRIES = 2**26
_UINT64_LIMIT = 2**64
_CHUNK_ELEMENTS = 1 << 20  # bounds the temporary arrays of the pair enumeration
_FLUSH_PRODUCTS = 1 << 32  # limb products (each < 2**32) a uint64 accumulator takes between flushes


@dataclass(frozen=True)
class ErrorLevels:
    """``counts[e]`` = number of hypotheses with exactly ``e`` errors on the sample (``e = 0..n``).

    ``member(e, r)`` is the ``r``-th of them (``0 <= r < counts[e]``) in a fixed order, as a
    canonical :class:`Hypothesis`; as ``r`` runs over ``range(counts[e])`` it lists every
    hypothesis of level ``e`` exactly once.
    """

    counts: tuple[int, ...]
    _member: Callable[[int, int], Hypothesis]

    @property
    def sample_size(self) -> int:
        return len(self.counts) - 1

    @property
    def class_size(self) -> int:
        return sum(self.counts)

    def member(self, errors: int, index: int) -> Hypothesis:
        """The ``index``-th hypothesis with ``errors`` errors."""
        if not 0 <= errors < len(self.counts) or not 0 <= index < self.counts[errors]:
            raise IndexError(f"no hypothesis number {index} at error level {errors}")
        return self._member(errors, index)

    def nonempty(self) -> list[tuple[int, int]]:
        """``(errors, count)`` for every level with ``count > 0``, by increasing errors."""
        return [(e, c) for e, c in enumerate(self.counts) if c]


# -- the sample, summarised by distinct points ------------------------------------------------


@dataclass(frozen=True)
class SampleSummary:
    """The sample as its sorted distinct points ``vals`` with the label counts at each."""

    n: int
    ones_total: int
    vals: np.ndarray  # uint64 if N fits, else object (Python ints)
    ones: np.ndarray  # int64, per distinct point
    zeros: np.ndarray  # int64, per distinct point

    @property
    def k(self) -> int:
        return int(self.vals.shape[0])

    @property
    def net(self) -> np.ndarray:
        """``ones(v) - zeros(v)`` per distinct point: how much covering v lowers the error."""
        net: np.ndarray = self.ones - self.zeros
        return net

    @property
    def walk(self) -> np.ndarray:
        """``W[j] = Σ_{i<j} net(v_i)``, ``j = 0..k`` (``int64``): covering ``v_a..v_{b-1}`` gains
        ``W[b] - W[a]``."""
        return np.concatenate(([0], np.cumsum(self.net))).astype(np.int64)


def summarise(xs: np.ndarray, ys: np.ndarray, domain_size: int) -> SampleSummary:
    """Sort and count the sample; O(n log n). ``xs`` are validated points, ``ys`` 0/1 ``uint8``.

    >>> s = summarise(np.array([5, 2, 5, 5]), np.array([1, 0, 0, 1], dtype=np.uint8), 8)
    >>> s.vals.tolist(), s.ones.tolist(), s.zeros.tolist(), s.walk.tolist()
    ([2, 5], [0, 2], [1, 1], [0, -1, 0])
    """
    n = int(xs.shape[0])
    ones_total = int(ys.sum(dtype=np.int64))
    if xs.dtype == object:  # points beyond int64: exact Python ints
        tally: dict[int, list[int]] = {}
        for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
            tally.setdefault(x, [0, 0])[y] += 1
        keys = sorted(tally)
        vals = _size_array(keys, domain_size)
        zeros = np.array([tally[v][0] for v in keys], dtype=np.int64)
        ones = np.array([tally[v][1] for v in keys], dtype=np.int64)
        return SampleSummary(n, ones_total, vals, ones, zeros)
    # One sort of 2x + y (points are below 2**63, so it fits a uint64): points in order, and
    # at each point its zeros before its ones.
    codes = (xs.astype(np.uint64) << np.uint64(1)) | ys.astype(np.uint64)
    codes.sort()
    points = codes >> np.uint64(1)
    first = np.ones(n, dtype=bool)
    np.not_equal(points[1:], points[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, n)).astype(np.int64)
    ones = (
        np.add.reduceat((codes & np.uint64(1)).astype(np.int64), starts) if n else np.zeros(0, dtype=np.int64)
    )
    vals = _size_array(points[starts], domain_size)
    return SampleSummary(n, ones_total, vals, ones, counts - ones)


def _size_array(values: Sequence[int] | np.ndarray, bound: int) -> np.ndarray:
    """Non-negative integers known to be ``<= bound``, as ``uint64`` when ``bound < 2**64``."""
    if bound < _UINT64_LIMIT:
        return np.asarray(values).astype(np.uint64)
    out = np.empty(len(values), dtype=np.object_)
    out[:] = [int(v) for v in values]
    return out


def _scalar(value: int, like: np.ndarray) -> np.uint64 | int:
    """``value`` in the arithmetic of ``like`` (``np.uint64`` or a Python int)."""
    return np.uint64(value) if like.dtype == np.uint64 else value


# -- thresholds -------------------------------------------------------------------------------


def _threshold_levels(hclass: Thresholds, s: SampleSummary) -> ErrorLevels:
    n_dom = hclass.domain_size
    vals = _size_array(s.vals, n_dom + 1)  # block ends are <= N, sizes <= N + 1
    one = _scalar(1, vals)
    zero = _scalar(0, vals)
    starts = np.concatenate((np.array([zero], dtype=vals.dtype), vals + one))
    ends = np.concatenate((vals, np.array([_scalar(n_dom, vals)], dtype=vals.dtype)))
    sizes = ends - starts + one  # >= 1: v_{j-1} < v_j
    walk = np.concatenate(([0], np.cumsum(s.net)))
    errs = (s.n - s.ones_total) + walk  # block j errs on zeros at >= v_j and ones below v_j
    counts = _level_sums(errs, sizes, s.n)

    def member(e: int, r: int) -> Hypothesis:
        idx = np.flatnonzero(errs == e)
        j, offset = _locate(sizes[idx], r)
        return threshold_hypothesis(n_dom, int(starts[idx[j]]) + offset)

    return ErrorLevels(counts, member)


def _level_sums(errs: np.ndarray, sizes: np.ndarray, n: int) -> tuple[int, ...]:
    """``out[e] = Σ sizes[errs == e]`` exactly (sizes' total fits their dtype by construction)."""
    acc = np.zeros(n + 1, dtype=sizes.dtype)  # object zeros are Python ints
    np.add.at(acc, errs, sizes)
    return tuple(int(c) for c in acc)


def _locate(sizes: np.ndarray, r: int) -> tuple[int, int]:
    """The block holding the ``r``-th element of the concatenated blocks, and the offset in it."""
    cum = np.cumsum(sizes)
    j = int(np.searchsorted(cum, _scalar(r, sizes), side="right"))
    before = int(cum[j - 1]) if j else 0
    return j, r - before


# -- points -----------------------------------------------------------------------------------


def _point_levels(hclass: Points, s: SampleSummary) -> ErrorLevels:
    n_dom = hclass.domain_size
    errs = s.ones_total - s.net  # h_v: misses the other ones, errs on the zeros at v
    counts = [int(c) for c in np.bincount(errs, minlength=s.n + 1)]
    rest = n_dom - s.k  # unsampled points, plus the all-zero function below
    counts[s.ones_total] += rest + 1
    vals = s.vals
    # Unsampled points below v_j: v_j - j (nondecreasing); used to find the o-th unsampled point.
    below = [int(v) - j for j, v in enumerate(vals.tolist())]

    def member(e: int, r: int) -> Hypothesis:
        hits = vals[errs == e]
        if r < hits.shape[0]:
            return point_hypothesis(n_dom, int(hits[r]))
        o = r - int(hits.shape[0])  # only at e == #ones: the block of unsampled points and zero
        if o == rest:
            return point_hypothesis(n_dom, None)
        return point_hypothesis(n_dom, o + bisect_right(below, o))

    return ErrorLevels(tuple(counts), member)


# -- intervals --------------------------------------------------------------------------------


def _interval_levels(hclass: Intervals, s: SampleSummary) -> ErrorLevels:
    n_dom, k = hclass.domain_size, s.k
    vals = _size_array(s.vals, n_dom)
    one = _scalar(1, vals)
    vals_list = [int(v) for v in vals.tolist()]
    # a-block α: a ∈ [lo_a[α], hi_a[α]] with #{v_j < a} = α; b-block β likewise for b ∈ [1, N].
    lo = [0] + [v + 1 for v in vals_list]  # first a (or b >= 1) with exactly α points below
    hi_a, hi_b = [*vals_list, n_dom - 1], [*vals_list, n_dom]  # a < N, b <= N
    size_a = _size_array([h - f + 1 for f, h in zip(lo, hi_a, strict=True)], n_dom)
    size_b = _size_array([h - f + 1 for f, h in zip(lo, hi_b, strict=True)], n_dom + 1)
    size_b[0] = size_b[0] - one  # b >= 1: the b-range of β = 0 is [1, v_0]
    lo_b = list(lo)
    lo_b[0] = 1
    walk = np.concatenate(([0], np.cumsum(s.net))).astype(np.int64)
    # Gaps of unsampled points; their inner intervals err like the empty function.
    gaps = [h - f for f, h in zip(lo, hi_b, strict=True)]
    zero_block = 1 + sum(g * (g + 1) // 2 for g in gaps)
    counts = list(_pair_level_sums(size_a, size_b, walk, s.ones_total, s.n, hclass.size))
    counts[s.ones_total] += zero_block

    def member(e: int, r: int) -> Hypothesis:
        if e == s.ones_total:
            if r < zero_block:
                return _in_gap_interval(n_dom, lo, gaps, r)
            r -= zero_block
        key = s.ones_total - e  # W[β] - W[α] of the wanted level
        for alpha in range(k):
            match = np.flatnonzero(walk[alpha + 1 :] == walk[alpha] + key) + alpha + 1
            if not match.size:
                continue
            row = int(size_a[alpha]) * int(size_b[match].sum())
            if r >= row:
                r -= row
                continue
            a_size = int(size_a[alpha])
            # Python ints: |A_α|·|B_β| may exceed 2**64 even when each factor fits.
            row_sizes = np.array([a_size * int(b) for b in size_b[match].tolist()], dtype=object)
            j, offset = _locate(row_sizes, r)
            beta = int(match[j])
            width = int(size_b[beta])
            return interval_hypothesis(n_dom, lo[alpha] + offset // width, lo_b[beta] + offset % width)
        raise AssertionError("level index out of range")  # unreachable: counts match the enumeration

    return ErrorLevels(tuple(counts), member)


@dataclass(frozen=True)
class VersionSpace:
    """Level 0 alone: the ``size`` hypotheses without an error on the sample, and ``member(r)``,
    the ``r``-th of them in the order of ``error_levels(...).member(0, r)``."""

    size: int
    member: Callable[[int], Hypothesis]


def version_space(hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray) -> VersionSpace:
    """The hypotheses consistent with the sample, in O(n log n) on intervals (the full levels
    take O(k²) there); other classes take level 0 of :func:`error_levels`.

    On ``intervals:N`` a consistent interval holds every positive point and no negative one. With
    positives, it must cover exactly the distinct points ``v_α..v_{β-1}`` from the first positive to
    the last (``α``, ``β`` fixed), all of them pure positives, so level 0 is the one block (α, β) of
    :func:`error_levels`, a product of an a-range and a b-range (or nothing). Without positives it is
    the zero block: the empty function and every interval inside a gap.

    >>> from privstream.learning.hypothesis_classes import parse_class_spec
    >>> labels = np.array([0, 1, 0], dtype=np.uint8)
    >>> vs = version_space(parse_class_spec("intervals:8"), np.array([1, 3, 6]), labels)
    >>> vs.size, [vs.member(r).change_points()[1] for r in range(vs.size)]
    (6, [[2, 4], [2, 5], [2, 6], [3, 4], [3, 5], [3, 6]])
    """
    if not isinstance(hclass, Intervals):
        levels = error_levels(hclass, xs, ys)
        return VersionSpace(levels.counts[0], lambda r: levels.member(0, r))
    n_dom = hclass.domain_size
    s = summarise(xs, ys, n_dom)
    vals = [int(v) for v in s.vals.tolist()]
    lo = [0] + [v + 1 for v in vals]  # as in _interval_levels: first a (or b) with α points below
    if s.ones_total == 0:
        gaps = [h - f for f, h in zip(lo, [*vals, n_dom], strict=True)]
        return VersionSpace(
            1 + sum(g * (g + 1) // 2 for g in gaps), lambda r: _in_gap_interval(n_dom, lo, gaps, r)
        )
    positive = np.flatnonzero(s.ones > 0)
    alpha, beta = int(positive[0]), int(positive[-1]) + 1
    if s.zeros[alpha:beta].any():
        return VersionSpace(0, lambda r: _in_gap_interval(n_dom, lo, [], r))  # never called: size 0
    a_first, a_size = lo[alpha], vals[alpha] - lo[alpha] + 1  # a in (v_{α-1}, v_α]
    b_first = lo[beta]  # b in (v_{β-1}, v_β] (b <= N past the last point)
    b_size = ([*vals, n_dom][beta]) - b_first + 1

    def member(r: int) -> Hypothesis:
        return interval_hypothesis(n_dom, a_first + r // b_size, b_first + r % b_size)

    return VersionSpace(a_size * b_size, member)


def _in_gap_interval(n_dom: int, starts: list[int], gaps: list[int], r: int) -> Hypothesis:
    """``r = 0``: the empty function; then the intervals inside each gap, gap by gap."""
    if r == 0:
        return interval_hypothesis(n_dom, 0, 0)
    r -= 1
    for start, g in zip(starts, gaps, strict=True):
        inside = g * (g + 1) // 2
        if r < inside:
            i, j = nth_pair(g, r)
            return interval_hypothesis(n_dom, start + i, start + j)
        r -= inside
    raise AssertionError("gap index out of range")  # unreachable: r < zero_block


def nth_pair(g: int, r: int) -> tuple[int, int]:
    """The ``r``-th pair ``0 <= i < j <= g`` in lexicographic order (``g - i`` pairs start at i)."""
    lo, hi = 0, g - 1  # largest i with before(i) <= r, before(i) = i·g - i(i-1)/2

    def before(i: int) -> int:
        return i * g - i * (i - 1) // 2

    while lo < hi:
        mid = (lo + hi + 1) // 2
        if before(mid) <= r:
            lo = mid
        else:
            hi = mid - 1
    return lo, lo + 1 + r - before(lo)


def _limbs(sizes: np.ndarray, exact_total: bool) -> list[tuple[int, np.ndarray]]:
    """``sizes`` as ``Σ_i limb_i << shift_i`` with ``uint64`` limbs.

    One limb (the values themselves) when ``exact_total``; else 16-bit limbs.
    """
    if exact_total and sizes.dtype == np.uint64:
        return [(0, sizes)]
    values = [int(v) for v in sizes.tolist()]
    bits = max((v.bit_length() for v in values), default=1)
    return [
        (shift, np.array([(v >> shift) & 0xFFFF for v in values], dtype=np.uint64))
        for shift in range(0, max(bits, 1), 16)
    ]


def _pair_level_sums(
    size_a: np.ndarray, size_b: np.ndarray, walk: np.ndarray, ones_total: int, n: int, class_size: int
) -> tuple[int, ...]:
    """``out[e] = Σ_{α < β, #ones - (W[β] - W[α]) = e} |A_α|·|B_β|``, exactly; O(k²) time.

    Overflow argument: each level sum is at most ``|H|``. If ``|H| < 2**64`` the ``uint64``
    accumulators never exceed ``|H|`` (all terms are non-negative). Otherwise the sizes are
    split into 16-bit limbs, so every product of limbs is below ``2**32``; the ``uint64``
    accumulators are added into Python ints before ``2**32`` products can have reached them.
    """
    k = walk.shape[0] - 1
    exact = class_size < _UINT64_LIMIT
    limbs_a, limbs_b = _limbs(size_a, exact), _limbs(size_b, exact)
    total = [0] * (n + 1)
    rows = max(1, _CHUNK_ELEMENTS // max(k, 1))
    flush_every = max(1, _FLUSH_PRODUCTS // (rows * (k + 1)))  # < 2**32 products of < 2**32 per flush
    beta = np.arange(k + 1)
    for sa, la in limbs_a:
        for sb, lb in limbs_b:
            acc = np.zeros(n + 1, dtype=np.uint64)
            for chunk, start in enumerate(range(0, k, rows)):
                alpha = np.arange(start, min(start + rows, k))
                mask = beta[None, :] > alpha[:, None]
                errs = ones_total - (walk[None, :] - walk[alpha][:, None])
                prod = la[alpha][:, None] * lb[None, :]
                np.add.at(acc, errs[mask], prod[mask])
                if not exact and (chunk + 1) % flush_every == 0:
                    for e, c in enumerate(acc.tolist()):
                        total[e] += c << (sa + sb)
                    acc[:] = 0
            for e, c in enumerate(acc.tolist()):
                total[e] += c << (sa + sb)
    return tuple(total)


# -- finite classes ---------------------------------------------------------------------------


def _row_errors(packed: np.ndarray, xs: np.ndarray, ys: np.ndarray, domain_size: int) -> np.ndarray:
    """Errors of every row of a packed (``np.packbits`` big-endian, axis 1) truth table.

    ``errors(h) = #ones - Σ_x h(x)·ones(x) + Σ_x h(x)·zeros(x)``; each sum is
    ``Σ_j 2**j · popcount(row & plane_j)`` over the bit-planes ``plane_j`` of the counts.
    """
    pos = np.bincount(xs[ys.astype(bool)], minlength=domain_size)
    neg = np.bincount(xs[~ys.astype(bool)], minlength=domain_size)
    errors = np.full(packed.shape[0], int(pos.sum()), dtype=np.int64)
    for counts, sign in ((pos, -1), (neg, 1)):
        for j in range(int(counts.max(initial=0)).bit_length()):
            plane = np.packbits(((counts >> j) & 1).astype(bool))
            hits = np.bitwise_count(packed & plane).sum(axis=1, dtype=np.int64)
            errors += sign * (hits << j)
    return errors


def _table_levels(hclass: HypothesisClass, packed: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> ErrorLevels:
    errors = _row_errors(packed, xs, ys, hclass.domain_size)
    counts = tuple(int(c) for c in np.bincount(errors, minlength=xs.shape[0] + 1))

    def member(e: int, r: int) -> Hypothesis:
        return hclass.hypothesis(int(np.flatnonzero(errors == e)[r]))

    return ErrorLevels(counts, member)


# -- dispatch ---------------------------------------------------------------------------------


def error_levels(hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray) -> ErrorLevels:
    """Partition ``hclass`` by errors on the validated sample ``(xs, ys)`` (see the module doc)."""
    if isinstance(hclass, Thresholds | Points | Intervals):
        s = summarise(xs, ys, hclass.domain_size)
        if isinstance(hclass, Thresholds):
            return _threshold_levels(hclass, s)
        if isinstance(hclass, Points):
            return _point_levels(hclass, s)
        return _interval_levels(hclass, s)
    if hclass.domain_size - 1 > INT64_MAX:
        raise LearningInputError(f"{hclass.spec}: truth-table classes need a domain below 2^63")
    if isinstance(hclass, FiniteClass):
        return _table_levels(hclass, hclass.packed, xs, ys)
    if hclass.size * hclass.domain_size > MAX_DENSE_ENTRIES:
        raise LearningInputError(
            f"{hclass.spec}: no exact block decomposition for {type(hclass).__name__}, and its truth "
            f"table ({hclass.size} x {hclass.domain_size}) is too large to enumerate"
        )
    return _table_levels(hclass, np.packbits(hclass.matrix(), axis=1), xs, ys)
