"""A tree of counts over ordered cells, and its consistent non-negative estimate from noisy counts.

**Structure** (:class:`CountTree`). The cells (the leaves of a partition, in domain order; for a
labelled release the cells of label 0 then those of label 1) are grouped into a balanced b-ary
tree: consecutive runs of b cells form the next level, and so on up to one node; a labelled tree
has a level of two label nodes under its root. One example lies in exactly one cell, so it is
counted in exactly one node per level: a tree of ``h`` levels (root included) has ℓ1-sensitivity
``h`` under add/remove-one and ``2(h - 1)`` under replace-one when the root (n) is public and not
released (two paths move, the root does not).

**Branching.** Hay et al. (VLDB 2010) use binary trees; Qardaji, Yang, Li (VLDB 2013) show that b ≈ 16
minimises the range-query error of large 1-D trees. Over a few hundred cells an extra level costs
more than it saves, so the default (``branching=None``) balances the tree: k levels above the cells
with ``b = ceil(L^{1/k})``, k minimising ``k³·b`` (the noise variance grows with k², the nodes a
prefix needs with k·b). It gives b = 14 for 190 cells, 18 for 300 and 15 for 3000, the exact
worst-prefix variance being within a few percent of the best b in each case.

**Constrained inference** (:func:`least_squares`): the ordinary least-squares estimate of all node
counts from equal-variance noisy counts, subject to *children sum to their parent* (Hay et al.
2010, Thm 3). For a complete tree this is Hay's closed form (bottom up
``z[v] = (b^i - b^{i-1})/(b^i - 1)·ñ[v] + (b^{i-1} - 1)/(b^i - 1)·Σ z[children]``, top down
``n̄[v] = z[v] + (n̄[parent] - Σ_siblings z)/b``); for the balanced but incomplete trees here the
same two passes run with inverse-variance weights: bottom up ``z[v]`` combines ``ñ[v]`` and the
children's sum by their variances, top down the parent's surplus is shared in proportion to the
children's variances. A public root (n) enters as a measurement of variance 0.

**Non-negativity** (:func:`nonnegative`): top down, each parent's children are replaced by the
Euclidean projection of their estimates onto ``{z >= 0, Σ z = parent}`` (shift by a common τ, clip at
0), which keeps every parent equal to the sum of its children. All of this is post-processing.

>>> tree = CountTree.balanced(4, branching=2)
>>> tree.levels, tree.sizes
(3, [4, 2, 1])
>>> [v.tolist() for v in tree.aggregate(np.array([1.0, 2.0, 3.0, 4.0]))]
[[1.0, 2.0, 3.0, 4.0], [3.0, 7.0], [10.0]]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privstream.learning.errors import InvariantError

__all__ = ["CountTree", "balanced_branching", "least_squares", "nonnegative"]


def balanced_branching(cells: int) -> int:
    """The b of the balanced tree over ``cells`` (see the module docstring).

    >>> [balanced_branching(L) for L in (1, 40, 190, 300, 3000)]
    [2, 40, 14, 18, 15]
    """
    if cells <= 2:
        return 2
    best: tuple[int, int] | None = None
    for k in range(1, max(2, cells.bit_length()) + 1):
        b = max(2, math.ceil(cells ** (1 / k) - 1e-9))
        while (b - 1) ** k >= cells and b > 2:  # float roots: the least b with b^k >= cells
            b -= 1
        while b**k < cells:
            b += 1
        score = k**3 * b
        if best is None or score < best[0]:
            best = (score, b)
    if best is None:
        raise InvariantError("invariant broken: best is not None")
    return best[1]


def _groups(size: int, branching: int) -> list[np.ndarray]:
    """Boundaries of consecutive runs of ``branching`` nodes, level by level up to one node."""
    out = []
    while size > 1:
        parents = -(-size // branching)
        out.append(np.minimum(np.arange(parents + 1) * branching, size))
        size = parents
    return out


@dataclass(frozen=True)
class CountTree:
    """Levels bottom up: ``bounds[l]`` cuts level l's nodes into the runs that are level l+1's nodes."""

    bounds: tuple[np.ndarray, ...]
    sizes: list[int]

    @classmethod
    def balanced(cls, cells: int, branching: int | None = None, labelled: bool = False) -> CountTree:
        """The tree over ``cells`` ordered cells (per label when ``labelled``: 2·cells in all)."""
        if cells < 1:
            raise ValueError(f"a count tree needs at least one cell, got {cells}")
        b = balanced_branching(cells) if branching is None else branching
        if isinstance(b, bool) or not isinstance(b, int) or b < 2:
            raise ValueError(f"branching must be an int >= 2, got {branching!r}")
        bounds = _groups(cells, b)
        if labelled:  # the same tree under each label, then a root over the two label nodes
            bounds = [np.concatenate([g, g[1:] + g[-1]]) for g in bounds] + [np.array([0, 2])]
        sizes = [cells * (2 if labelled else 1)] + [len(g) - 1 for g in bounds]
        return cls(tuple(bounds), sizes)

    @property
    def levels(self) -> int:
        """Number of levels ``h``, the cells and the root included."""
        return len(self.sizes)

    def aggregate(self, cells: np.ndarray) -> list[np.ndarray]:
        """The count of every node, level by level from the cells up to the root."""
        out = [np.asarray(cells, dtype=np.float64)]
        for g in self.bounds:
            out.append(np.add.reduceat(out[-1], g[:-1]))
        return out

    def parents(self, level: int) -> np.ndarray:
        """For each node of ``level`` (< root), the index of its parent in level + 1."""
        g = self.bounds[level]
        return np.repeat(np.arange(len(g) - 1), np.diff(g))


def least_squares(tree: CountTree, noisy: list[np.ndarray], root: float | None = None) -> list[np.ndarray]:
    """Consistent OLS estimates of every node from equal-variance ``noisy`` counts (bottom up).

    ``noisy`` has one array per level; with ``root`` given (a public total) the root's noisy count
    is ignored and the root is fixed to ``root``.
    """
    h = tree.levels
    z = [np.asarray(noisy[0], dtype=np.float64)]
    var = [np.ones_like(z[0])]  # in units of the common noise variance
    for level in range(1, h):
        starts = tree.bounds[level - 1][:-1]
        child_sum = np.add.reduceat(z[-1], starts)
        child_var = np.add.reduceat(var[-1], starts)
        if level == h - 1 and root is not None:
            z.append(np.array([float(root)]))
            var.append(np.zeros(1))
            continue
        weight = child_var / (child_var + 1.0)  # on the node's own measurement
        z.append(weight * np.asarray(noisy[level], dtype=np.float64) + (1 - weight) * child_sum)
        var.append(child_var / (child_var + 1.0))
    est: list[np.ndarray] = [np.empty(0)] * h
    est[-1] = z[-1]
    for level in range(h - 2, -1, -1):
        starts = tree.bounds[level][:-1]
        parent = tree.parents(level)
        surplus = est[level + 1] - np.add.reduceat(z[level], starts)
        share = var[level] / np.add.reduceat(var[level], starts)[parent]
        est[level] = z[level] + share * surplus[parent]
    return est


def _simplex(values: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of ``values`` onto ``{z >= 0, Σ z = total}`` (``total >= 0``)."""
    if total <= 0:
        return np.zeros_like(values)
    u = np.sort(values)[::-1]
    css = np.cumsum(u) - total
    k = np.arange(1, u.shape[0] + 1)
    r = int(np.nonzero(u - css / k > 0)[0][-1])
    tau = css[r] / (r + 1)
    projected: np.ndarray = np.maximum(values - tau, 0.0)
    return projected


def nonnegative(tree: CountTree, estimates: list[np.ndarray]) -> list[np.ndarray]:
    """Non-negative estimates with every parent equal to the sum of its children (top down)."""
    out: list[np.ndarray] = [np.empty(0)] * tree.levels
    out[-1] = np.maximum(estimates[-1], 0.0)
    for level in range(tree.levels - 2, -1, -1):
        g = tree.bounds[level]
        values = np.empty(tree.sizes[level])
        for j in range(len(g) - 1):
            values[g[j] : g[j + 1]] = _simplex(estimates[level][g[j] : g[j + 1]], float(out[level + 1][j]))
        out[level] = values
    return out
