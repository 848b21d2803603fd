"""ReduceTree on thresholds, points and intervals of any size, without the class as a matrix.

The proper learner (:mod:`privstream.learning.private_learners.proper`) runs ReduceTree
(:func:`~.reduce_tree.reduce_tree`, GGKM Alg 1) on every block. On a class given
as a matrix that is an exact search over subclasses
(:class:`~.irreducibility.ClassLattice`), limited to 4,096 rows. For the
structured classes :func:`block_set` computes the same set Ŝ from closed forms or a small matrix,
in three steps.

**1. Only the top level matters.** Every class ReduceTree touches is ``F_{T, q} ∩ a(v)`` for a level
``q <= α_1 = (d+2)α_Δ``, so it lies inside ``L = {f : mistakes_T(f) <= b}``, ``b = floor((d+2)·α_Δ·n0)``
(the top level's integer bound). The class's other rows never enter an Ldim, an order, a witness or an
SOA: ReduceTree(F, T) = ReduceTree(L, T). The exact error levels
(:func:`~..generic.error_levels.error_levels`) give |L| without enumerating the class; when
``b = 0``, L is the version space and :func:`~..generic.error_levels.version_space` gives it in
O(n0 log n0) (the full levels of intervals cost O(k²) in the k distinct points).

**2. The version-space regime: closed forms.** When ``b = 0`` (``(d+2)·α_Δ·n0 < 1``) every level is
the block's version space V, whatever its size:

* *thresholds*: V is a chain of consecutive cuts; *intervals with a positive example*: V is a product of
  two chains (left ends times right ends). Irreducibility orders there are ``0``, ``1`` or ``∞``
  (:func:`chain_order`, :func:`product_order`: a chain of s cuts has order 1 iff ``s = 2^(L+1) - 1``,
  ``L >= 1``, order ∞ iff s <= 1, else 0 -- a balanced split loses Ldim on both sides; a product takes the
  smaller of its chains' orders). So no class of two or more functions is ``k_t = k'2^t >= 2``-irreducible:
  the loop of Alg 1 never stops early, every leaf of maximal Ldim is expanded, the maximum drops by at
  least one per iteration (eq. 15) and reaches 0 by ``t = d + 1``. Then the leaves of L' are exactly the
  singletons of V (the leaves partition F), each ∞-irreducible: **Ŝ = V** (Lemma A).
* *points without a positive example*: V = the all-zero function and the unseen points, an isolating
  class with ``ord(V) = |V| - 2`` (:func:`isolating_order`). Ldim(F) = 1, so Alg 1 has one iteration; when
  ``|V| - 2 >= 2k'`` it stops at once and **Ŝ = {SOA(V)} = {all-zero}** (Lemma B).

**3. Otherwise: a compressed matrix, or abstain.** If ``|L| <= cap`` (:data:`COMPRESSED_ROWS`: 4,096
points, 1,024 thresholds, 300 intervals) its members are listed and the domain is cut at every change
point of every member: inside a cell all of L is constant, so points of one cell split every subclass
alike, and the lattice's canonical tie-break (the smallest point of a split) picks the cell's first
point. ReduceTree on this ``|L| x cells`` matrix is ReduceTree on F, and its SOA tables, constant on
cells, expand to functions on the whole domain.
Larger L without a closed form -- *intervals without a positive example* (the empty set plus every
interval inside a gap between negatives) and ``b > 0`` -- make the block **abstain** (Ŝ = ∅). This is
where the structured path differs from ReduceTree: it changes accuracy only (a per-block deterministic
map keeps the sparse selection's privacy proof), such blocks are rare exactly when the target's mass p
is large (a block of n0 examples misses it with probability (1-p)^n0), and when they are common the
default (the empty interval) is accurate. ReduceTree itself would not finish there: irreducibility is
an exact search over subclasses, 3 s for the 529 intervals of ``intervals:32`` without data, minutes
for ``intervals:64``. Beyond 4,096 hypotheses the learner requires ``b = 0`` (the proper learner
checks it on public parameters before any data).

Cost per block: O(n0 log n0) for the version space (b = 0; the levels of the small classes
otherwise), O(n0) for the closed forms, a ReduceTree on at most
``cap`` rows and ``2·cap`` cells otherwise. Nothing depends on the domain size: ``thresholds:2^32``
costs what ``thresholds:1024`` costs.

>>> import numpy as np
>>> from fractions import Fraction
>>> from privstream.learning.hypothesis_classes import parse_class_spec
>>> H = parse_class_spec("thresholds:4294967296")
>>> xs = np.array([10**9, 3 * 10**9]); ys = np.array([0, 1])
>>> s, how = block_set(H, xs, ys, n0=2, k_prime=1, alpha_delta=Fraction(1, 100), d=32)
>>> how, s.boxes, s.size()
('chain', (((1000000001,), (3000000000,)),), 2000000000)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from privstream.learning.hypotheses import Hypothesis, hypothesis_from_runs
from privstream.learning.hypothesis_classes import HypothesisClass, Intervals, Points, Thresholds
from privstream.learning.private_learners.generic.error_levels import error_levels, version_space
from privstream.learning.private_learners.proper.irreducibility import INFINITE, MAX_ROWS, ClassLattice
from privstream.learning.private_learners.proper.reduce_tree import reduce_tree, row_mistakes
from privstream.learning.private_learners.proper.structured_selection import BlockSet, coordinates

__all__ = [
    "COMPRESSED_ROWS",
    "block_set",
    "chain_order",
    "compressed_cap",
    "is_structured",
    "isolating_order",
    "lattice_block_set",
    "product_order",
    "to_block_set",
    "top_bound",
]


#: The largest low-error class L run through ReduceTree as a matrix, per class. Irreducibility is an
#: exact search over subclasses: cheap on point functions (isolating: 0.3 s at 4,095 rows), slower on
#: chains (2 s at 2,609 cuts), and fast-growing on intervals without a positive example (0.3 s at 301
#: rows, 3 s at 529: ``intervals:24`` and ``:32`` with no data).
COMPRESSED_ROWS = {"points": MAX_ROWS, "thresholds": 1024, "intervals": 300}


def compressed_cap(hclass: HypothesisClass) -> int:
    """:data:`COMPRESSED_ROWS` for the class's kind."""
    if isinstance(hclass, Points):
        return COMPRESSED_ROWS["points"]
    return COMPRESSED_ROWS["thresholds" if isinstance(hclass, Thresholds) else "intervals"]


def is_structured(hclass: HypothesisClass) -> bool:
    """Thresholds, points and intervals: the classes with closed forms (any domain size)."""
    return isinstance(hclass, Thresholds | Points | Intervals)


# -- closed forms of the irreducibility order (GGKM21 Def 4.1) ----------------------------------


def chain_order(size: int) -> int | float:
    """``ord`` of a chain of ``size`` nested functions (any subset of a threshold class).

    >>> [chain_order(s) for s in range(1, 9)]
    [inf, 0, 1, 0, 0, 0, 1, 0]
    """
    if size <= 1:
        return INFINITE
    return 1 if size >= 3 and (size + 1) & size == 0 else 0


def product_order(p: int, q: int) -> int | float:
    """``ord`` of a product of chains of sizes p and q (an interval version space after a positive)."""
    if p <= 0 or q <= 0:
        return INFINITE  # empty
    return min(chain_order(p), chain_order(q))


def isolating_order(size: int) -> int | float:
    """``ord`` of a class whose every split isolates one function (point functions, with or without 0)."""
    return INFINITE if size <= 1 else size - 2


def top_bound(n0: int, alpha_delta: Fraction, d: int) -> int:
    """``b = floor((d+2)·α_Δ·n0)``: the mistakes allowed at ReduceTree's top level (exact)."""
    return math.floor(Fraction(d + 2) * Fraction(alpha_delta) * n0)


# -- the sets ------------------------------------------------------------------------------------


def to_block_set(hclass: HypothesisClass, functions: list[Hypothesis]) -> BlockSet:
    """Members as one-point boxes, the rest as explicit functions (a set: duplicates dropped)."""
    boxes, improper = set(), set()
    for h in functions:
        c = coordinates(hclass, h)
        if c is None:
            improper.add(h)
        else:
            boxes.add((c, c))
    return BlockSet(boxes=tuple(sorted(boxes)), improper=tuple(sorted(improper, key=lambda h: repr(h.key()))))


def _expand(n: int, starts: list[int], table: np.ndarray) -> Hypothesis:
    """The function on ``{0..n-1}`` equal to ``table[i]`` on the cell ``[starts[i], starts[i+1])``."""
    values = np.asarray(table, dtype=bool)
    changes = [starts[i] for i in np.flatnonzero(values[1:] != values[:-1]) + 1]
    return hypothesis_from_runs(n, int(values[0]), changes)


def _compressed(
    hclass: HypothesisClass,
    members: list[Hypothesis],
    mistakes: np.ndarray,
    n0: int,
    k_prime: int,
    alpha_delta: Fraction,
    d: int,
) -> list[Hypothesis]:
    """ReduceTree on the members of L over the cells of their change points (step 2)."""
    starts = sorted({0}.union(*(h.change_points()[1] for h in members)))
    cell_points = np.array(starts, dtype=np.int64)
    matrix = np.stack([h.predict(cell_points).astype(bool) for h in members])
    result = reduce_tree(ClassLattice(matrix), mistakes, n0, k_prime, alpha_delta, d)
    return [_expand(hclass.domain_size, starts, table) for table in result.s_hat.values()]


def block_set(
    hclass: HypothesisClass,
    xs: np.ndarray,
    ys: np.ndarray,
    *,
    n0: int,
    k_prime: int,
    alpha_delta: Fraction,
    d: int,
    cap: int | None = None,
    lattice: ClassLattice | None = None,
) -> tuple[BlockSet, str]:
    """Ŝ of ReduceTree on one block of a structured class, and how it was computed.

    ``how`` is ``"chain"``, ``"product"``, ``"isolating"`` (closed forms, step 2, whatever the size),
    ``"matrix"`` (step 3, ``|L| <= cap``) or ``"abstain"`` (Ŝ = ∅ without running ReduceTree;
    module docstring). ``n0`` is the public block size that scales the levels (the block itself
    may have another size). ``lattice``: the whole class as a matrix, used instead of the compressed
    one when given (its memo is shared by every block of a fit).
    """
    bound = top_bound(n0, alpha_delta, d)
    member: Callable[[int, int], Hypothesis]
    if bound == 0:  # the version-space regime: level 0 alone, O(n log n) on every structured class
        vs = version_space(hclass, xs, ys)
        counts: tuple[int, ...] = (vs.size,)

        def version_space_member(e: int, r: int) -> Hypothesis:
            return vs.member(r)

        member = version_space_member
    else:  # small classes only (the learner enforces b = 0 beyond them): the full levels are cheap
        levels = error_levels(hclass, xs, ys)
        counts, member = levels.counts[: bound + 1], levels.member
    size = sum(counts)
    if size == 0:
        return BlockSet(), "matrix"
    if bound == 0 and size > 1:
        closed = _closed_form(hclass, np.asarray(xs), np.asarray(ys).astype(bool), size, k_prime)
        if closed is not None:
            return closed
    cap = compressed_cap(hclass) if cap is None else cap
    if size > max(cap, 1):  # a singleton L is its own Ŝ: the matrix path handles it at once
        return BlockSet(), "abstain"
    if lattice is not None:
        return lattice_block_set(
            hclass, lattice, xs, ys, n0=n0, k_prime=k_prime, alpha_delta=alpha_delta, d=d
        ), "matrix"
    members = [member(e, r) for e, c in enumerate(counts) for r in range(c)]
    mistakes = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    functions = _compressed(hclass, members, mistakes, n0, k_prime, alpha_delta, d)
    return to_block_set(hclass, functions), "matrix"


def _closed_form(
    hclass: HypothesisClass, xs: np.ndarray, labels: np.ndarray, size: int, k_prime: int
) -> tuple[BlockSet, str] | None:
    """Lemmas A and B for a version space V of ``size >= 2`` functions, or None (no closed form)."""
    pos, neg = xs[labels], xs[~labels]
    n = hclass.domain_size
    if isinstance(hclass, Thresholds):  # V = cuts t with max(neg) < t <= min(pos): a chain (Lemma A)
        lo = int(neg.max()) + 1 if neg.size else 0
        hi = int(pos.min()) if pos.size else n
        return BlockSet(boxes=(((lo,), (hi,)),)), "chain"
    if isinstance(hclass, Intervals):
        if not pos.size:
            return None  # the empty set plus in-gap intervals: no closed form
        lo_pos, hi_pos = int(pos.min()), int(pos.max())
        below, above = neg[neg < lo_pos], neg[neg > hi_pos]
        a0 = int(below.max()) + 1 if below.size else 0
        b1 = int(above.min()) if above.size else n
        return BlockSet(boxes=(((a0, hi_pos + 1), (lo_pos, b1)),)), "product"  # Lemma A
    # points with |V| >= 2: no positive example (a positive leaves at most one point function)
    if isolating_order(size) >= 2 * k_prime:  # Lemma B
        return to_block_set(hclass, [hclass.hypothesis(hclass.size - 1)]), "isolating"
    return None


def lattice_block_set(
    hclass: HypothesisClass,
    lattice: ClassLattice,
    xs: np.ndarray,
    ys: np.ndarray,
    *,
    n0: int,
    k_prime: int,
    alpha_delta: Fraction,
    d: int,
) -> BlockSet:
    """Ŝ of ReduceTree on the whole class as a matrix (the reference the structured path must equal)."""
    result = reduce_tree(lattice, row_mistakes(lattice.counts_matrix, xs, ys), n0, k_prime, alpha_delta, d)
    n = hclass.domain_size
    return to_block_set(hclass, [_expand(n, list(range(n)), t) for t in result.s_hat.values()])
