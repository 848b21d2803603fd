"""Sparse selection over huge sets of class members, given as boxes of the class's parameters.

The proper learner's blocks each hold a set Ŝ of functions (:mod:`.sparse_selection`,
GGKM21 Proposition 5.6); on ``thresholds:2^32`` a block's Ŝ can be its whole version space, 10^8 cuts. Here a
set is a :class:`BlockSet`: boxes of *members* in parameter coordinates plus a few explicit
functions outside the class (improper SOAs):

* ``thresholds:N``: the member ``1[x >= t]`` is the point ``(t,)``, ``t = 0..N``;
* ``points:N``: ``1[x = i]`` is ``(i,)`` and the all-zero function is ``(N,)``;
* ``intervals:N``: ``1[a <= x < b]`` (``a < b``) is ``(a, b)``; the empty set is ``(N, N)``.

A box is a product of inclusive coordinate ranges; the boxes of one set are disjoint.

:func:`select` is exactly the sparse selection of :func:`~.sparse_selection.sparse_select`
(the exponential mechanism at ``ε' = ε - ln(1 + δ)`` with score ``c(u)`` = number of sets holding u,
plus the phantom block of ``ceil(ℓ/δ)`` members with score 1 standing for the default): the members
are grouped by count (a sweep over the boxes' edges: 1-D events or a 2-D difference grid on the
compressed coordinates), the mechanism picks a group with probability ∝ size·exp(ε'c/2)
(:meth:`~privstream.learning.mechanisms.ExponentialMechanism.select_block`, exact), then a uniform
member of the group. Grouping does not change the law (members with equal counts have equal
weights), so the privacy proof of the sparse selection applies verbatim. Cost: O(b log b) for b boxes
(1-D), O(b²) cells (2-D).

>>> from privstream.learning.hypothesis_classes import parse_class_spec
>>> from privstream.learning.randomness import seeded
>>> H = parse_class_spec("thresholds:4294967296")
>>> sets = [BlockSet(boxes=(((1000 + 10 * i,), (2**31 + i,)),)) for i in range(200)]
>>> h = select(H, sets, epsilon=1.0, delta=1e-6, ell=H.size, rng=seeded(0))
>>> 2990 <= coordinates(H, h)[0] <= 2**31
True
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

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
from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.private_learners.proper.sparse_selection import inner_epsilon
from privstream.learning.randomness import RandomSource

__all__ = ["BlockSet", "Box", "coordinates", "dimension", "member_at", "select", "selection_law"]

#: ``(low corner, high corner)``, both inclusive, one int per coordinate.
Box = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class BlockSet:
    """One block's set: disjoint boxes of members and explicit non-member functions."""

    boxes: tuple[Box, ...] = ()
    improper: tuple[Hypothesis, ...] = field(default_factory=tuple)

    def size(self) -> int:
        return sum(math.prod(h - lo + 1 for lo, h in zip(*box, strict=True)) for box in self.boxes) + len(
            self.improper
        )


def dimension(hclass: HypothesisClass) -> int:
    """Number of coordinates of a member (1 or 2); only structured classes have coordinates."""
    if isinstance(hclass, Thresholds | Points):
        return 1
    if isinstance(hclass, Intervals):
        return 2
    raise TypeError(f"{hclass.spec}: member coordinates exist for thresholds, points and intervals only")


def coordinates(hclass: HypothesisClass, h: Hypothesis) -> tuple[int, ...] | None:
    """The coordinates of ``h`` if it is a member of the class, else None.

    >>> from privstream.learning.hypothesis_classes import parse_class_spec
    >>> coordinates(parse_class_spec("intervals:10"), interval_hypothesis(10, 2, 5))
    (2, 5)
    """
    n = hclass.domain_size
    if h.domain_size != n:
        return None
    first, changes = h.change_points()
    if isinstance(hclass, Thresholds):
        if not changes:
            return (0,) if first else (n,)
        return (changes[0],) if first == 0 and len(changes) == 1 else None
    if isinstance(hclass, Points):
        if first == 0 and not changes:
            return (n,)
        if first == 1:
            return (0,) if changes == [1] or (n == 1 and not changes) else None
        if len(changes) == 2 and changes[1] == changes[0] + 1:
            return (changes[0],)
        return (n - 1,) if changes == [n - 1] else None
    if isinstance(hclass, Intervals):
        if first == 0:
            if not changes:
                return (n, n)
            if len(changes) == 1:
                return (changes[0], n)
            return (changes[0], changes[1]) if len(changes) == 2 else None
        if not changes:
            return (0, n)
        return (0, changes[0]) if len(changes) == 1 else None
    raise TypeError(f"{hclass.spec}: member coordinates exist for thresholds, points and intervals only")


def member_at(hclass: HypothesisClass, coord: Sequence[int]) -> Hypothesis:
    """The member with these coordinates (inverse of :func:`coordinates`)."""
    n = hclass.domain_size
    if isinstance(hclass, Thresholds):
        return threshold_hypothesis(n, int(coord[0]))
    if isinstance(hclass, Points):
        i = int(coord[0])
        return point_hypothesis(n, None if i == n else i)
    if isinstance(hclass, Intervals):
        a, b = int(coord[0]), int(coord[1])
        return interval_hypothesis(n, a, b) if a < b else interval_hypothesis(n, 0, 0)
    raise TypeError(f"{hclass.spec}: member coordinates exist for thresholds, points and intervals only")


# -- counting: members grouped by the number of sets holding them ------------------------------


@dataclass(frozen=True)
class _Cells:
    """Cells of constant count: ``lo[i]`` (coordinates), ``extent[i]`` (per-axis lengths), ``count[i]``."""

    lo: list[tuple[int, ...]]
    extent: list[tuple[int, ...]]
    count: list[int]


def _cells(boxes: Sequence[Box], dim: int) -> _Cells:
    if not boxes:
        return _Cells([], [], [])
    if dim == 1:
        events: Counter[int] = Counter()
        for (lo,), (hi,) in boxes:
            events[lo] += 1
            events[hi + 1] -= 1
        edges = sorted(events)
        lo_out: list[tuple[int, ...]] = []
        ext: list[tuple[int, ...]] = []
        cnt: list[int] = []
        running = 0
        for left, right in itertools.pairwise(edges):
            running += events[left]
            if running:
                lo_out.append((left,))
                ext.append((right - left,))
                cnt.append(running)
        return _Cells(lo_out, ext, cnt)
    # 2-D: difference grid on the compressed coordinates (edges of every box on each axis)
    a_edges = sorted({b[0][0] for b in boxes} | {b[1][0] + 1 for b in boxes})
    b_edges = sorted({b[0][1] for b in boxes} | {b[1][1] + 1 for b in boxes})
    a_index = {v: i for i, v in enumerate(a_edges)}
    b_index = {v: i for i, v in enumerate(b_edges)}
    grid = np.zeros((len(a_edges), len(b_edges)), dtype=np.int64)
    for (a0, b0), (a1, b1) in boxes:
        i0, i1, j0, j1 = a_index[a0], a_index[a1 + 1], b_index[b0], b_index[b1 + 1]
        grid[i0, j0] += 1
        grid[i1, j0] -= 1
        grid[i0, j1] -= 1
        grid[i1, j1] += 1
    counts = grid.cumsum(axis=0).cumsum(axis=1)[:-1, :-1]
    rows, cols = np.nonzero(counts)
    lo_out = [(a_edges[i], b_edges[j]) for i, j in zip(rows.tolist(), cols.tolist(), strict=True)]
    ext = [
        (a_edges[i + 1] - a_edges[i], b_edges[j + 1] - b_edges[j])
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True)
    ]
    return _Cells(lo_out, ext, counts[rows, cols].tolist())


def _universe(
    hclass: HypothesisClass, sets: Sequence[BlockSet]
) -> tuple[_Cells, list[Hypothesis], dict[Hypothesis, int]]:
    dim = dimension(hclass)
    boxes = [box for s in sets for box in s.boxes]
    cells = _cells(boxes, dim)
    counts: Counter[Hypothesis] = Counter()
    for s in sets:
        counts.update(set(s.improper))
    # a data-independent order of the explicit functions: by canonical key
    improper = sorted(counts, key=lambda h: repr(h.key()))
    return cells, improper, dict(counts)


def _groups(cells: _Cells) -> tuple[list[int], list[int]]:
    """(distinct counts, total members with that count), counts increasing."""
    totals: dict[int, int] = {}
    for ext, c in zip(cells.extent, cells.count, strict=True):
        totals[c] = totals.get(c, 0) + math.prod(ext)
    keys = sorted(totals)
    return keys, [totals[c] for c in keys]


def _blocks(
    cells: _Cells, improper: list[Hypothesis], counts: dict[Hypothesis, int], ell: int, delta: float
) -> tuple[list[int], list[tuple[int, int]]]:
    group_counts, group_sizes = _groups(cells)
    blocks = list(zip(group_sizes, group_counts, strict=True))
    blocks += [(1, counts[h]) for h in improper]
    blocks.append((math.ceil(Fraction(ell) / Fraction(delta)), 1))  # the phantom ⊥ (default)
    return group_counts, blocks


def _member_of_group(hclass: HypothesisClass, cells: _Cells, count: int, offset: int) -> Hypothesis:
    """The ``offset``-th member (coordinate order) among the members held by ``count`` sets."""
    for lo, ext, c in zip(cells.lo, cells.extent, cells.count, strict=True):
        if c != count:
            continue
        size = math.prod(ext)
        if offset < size:
            if len(ext) == 1:
                return member_at(hclass, (lo[0] + offset,))
            da, db = divmod(offset, ext[1])
            return member_at(hclass, (lo[0] + da, lo[1] + db))
        offset -= size
    raise AssertionError("offset beyond the group")  # unreachable: offset < the group's size


def select(
    hclass: HypothesisClass,
    sets: Sequence[BlockSet],
    *,
    epsilon: float,
    delta: float,
    ell: int,
    rng: RandomSource,
    default: Hypothesis | None = None,
) -> Hypothesis:
    """One (ε, δ)-DP sparse selection over the sets (module docstring); ⊥ gives ``default``.

    ``ell`` is the public bound on every set's size; ``default`` (data-independent) defaults to
    the class's row 0.
    """
    for s in set(sets):  # blocks with equal data share one set object
        if s.size() > ell:
            raise ValueError(f"a set has {s.size()} elements, more than the public bound {ell}")
    cells, improper, counts = _universe(hclass, sets)
    group_counts, blocks = _blocks(cells, improper, counts, ell, delta)
    i = ExponentialMechanism(inner_epsilon(epsilon, delta), 1, rng=rng).select_block(blocks)
    if i == len(blocks) - 1:
        return hclass.hypothesis(0) if default is None else default
    if i < len(group_counts):
        return _member_of_group(hclass, cells, group_counts[i], rng.uniform_int(blocks[i][0]))
    return improper[i - len(group_counts)]


def selection_law(
    hclass: HypothesisClass,
    sets: Sequence[BlockSet],
    *,
    epsilon: float,
    delta: float,
    ell: int,
    default: Hypothesis | None = None,
    max_members: int = 100_000,
) -> dict[Hypothesis, float]:
    """The exact output law of :func:`select` (floats; tests and audits, small universes only)."""
    cells, improper, counts = _universe(hclass, sets)
    group_counts, blocks = _blocks(cells, improper, counts, ell, delta)
    probs = ExponentialMechanism(inner_epsilon(epsilon, delta), 1).block_probabilities(blocks)
    law: dict[Hypothesis, float] = {}
    for g, (size, count) in enumerate(blocks[: len(group_counts)]):
        if size > max_members:
            raise ValueError("selection_law enumerates members: universe too large")
        for r in range(size):
            h = _member_of_group(hclass, cells, count, r)
            law[h] = law.get(h, 0.0) + probs[g] / size
    for h, p in zip(improper, probs[len(group_counts) : -1], strict=True):
        law[h] = law.get(h, 0.0) + p
    fallback = hclass.hypothesis(0) if default is None else default
    law[fallback] = law.get(fallback, 0.0) + probs[-1]
    return law
