"""Point masses inside the partition's leaves: one point per leaf, chosen privately, cut out as its own cell.

**Why.** PrivTree's depth bias makes isolating one point cost ``λ·ln N`` counts in all (δ = λ ln β
per level, ``log_β N`` levels): at N = 2^32 and ε_p = 1/8 (replace-one, β = 2) about 710, so a
value holding 5% of 10,000 examples stays inside a leaf of about 2^10 points, its mass spread
evenly over them, and a threshold query at the value is off by up to that 5%. Real data has such
values (defaults, zeros, popular values).

**Mechanism.** Given the partition (a DP output), each leaf ``[lo, hi)`` wider than one point
draws one point ``x*`` of it by the exponential mechanism with score ``c(x)`` = the number of
examples at ``x`` (McSherry-Talwar 2007; [S Lemma 3.2]), exactly
(:class:`~privstream.learning.mechanisms.ExponentialMechanism` over blocks: the points of one
count form one block, the points without examples one block of size ``hi - lo - #values``; the
member uniform within its block). The leaf then becomes two cells, ``x*`` and the rest of the leaf
(both sides of ``x*``, its mass spread evenly over them as over the leaf before), and the counts
step (:mod:`.consistent_tree`) measures both. A heavy point wins
(its weight ``e^{ε·c/2}`` beats the leaf's width ``hi - lo`` once ``c > 2 ln(hi - lo)/ε``); in a leaf
without one, the extra cell is harmless: a count that is noise around 0.

**Privacy** (``ε_h`` for all leaves together). The leaves are disjoint and each example lies in
exactly one of them, so one example changes the scores of at most two leaves, by at most 1 at
one point each. A count only grows when an example is added and only shrinks when one is
removed (*monotone* scores), so with weights ``exp(ε_h·c)`` one leaf's draw changes by at most
``e^{ε_h}`` under add/remove-one (the numerator and the normaliser move the same way), and the
other leaves not at all: ``ε_h``-DP under add/remove-one. Under replace-one the moved example
leaves one point and joins another, in the same leaf (two counts move in opposite directions) or
in two leaves (one removal, one addition); weights ``exp(ε_h·c/2)`` bound each of the two changes
by ``e^{ε_h/2}``: ``ε_h``-DP under replace-one. Sequential composition with the partition before
and the counts after.

>>> from privstream.learning.randomness import seeded
>>> xs = np.array([0] + [700] * 200 + [1000])
>>> blocks, cells = heavy_point_cells(xs, [0, 512, 1024], 1.0, "replace-one", seeded(0))
>>> blocks, cells  # [0, 512) stays one cell; 700 (200 examples) is one, [512, 700) + [701, 1024) one
([0, 512, 700, 701, 1024], [0, 1, 2, 1])
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Literal

import numpy as np

from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.randomness import RandomSource

__all__ = ["heaviest_value_cells", "heavy_point_cells", "none_score", "point_mechanism", "weight_coefficient"]

Relation = Literal["replace-one", "add-remove-one"]


def point_mechanism(epsilon: float | Fraction, relation: Relation, rng: RandomSource) -> ExponentialMechanism:
    """The per-leaf draw: weights ``exp(ε·c/2)`` under replace-one, ``exp(ε·c)`` under add/remove-one."""
    sensitivity = Fraction(epsilon) / (2 * weight_coefficient(epsilon, relation))  # ε/(2Δ) = c
    return ExponentialMechanism(epsilon, sensitivity, rng=rng)


def weight_coefficient(epsilon: float | Fraction, relation: Relation) -> Fraction:
    """c in the weights ``exp(c·count)``: ε/2 under replace-one, ε under add/remove-one (monotone scores)."""
    return Fraction(epsilon) / 2 if relation == "replace-one" else Fraction(epsilon)


def none_score(width: int, coefficient: Fraction) -> int:
    """The score of "no point" in a leaf of ``width`` points: ``⌈(ln width + ln 20)/c⌉``, a weight
    at least 20 times the leaf's empty points' (public: the width is a DP output).

    >>> none_score(1024, Fraction(1, 16))
    159
    """
    return math.ceil((math.log(width) + math.log(20)) / float(coefficient))


def _leaf_point(
    values: list[int], counts: list[int], lo: int, width: int, mech: ExponentialMechanism, none: int
) -> int | None:
    """A point of ``[lo, lo + width)`` or None, with weights ∝ exp(c·count) and exp(c·none_score)."""
    by_count: dict[int, list[int]] = {}
    for v, c in zip(values, counts, strict=True):
        by_count.setdefault(c, []).append(v)
    blocks = [(len(vs), c) for c, vs in by_count.items()]
    empty = width - len(values)
    if empty:
        blocks.append((empty, 0))
    blocks.append((1, none))
    i = mech.select_block(blocks)
    if i == len(blocks) - 1:
        return None
    rng = mech.rng
    if empty and i == len(blocks) - 2:  # a point without examples: the j-th of them, skipping values
        x = lo + rng.uniform_int(empty)
        for v in values:
            if v <= x:
                x += 1
            else:
                break
        return x
    members = by_count[blocks[i][1]]
    return members[rng.uniform_int(len(members))]


def heavy_point_cells(
    points: np.ndarray, edges: list[int], epsilon: float | Fraction, relation: Relation, rng: RandomSource
) -> tuple[list[int], list[int]]:
    """Leaves split into cells where a point is drawn: the point, and the rest (``points`` sorted).

    Returns ``(block_edges, cell_of_block)``: the leaves cut at ``x*`` and ``x* + 1`` where a point
    was drawn, and for each block its cell, numbered in domain order (a leaf's rest, its two
    sides, is one cell; its point the next one; a leaf without a point one cell). Cells, not
    blocks, are counted: a split leaf costs two counts, not three.
    """
    mech = point_mechanism(epsilon, relation, rng)
    coefficient = weight_coefficient(epsilon, relation)

    def draw(lo: int, hi: int, values: list[int], counts: list[int]) -> int | None:
        return _leaf_point(values, counts, lo, hi - lo, mech, none_score(hi - lo, coefficient))

    return _cells(points, edges, draw)


def heaviest_value_cells(points: np.ndarray, edges: list[int]) -> tuple[list[int], list[int]]:
    """BROKEN on purpose (privacy audits only): every leaf split at its most frequent value, no noise."""

    def heaviest(lo: int, hi: int, values: list[int], counts: list[int]) -> int:
        return values[int(np.argmax(counts))] if values else lo

    return _cells(points, edges, heaviest)


def _cells(
    points: np.ndarray, edges: list[int], choose: Callable[..., int | None]
) -> tuple[list[int], list[int]]:
    values_all = points.tolist()
    bounds = [bisect.bisect_left(values_all, e) for e in edges]
    block_edges = [edges[0]]
    cell_of_block: list[int] = []
    cell = 0
    for j, (lo, hi) in enumerate(itertools.pairwise(edges)):
        x = choose(lo, hi, *_run_lengths(points[bounds[j] : bounds[j + 1]])) if hi - lo > 1 else None
        if x is None:
            block_edges.append(hi)
            cell_of_block.append(cell)
            cell += 1
            continue
        if x > lo:  # the rest below the point
            block_edges.append(x)
            cell_of_block.append(cell)
        block_edges.append(x + 1)
        cell_of_block.append(cell + 1)
        if x + 1 < hi:  # the rest above it: the same cell as below
            block_edges.append(hi)
            cell_of_block.append(cell)
        cell += 2
    return block_edges, cell_of_block


def _run_lengths(inside: np.ndarray) -> tuple[list[int], list[int]]:
    """Distinct values (sorted) and their counts."""
    if inside.dtype == object:
        listed = inside.tolist()
        uniq = sorted({int(v) for v in listed})
        return uniq, [listed.count(v) for v in uniq]
    u, c = np.unique(inside, return_counts=True)
    return [int(v) for v in u.tolist()], [int(v) for v in c.tolist()]
