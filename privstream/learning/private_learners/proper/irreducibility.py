"""Irreducibility of finite classes (GGKM Def 4.1), computed by its recursive order, never by trees.

GGKM21 Definition 4.1. A class G is *k-irreducible* if for every complete depth-k tree some root-to-leaf
path keeps ``Ldim(G)``. Definition 4.1 quantifies over ``|X|^(2^k - 1)`` trees; instead we use the
**irreducibility order** ``ord(G) = max{k : G is k-irreducible}`` and its recursion (
verified there against brute force):

    ord(G) = ∞                                       if |G| <= 1
    ord(G) = min over splitting x of  1 + ord(G|(x, b*))   if Ldim(G|(x, b*)) = Ldim(G)
                                      0                    if both sides lose Ldim

(the full-Ldim side b* is unique). G is k-irreducible iff ``ord(G) >= k``. Facts used here:

* **bound** ``ord(G) <= |G| - 2`` when ``Ldim(G) >= 1`` (each step of the recursion shrinks the
  class and ends at a class of Ldim >= 1, so of >= 2 rows). Hence huge ``k = k'·2^t`` never
  costs more than the class size, and ``order(v, cap)`` computes ``min(ord, cap)`` only.
* **isolating classes** (every split separates one row from the rest, e.g. any set of point
  functions, with or without the all-zero one): ``ord = |G| - 2`` exactly (checked exhaustively on
  small points classes;
  per-column label flips are symmetries, and the recursion removes one row per step). This
  closed form makes ``points:N`` cheap; the general recursion would visit ``2^|G|`` subclasses.

Labels are 0/1 (1 is the paper's +1). Subclasses are Python-int bitmasks over the rows of a
boolean matrix (:class:`~privstream.learning.hypothesis_classes.bitset_search.BitsetClass` gives the memoised
exact Ldim). Reducing arrays (Def 4.3) are stored by their diagonal bits ``c_1..c_k``:
``b^(j) = (1-c_1, ..., 1-c_{j-1}, c_j)`` for ``j <= k`` and ``b^(k+1) = (1-c_1, ..., 1-c_k)`` -- a
decision list "is f(x_1) = c_1? else is f(x_2) = c_2? ...".

>>> import numpy as np
>>> lat = ClassLattice(np.eye(4, dtype=bool))            # points:4 without the zero function
>>> lat.ldim(lat.full), lat.order(lat.full)
(1, 2)
>>> chain = ClassLattice(np.tri(8, 7, -1, dtype=bool))    # thresholds:7 as a chain of 8 rows
>>> chain.ldim(chain.full), chain.order(chain.full)
(3, 0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from privstream.learning.errors import InvariantError, LearningInputError
from privstream.learning.hypothesis_classes import HypothesisClass
from privstream.learning.hypothesis_classes.base import soa_choice
from privstream.learning.hypothesis_classes.bitset_search import BitsetClass, columns_from_matrix

__all__ = [
    "INFINITE",
    "MAX_MATRIX_ENTRIES",
    "MAX_ROWS",
    "ClassLattice",
    "lattice_of",
    "reducing_array",
    "reducing_cells",
]

#: ``ord`` of the empty class and of singletons.
INFINITE = math.inf
#: The largest classes the matrix path accepts (rows, and rows x domain points). Beyond that the
#: exact Ldim/irreducibility searches are not attempted (``thresholds:4095`` and ``points:2047``
#: still fit; ``intervals:90`` is the largest interval class).
MAX_ROWS = 4_096
MAX_MATRIX_ENTRIES = 2**23

Pair = tuple[int, int]


def reducing_array(diagonal: Sequence[int]) -> list[tuple[int, ...]]:
    """The reducing array (Def 4.3) with diagonal bits ``c_j = b^(j)_j`` (0/1 labels).

    >>> reducing_array([1, 0])
    [(1,), (0, 0), (0, 1)]
    """
    c = [int(b) for b in diagonal]
    out = [(*(1 - b for b in c[:j]), c[j]) for j in range(len(c))]
    out.append(tuple(1 - b for b in c))
    return out


def reducing_cells(xs: Sequence[int], diagonal: Sequence[int]) -> list[list[Pair]]:
    """The labelled pairs of the ``k+1`` decision-list cells of points ``xs`` (Def 4.3 applied)."""
    return [list(zip(xs, bits, strict=False)) for bits in reducing_array(diagonal)]


class ClassLattice:
    """Exact Ldim, SOA, irreducibility order and Lemma 4.5 witnesses on subclasses of one matrix.

    ``matrix`` is ``|F| x N`` boolean with distinct rows (row i = bit i of every mask). Results are
    memoised; the memo only caches values, so every answer is a deterministic function of the
    arguments (needed for privacy: a block's output must not depend on other blocks' data).
    """

    def __init__(self, matrix: np.ndarray) -> None:
        m = np.asarray(matrix, dtype=bool)
        if m.ndim != 2 or m.shape[0] == 0 or m.shape[1] == 0:
            raise LearningInputError(f"a class matrix must be a non-empty 2-D array, got shape {m.shape}")
        self.matrix = m
        self.rows, self.domain_size = int(m.shape[0]), int(m.shape[1])
        columns = columns_from_matrix(m)
        self.bits = BitsetClass(columns, self.rows)
        self.full = self.bits.full
        self.columns = columns
        # One representative point per distinct column (points with equal columns split alike).
        first: dict[int, int] = {}
        for x, col in enumerate(columns):
            first.setdefault(col, x)
        self._distinct: list[tuple[int, int]] = sorted((x, col) for col, x in first.items())
        self._order_exact: dict[int, int | float] = {}
        self._order_lower: dict[int, int] = {}
        self._splits_cache: dict[int, list[tuple[int, int, int]]] = {}
        self._isolating: dict[int, bool] = {}
        self._nbytes = (self.rows + 7) // 8
        #: integer copy of the matrix for mistake counts (matrix products)
        self.counts_matrix = m.astype(np.int64)

    # -- basic operations ----------------------------------------------------------------------
    def mask(self, rows: np.ndarray) -> int:
        """The bitmask of a boolean row selector of length ``|F|``."""
        packed = np.packbits(np.asarray(rows, dtype=bool), bitorder="little")
        return int.from_bytes(packed.tobytes(), "little")

    def members(self, v: int) -> np.ndarray:
        """Row indices in the mask ``v``, increasing."""
        raw = np.frombuffer(v.to_bytes(self._nbytes, "little"), dtype=np.uint8)
        return np.flatnonzero(np.unpackbits(raw, bitorder="little")[: self.rows])

    def restrict(self, v: int, pairs: Sequence[Pair]) -> int:
        """``G|_S = {f in G : f(x) = b for all (x, b) in S}`` (inconsistent pairs give 0)."""
        for x, b in pairs:
            col = self.columns[x]
            v = v & col if b else v & ~col
        return v

    def ldim(self, v: int, cap: int | None = None) -> int:
        """``Ldim(G)`` (``-1`` for the empty class); with ``cap``, any value ``>= cap`` means ``>= cap``."""
        if v.bit_count() >= 2 and self.isolating(v):
            return 1  # distinct point functions: every split leaves a singleton (Ldim 0)
        return self.bits.ldim(v, cap)

    def soa(self, v: int) -> np.ndarray:
        """``SOA_G`` (Def 4.2) as a boolean truth table over the domain; ties go to 1 (the paper's +1).

        Points that do not split G get the label all of G gives them (the other side is empty,
        Ldim -1); only splitting points need the Ldim comparison, once per distinct split.
        """
        size = v.bit_count()
        if size == 0:
            return np.ones(self.domain_size, dtype=bool)  # SOA of the empty class: all ties
        if size == 1:
            member: np.ndarray = self.matrix[v.bit_length() - 1].copy()  # SOA_{{f}} = f
            return member
        ones = self.matrix[self.members(v)].sum(axis=0)
        table: np.ndarray = ones == size
        split = np.flatnonzero((ones > 0) & (ones < size))
        if split.size == 0:
            return table
        if size >= 3 and self.isolating(v):
            # One side is a single row (Ldim 0), the other has >= 2 rows (Ldim 1 = Ldim(G)).
            table[split] = 2 * ones[split] > size
            return table
        by_split: dict[int, bool] = {}
        for x in split.tolist():
            col = self.columns[x]
            one = v & col
            value = by_split.get(one)
            if value is None:
                value = by_split[one] = bool(soa_choice(*self.bits.compare_sides(v, col), 1))
            table[x] = value
        return table

    def isolating(self, v: int) -> bool:
        """Does every split of ``v`` separate a single row from the rest (a class of point functions)?"""
        size = v.bit_count()
        cached = self._isolating.get(v)
        if cached is None:
            cached = True
            for _, col in self._distinct:
                ones = (v & col).bit_count()
                if 1 < ones < size - 1:
                    cached = False
                    break
            if len(self._isolating) > 65_536:
                self._isolating.clear()
            self._isolating[v] = cached
        return cached

    def _splits(self, v: int) -> list[tuple[int, int, int]]:
        """``(x, G|(x,1), G|(x,0))`` for one point per distinct split of ``v``; most balanced first.

        Ties are broken by the point index, so the order is canonical.
        """
        cached = self._splits_cache.get(v)
        if cached is not None:
            return cached
        seen: set[int] = set()
        out = []
        for x, col in self._distinct:
            one = v & col
            if one == 0 or one == v:
                continue
            zero = v ^ one
            key = min(one, zero)
            if key in seen:
                continue
            seen.add(key)
            out.append((x, one, zero))
        out.sort(key=lambda s: (-min(s[1].bit_count(), s[2].bit_count()), s[0]))
        if len(self._splits_cache) > 65_536:
            self._splits_cache.clear()
        self._splits_cache[v] = out
        return out

    # -- irreducibility ------------------------------------------------------------------------
    def order(self, v: int, cap: int | float | None = None) -> int | float:
        """``min(ord(G), cap)``: the irreducibility order of the subclass ``v`` (GGKM21 Def 4.1).

        ``cap`` may be astronomically large (``k'·2^t``); ``ord(G) <= |G| - 2`` bounds the work.
        """
        size = v.bit_count()
        if size <= 1:
            return INFINITE if cap is None else cap
        bound = size - 2  # ord(G) <= |G| - 2 since Ldim(G) >= 1 (module docstring)
        limit = bound if cap is None else min(bound, cap)
        if limit <= 0:
            return int(limit)
        return self._order_upto(v, int(limit), bound)

    def _order_upto(self, v: int, limit: int, bound: int) -> int:
        """``min(ord(v), limit)`` for ``0 <= limit <= bound = |v| - 2``."""
        if limit <= 0:
            return 0
        exact = self._order_exact.get(v)
        if exact is not None:
            return int(min(exact, limit))
        if self._order_lower.get(v, 0) >= limit:
            return limit
        if self.isolating(v):
            self._order_exact[v] = bound  # isolating class: ord = |G| - 2 exactly
            return min(bound, limit)
        splits = self._splits(v)
        full = self.ldim(v)
        best = limit
        for _, one, zero in splits:
            one_full = self.ldim(one, full) >= full
            zero_full = self.ldim(zero, full) >= full
            if not (one_full or zero_full):
                best = 0
                break
            if best <= 1:
                continue  # this x gives >= 1 >= best; keep scanning only for a 0
            side = one if one_full else zero
            side_bound = side.bit_count() - 2
            best = min(best, 1 + self._order_upto(side, min(best - 1, side_bound), side_bound))
        if best < limit or limit == bound:
            self._order_exact[v] = best
        else:
            self._order_lower[v] = max(self._order_lower.get(v, 0), limit)
        return best

    def is_irreducible(self, v: int, k: int) -> bool:
        """Is the subclass ``v`` k-irreducible (Def 4.1)? Every class is 0-irreducible."""
        if k <= 0:
            return True
        return self.order(v, k) >= k

    def witness(self, v: int, k: int) -> tuple[list[int], list[int]]:
        """Lemma 4.5: points ``x_1..x_k`` and diagonal bits of a reducing array satisfying (6).

        Precondition: ``G`` nonempty, (k-1)-irreducible and not k-irreducible (i.e. ``ord(G) = k-1``).
        Every cell ``G|(x_1,b^(j)_1),...`` is then nonempty with Ldim below ``Ldim(G)``. Iterative form
        of the paper's induction (GGKM21 Lemma 4.5): case 2 descends into the full-Ldim side that is
        not (remaining-1)-irreducible, case 1 (both sides lose Ldim) ends it and only happens last.
        """
        if k < 1 or self.order(v, k) != k - 1:
            raise ValueError(f"witness needs ord(G) = k - 1; got k = {k}, ord = {self.order(v)}")
        full = self.ldim(v)
        xs: list[int] = []
        diagonal: list[int] = []
        g = v
        for level in range(k):
            remaining = k - level
            for x, one, zero in self._splits(g):
                one_full = self.ldim(one, full) >= full
                zero_full = self.ldim(zero, full) >= full
                if not (one_full or zero_full):
                    # Erratum 6: with (remaining-1)-irreducibility this is reachable only at the end.
                    if not (remaining == 1):
                        raise InvariantError("Lemma 4.5 case 1 reached before the last level")
                    xs.append(x)
                    diagonal.append(1)
                    return xs, diagonal
                side, bit = (one, 1) if one_full else (zero, 0)
                if remaining >= 2 and not self.is_irreducible(side, remaining - 1):
                    xs.append(x)
                    diagonal.append(1 - bit)  # b^(1) = (-b1): the cell that loses Ldim
                    g = side
                    break
            else:
                raise AssertionError("no Lemma 4.5 witness: the order was wrong")  # unreachable
        raise AssertionError("Lemma 4.5 witness did not terminate")  # unreachable


def lattice_of(hclass: HypothesisClass) -> ClassLattice:
    """The :class:`ClassLattice` of a class small enough for the matrix path (rows in canonical order).

    Raises :class:`~privstream.learning.errors.LearningInputError` beyond :data:`MAX_ROWS` rows or
    :data:`MAX_MATRIX_ENTRIES` truth-table entries: Ldim and irreducibility are exact searches
    over subclasses of the class as a matrix.
    """
    size, n = int(hclass.size), int(hclass.domain_size)
    if size > MAX_ROWS or size * n > MAX_MATRIX_ENTRIES:
        raise LearningInputError(
            f"{hclass.spec}: the proper learner needs the class as a matrix (exact Ldim and "
            f"irreducibility over subclasses); {size} x {n} exceeds the limit of {MAX_ROWS} rows and "
            f"{MAX_MATRIX_ENTRIES} entries. Use a smaller domain (e.g. thresholds:4095, points:2047, "
            f"intervals:90) or the generic learner"
        )
    return ClassLattice(hclass.matrix())
