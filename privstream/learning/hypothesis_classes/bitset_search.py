"""Exact dimensions of finite classes by search over bitset version spaces.

Hypotheses are bit positions; a version space is a Python ``int`` bitmask over them, and a
domain point is the mask of hypotheses labelling it 1 (its *column*). Restricting ``V`` to
``(x, 1)`` is ``V & col[x]``; to ``(x, 0)`` it is ``V & ~col[x]``. Python ints make those
operations a few machine words per 64 hypotheses.

Littlestone dimension (the recursion of BLM20 Sec 3.2, memoised on the mask)::

    Ldim(0) = -1;  Ldim(V) = 0 if |V| = 1;
    Ldim(V) = max over splitting x of 1 + min(Ldim(V & col[x]), Ldim(V & ~col[x]))

with pruning: ``Ldim(V) <= floor(log2 |V|)`` (stop when reached), splits tried from the most
balanced down and abandoned once ``1 + floor(log2(smaller side)) <= best``, the smaller side
evaluated first, the larger side only up to the cap it can matter for, and columns that
induce the same split of ``V`` evaluated once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

import numpy as np

from privstream.learning.errors import TooExpensiveError

#: A node of a mistake tree: the point asked and the subtrees after each label (None: a leaf).
MistakeTree = TypedDict("MistakeTree", {"x": int, "0": "MistakeTree | None", "1": "MistakeTree | None"})


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

    def witness_tree(self, v: int | None = None) -> MistakeTree | None:
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

    def _subtree(self, v: int, depth: int) -> MistakeTree | None:
        if depth == 0:
            return None
        for x, col in enumerate(self.columns):
            one, zero = v & col, v & ~col
            if self.ldim(one, depth - 1) >= depth - 1 and self.ldim(zero, depth - 1) >= depth - 1:
                return {"x": x, "0": self._subtree(zero, depth - 1), "1": self._subtree(one, depth - 1)}
        raise AssertionError("subtree not found")  # pragma: no cover

    # -- VC dimension ---------------------------------------------------------------------------
    def vc(self, max_work: int = 10**7) -> int:
        """Largest shattered set: for ``target = 1, 2, ...`` search for a shattered set of that size.

        A partial set of size j is kept as its ``2^j`` cells (hypothesis masks per label
        pattern); adding x splits every cell by ``col[x]``. Shattered sets are downward closed,
        so the first target with no shattered set ends the search, and a partial set of size j
        can only grow to ``target`` if every cell holds ``>= 2^(target - j)`` hypotheses
        (strong pruning near ``log2 |H|``). ``VC <= Ldim`` stops the search early.
        """
        cols = self.split_columns
        upper = min(self.ldim(self.full), len(cols)) if self.full else 0
        work = 0

        def exists(target: int, start: int, cells: list[int], size: int) -> bool:
            nonlocal work
            if size == target:
                return True
            need = 1 << (target - size - 1)  # each half of each cell must still hold this many
            for j in range(start, len(cols) - (target - size) + 1):
                c = cols[j]
                work += len(cells)
                if work > max_work:
                    raise TooExpensiveError(f"VC dimension search exceeded {max_work} cell operations")
                new = []
                for cell in cells:
                    a = cell & c
                    if a.bit_count() < need or (cell ^ a).bit_count() < need:
                        break
                    new.append(a)
                    new.append(cell ^ a)
                else:
                    if exists(target, j + 1, new, size + 1):
                        return True
            return False

        dim = 0
        while dim < upper and exists(dim + 1, 0, [self.full], 0):
            dim += 1
        return dim

    # -- threshold dimension --------------------------------------------------------------------
    def threshold_dim(self, max_nodes: int = 10**5, max_pairs: int = 20_000) -> int:
        """Largest k with points ``x_1..x_k`` and ``h_1..h_k``, ``h_i(x_j) = 1 iff i <= j``.

        A witness is a sequence of pairs ``p_i = (h_i, x_i)`` with ``h_i(x_i) = 1`` such that
        ``p_i -> p_j`` for all ``i < j``, where ``p -> q`` means ``h_p(x_q) = 1`` and
        ``h_q(x_p) = 0``. Depth-first search extends a chain by a pair that every chosen pair
        points to (candidates are intersected with successor bitmasks), so each chain is
        generated once, in its one valid order. Bounds: a chain's points are distinct, and
        ``Tdim < 2^(Ldim+1)`` (Shelah; Hodges; ABLMM22 Thm 10). Past ``max_nodes`` it raises
        :class:`TooExpensiveError` (random classes of a few hundred rows can get there).
        """
        nbytes = (self.num_hypotheses + 7) // 8
        m = np.stack(
            [
                np.unpackbits(
                    np.frombuffer(col.to_bytes(nbytes, "little"), dtype=np.uint8),
                    bitorder="little",
                    count=self.num_hypotheses,
                ).astype(bool)
                for col in self.columns
            ],
            axis=1,
        )
        m = np.unique(m, axis=1)  # equal columns are interchangeable
        hs, xs = np.nonzero(m)
        if hs.size == 0:
            return 0
        if hs.size > max_pairs:
            raise TooExpensiveError(
                f"threshold-dimension search needs {hs.size} (h, x) pairs (limit {max_pairs})"
            )
        fwd = m[hs][:, xs]  # fwd[p, q] = h_p(x_q)
        arrow = fwd & ~fwd.T  # p -> q
        succ = _bit_rows(arrow)
        x_masks = [0] * m.shape[1]  # the pairs at each point
        for p, x in enumerate(xs.tolist()):
            x_masks[x] |= 1 << p
        bound = min(m.shape[1], (1 << (self.ldim(self.full) + 1)) - 1)
        best, nodes = 1, 0

        def expand(cand: int, depth: int) -> None:
            nonlocal best, nodes
            # A chain has distinct points, so it can add at most this many pairs.
            if depth + sum(1 for xm in x_masks if cand & xm) <= best:
                return
            order = []
            c = cand
            while c:
                low = c & -c
                p = low.bit_length() - 1
                order.append(((succ[p] & cand).bit_count(), p))
                c ^= low
            order.sort(reverse=True)  # long chains first: good lower bounds early
            for _, p in order:
                nodes += 1
                if nodes > max_nodes:
                    raise TooExpensiveError(f"threshold-dimension search exceeded {max_nodes} nodes")
                best = max(best, depth + 1)
                if best >= bound:
                    return
                nxt = cand & succ[p]
                if nxt:
                    expand(nxt, depth + 1)

        expand((1 << len(succ)) - 1, 0)
        return best


def _bit_rows(matrix: np.ndarray) -> list[int]:
    """Each row of a boolean matrix as an int bitmask (bit j = column j)."""
    packed = np.packbits(matrix, axis=1, bitorder="little")
    return [int.from_bytes(r.tobytes(), "little") for r in packed]
