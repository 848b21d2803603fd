"""Exact dimensions of finite classes by search over bitset version spaces.

Hypotheses are bit positions; a version space is a Python ``int`` bitmask over them, and a
domain point is the mask of hypotheses labelling it 1 (its *column*). Restricting ``V`` to
``(x, 1)`` is ``V & col[x]``; to ``(x, 0)`` it is ``V & ~col[x]``. Python ints make those
operations a few machine words per 64 hypotheses.

Littlestone dimension (the recursion of blm_almm.md §1.2, memoised on the mask)::

    Ldim(0) = -1;  Ldim(V) = 0 if |V| = 1;
    Ldim(V) = max over splitting x of 1 + min(Ldim(V & col[x]), Ldim(V & ~col[x]))

with pruning: ``Ldim(V) <= floor(log2 |V|)`` (stop when reached), splits tried from the most
balanced down and abandoned once ``1 + floor(log2(smaller side)) <= best``, the smaller side
evaluated first, the larger side only up to the cap it can matter for, and columns that
induce the same split of ``V`` evaluated once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privstream.learning.errors import TooExpensiveError


def columns_from_matrix(matrix: np.ndarray) -> list[int]:
    """Column bitmasks of a ``|H| x |X|`` boolean matrix (bit i = row i)."""
    packed = np.packbits(np.ascontiguousarray(matrix.T, dtype=bool), axis=1, bitorder="little")
    return [int.from_bytes(row.tobytes(), "little") for row in packed]


class BitsetClass:
    """A finite class as column bitmasks, with memoised exact Ldim of any version space."""

    def __init__(self, columns: Sequence[int], num_hypotheses: int) -> None:
        self.num_hypotheses = num_hypotheses
        self.full = (1 << num_hypotheses) - 1
        self.columns = list(columns)
        # Constant columns never split anything; duplicate columns split identically.
        self.split_columns = sorted({c for c in self.columns if 0 < c < self.full})
        self._exact: dict[int, int] = {}
        self._lower: dict[int, int] = {}

    # -- Littlestone dimension ------------------------------------------------------------------
    def ldim(self, v: int, cap: int | None = None) -> int:
        """``Ldim(V)``, or any value ``>= cap`` if ``Ldim(V) >= cap`` (cheaper when capped)."""
        if v & (v - 1) == 0:
            return 0 if v else -1
        exact = self._exact.get(v)
        if exact is not None:
            return exact
        if cap is not None and self._lower.get(v, -1) >= cap:
            return self._lower[v]
        upper = v.bit_count().bit_length() - 1
        best = max(1, self._lower.get(v, 1))  # >= 2 distinct functions: some x splits them
        if best < upper and (cap is None or best < cap):
            for small_size, small, large in self._splits(v):
                if (small_size.bit_length() - 1) + 1 <= best:
                    break  # sorted by balance: no later split can beat best
                # The candidate is at most min(upper, cap), so each side matters only up to that - 1.
                ls = self.ldim(small, (upper if cap is None else min(upper, cap)) - 1)
                if 1 + ls <= best:
                    continue
                ll = self.ldim(large, ls)  # min(ls, ll) needs the larger side only up to ls
                best = max(best, 1 + min(ls, ll))
                if best >= upper or (cap is not None and best >= cap):
                    break
        if best >= upper or cap is None or best < cap:
            self._exact[v] = best
        else:
            self._lower[v] = best
        return best

    def _splits(self, v: int) -> list[tuple[int, int, int]]:
        seen: set[int] = set()
        out = []
        for col in self.split_columns:
            a = v & col
            if a == 0 or a == v:
                continue
            b = v ^ a
            key = min(a, b)
            if key in seen:
                continue
            seen.add(key)
            pa, pb = a.bit_count(), b.bit_count()
            out.append((pa, a, b) if pa <= pb else (pb, b, a))
        out.sort(key=lambda t: t[0], reverse=True)
        return out

    def compare_sides(self, v: int, col: int) -> tuple[int, int]:
        """``(Ldim(V & col), Ldim(V & ~col))`` up to the larger one being capped at smaller + 1.

        Enough to decide the SOA's argmax exactly.
        """
        one, zero = v & col, v & ~col
        if one.bit_count() <= zero.bit_count():
            l1 = self.ldim(one)
            return l1, self.ldim(zero, l1 + 1)
        l0 = self.ldim(zero)
        return self.ldim(one, l0 + 1), l0

    def witness_tree(self, v: int | None = None) -> dict | None:
        """A shattered mistake tree of depth ``Ldim(V)``: ``{"x", "0", "1"}`` nodes, None leaves."""
        v = self.full if v is None else v
        d = self.ldim(v)
        if d <= 0:
            return None
        for x, col in enumerate(self.columns):
            one, zero = v & col, v & ~col
            if one and zero and self.ldim(one, d - 1) >= d - 1 and self.ldim(zero, d - 1) >= d - 1:
                return {"x": x, "0": self._subtree(zero, d - 1), "1": self._subtree(one, d - 1)}
        raise AssertionError("no splitting point realises the Ldim")  # pragma: no cover

    def _subtree(self, v: int, depth: int) -> dict | None:
        if depth == 0:
            return None
        for x, col in enumerate(self.columns):
            one, zero = v & col, v & ~col
            if self.ldim(one, depth - 1) >= depth - 1 and self.ldim(zero, depth - 1) >= depth - 1:
                return {"x": x, "0": self._subtree(zero, depth - 1), "1": self._subtree(one, depth - 1)}
        raise AssertionError("subtree not found")  # pragma: no cover

    # -- VC dimension ---------------------------------------------------------------------------
    def vc(self, max_work: int = 10**7) -> int:
        """Largest shattered set, grown level by level (shattered sets are downward closed).

        A shattered set is kept as its ``2^k`` cells (masks of hypotheses per label pattern);
        adding x splits every cell by ``col[x]``, and all halves must be nonempty.
        """
        cols = self.split_columns
        if self.full == 0:
            return 0
        level: list[tuple[int, list[int]]] = [(-1, [self.full])]  # (last index, cells)
        dim, work = 0, 0
        while level:
            nxt = []
            for last, cells in level:
                for j in range(last + 1, len(cols)):
                    c = cols[j]
                    work += len(cells)
                    if work > max_work:
                        raise TooExpensiveError(
                            f"VC dimension search exceeded {max_work} cell operations")
                    new = []
                    for cell in cells:
                        a = cell & c
                        if a == 0 or a == cell:
                            break
                        new.append(a)
                        new.append(cell ^ a)
                    else:
                        nxt.append((j, new))
            if nxt:
                dim += 1
            level = nxt
        return dim

    # -- threshold dimension --------------------------------------------------------------------
    def threshold_dim(self, max_nodes: int = 2 * 10**5) -> int:
        """Largest k with points ``x_1..x_k`` and ``h_1..h_k``, ``h_i(x_j) = 1 iff i <= j``.

        Depth-first over point sequences. After choosing ``x_1..x_m`` we keep the sets
        ``S_i = {h : 0 on x_1..x_{i-1}, 1 on x_i..x_m}`` (all must be nonempty) and ``Z``, the
        hypotheses 0 on all chosen points; choosing ``x_{m+1}`` intersects every ``S_i`` with
        ``col`` and adds ``S_{m+1} = Z & col``. Bounded by the number of distinct columns and by
        ``Tdim < 2^(Ldim+1)`` (blm_almm.md §1.5: ``Ldim >= floor(log2 Tdim)``).
        """
        cols = self.split_columns
        if self.full == 0:
            return 0
        best = 1 if any(self.columns) else 0
        bound = min(len(cols), (1 << (self.ldim(self.full) + 1)) - 1)
        nodes = 0

        def dfs(sets: list[int], zero: int, used: frozenset[int]) -> None:
            nonlocal best, nodes
            if best >= bound:
                return
            m = len(sets)
            if m + (len(cols) - len(used)) <= best:
                return
            for j, c in enumerate(cols):
                if j in used:
                    continue
                new_last = zero & c
                if not new_last:
                    continue
                new_sets = [s & c for s in sets]
                if not all(new_sets):
                    continue
                nodes += 1
                if nodes > max_nodes:
                    raise TooExpensiveError(f"threshold-dimension search exceeded {max_nodes} nodes")
                new_sets.append(new_last)
                best = max(best, m + 1)
                dfs(new_sets, zero & ~c, used | {j})
                if best >= bound:
                    return

        dfs([], self.full, frozenset())
        return best
