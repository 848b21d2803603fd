"""ReduceTree (GGKM Algorithm 1): the deterministic per-block step of the proper private learner.

GGKM21 Algorithm 1. On one block ``T`` of ``n0`` examples it grows a generalized tree (Def 4.4) whose
leaves' ancestor sets ``a(v)`` partition the class, refining the leaves whose low-error subclasses

    G(α, v) = F_{P̂_T, α} |_{a(v)} = {f in F : err_T(f) <= α, f consistent with a(v)}

are reducible, and returns

    Ŝ = { SOA_{G(α_t - 2α_Δ/3, v)} : v in L'_t, G(α_t - 2α_Δ/3, v) nonempty and k'-irreducible }   (16)

with ``α_t = (d + 3 - t)·α_Δ`` and ``k_t = k'·2^t`` for ``t in [d+1]`` (erratum 1). It is a
deterministic function of the block (no randomness; the learner's privacy comes from sparse
selection alone), total on every input (an unrealizable block may give ``Ŝ = ∅``), and makes
every tie-break in a canonical order.

**Exact levels.** Every level is a multiple of ``α_Δ/6``; ``err_T(f) <= q·α_Δ/6``
is decided on integer mistake counts, ``mistakes(f) <= floor(q·α_Δ·n0/6)``, with ``α_Δ`` a
:class:`~fractions.Fraction`, so no float boundary can flip between neighbouring datasets.

Invariants (proved in GGKM21; checked by the tests): the leaves partition F after every step
(eq. 17); ``ŵ*_{t+1} < ŵ*_t``; ``ht <= k'(2^{t+1} - 1)`` (Lemma 5.2); ``|Ŝ| <= Π_t (k_t + 1)``
(Lemma 5.5); every expansion satisfies (15); realizable blocks give ``Ŝ ≠ ∅`` (Lemma 5.1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from privstream.learning.private_learners.proper.irreducibility import ClassLattice, reducing_cells

__all__ = ["Expansion", "Node", "ReduceTreeResult", "reduce_tree", "row_mistakes", "selection_bound"]


@dataclass
class Node:
    """A node of the generalized tree: its ancestor set ``a(v)``, the rows consistent with it, its height."""

    ancestors: tuple[tuple[int, int], ...]
    rows: int  # bitmask of F|_{a(v)}
    height: int
    label: tuple[int, ...] | None = None  # (x(v)_1, ..., x(v)_{k_v}) once expanded
    children: list[int] = field(default_factory=list)
    edges: list[tuple[int, ...]] = field(default_factory=list)  # b^(j) of the reducing array


@dataclass(frozen=True)
class Expansion:
    """One step 6(d)iii: node ``node`` at iteration ``t`` split by the Lemma 4.5 witness of ``subclass``."""

    t: int
    node: int
    subclass: int  # G(α_t - α_Δ, v)
    k_v: int
    points: tuple[int, ...]
    diagonal: tuple[int, ...]


@dataclass(frozen=True)
class ReduceTreeResult:
    """Output of :func:`reduce_tree`: ``s_hat`` maps a packed truth table to the SOA table (bool)."""

    s_hat: dict[bytes, np.ndarray]
    t_final: int
    w_star: tuple[int, ...]  # ŵ*_1, ŵ*_2, ... as computed (the last one at t_final + 1)
    nodes: tuple[Node, ...]
    leaves_prime: tuple[int, ...]  # L̂'_{t_final+1}
    expansions: tuple[Expansion, ...]
    snapshots: tuple[tuple[int, ...], ...]  # the leaves after each executed iteration
    ldim: int


def row_mistakes(matrix: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """``n·err_T(f)`` for every row ``f`` of a boolean ``|F| x N`` matrix (int64 vector)."""
    n_dom = matrix.shape[1]
    ones = np.bincount(xs[ys.astype(bool)], minlength=n_dom).astype(np.int64)
    zeros = np.bincount(xs[~ys.astype(bool)], minlength=n_dom).astype(np.int64)
    m = matrix.astype(np.int64, copy=False)
    return int(ones.sum()) - m @ ones + m @ zeros


def selection_bound(k_prime: int, d: int, class_size: int | None = None) -> int:
    """ℓ: the public bound on |Ŝ|: ``Π_{t=1}^{d} (k'·2^t + 1)`` (Lemma 5.5, Claim 5.8), and ``|F|``.

    The second bound (ours): Ŝ holds one SOA per leaf of L' with a nonempty class
    ``G(α, v) ⊂ F|_{a(v)}``, and the leaves' ancestor restrictions partition F (eq. 17), so those
    classes are disjoint nonempty subsets of F: at most |F| of them.

    >>> selection_bound(1, 3), selection_bound(1, 3, class_size=9)
    (135, 9)
    """
    out = 1
    for t in range(1, d + 1):
        out *= k_prime * 2**t + 1
    return out if class_size is None else min(out, max(1, int(class_size)))


def reduce_tree(
    lattice: ClassLattice,
    mistakes: np.ndarray,
    n0: int,
    k_prime: int,
    alpha_delta: Fraction,
    d: int | None = None,
) -> ReduceTreeResult:
    """Algorithm 1 on one block given its per-row mistake counts (see the module docstring).

    ``d = Ldim(F)`` may be passed to skip recomputing it.
    """
    if k_prime < 1:
        raise ValueError(f"k' must be >= 1, got {k_prime}")
    if alpha_delta <= 0:
        raise ValueError(f"alpha_delta must be > 0, got {alpha_delta}")
    d = lattice.ldim(lattice.full) if d is None else d
    mist = np.asarray(mistakes, dtype=np.int64)
    low_cache: dict[int, int] = {}

    def low(sixths: int) -> int:
        """Rows with ``err_T <= sixths·α_Δ/6`` (exact integer comparison)."""
        bound = (Fraction(sixths, 6) * alpha_delta * n0).__floor__()
        mask = low_cache.get(bound)
        if mask is None:
            mask = low_cache[bound] = lattice.mask(mist <= bound)
        return mask

    def alpha6(t: int) -> int:  # α_t in units of α_Δ/6
        return 6 * (d + 3 - t)

    def k(t: int) -> int:
        return k_prime << t  # k' · 2^t

    nodes = [Node(ancestors=(), rows=lattice.full, height=0)]
    leaves = [0]
    w_star: list[int] = []
    expansions: list[Expansion] = []
    snapshots: list[tuple[int, ...]] = [tuple(leaves)]

    def level(t: int) -> tuple[int, list[int], dict[int, int]]:
        """ŵ*_t, L̂'_t and each leaf's Ldim(G(α_t, v)) (step 6(b))."""
        top = low(alpha6(t))
        w = {v: lattice.ldim(top & nodes[v].rows) for v in leaves}
        best = max(w.values())
        return best, [v for v in leaves if w[v] == best], w

    t_final = d
    for t in range(1, d + 1):
        best, prime, w = level(t)
        w_star.append(best)
        reduced = low(alpha6(t) - 6)
        # 6(c): stop when some leaf's slightly-lower-error class keeps its Ldim and is k_t-irreducible.
        if any(
            lattice.ldim(reduced & nodes[v].rows) == w[v]
            and lattice.is_irreducible(reduced & nodes[v].rows, k(t))
            for v in prime
        ):
            t_final = t - 1
            break
        for v in prime:  # 6(d)
            g = reduced & nodes[v].rows
            if lattice.ldim(g) < w[v]:
                continue
            k_v = int(lattice.order(g, k(t))) + 1  # <= k_t: g is not k_t-irreducible here
            xs, diagonal = lattice.witness(g, k_v)
            node = nodes[v]
            node.label = tuple(xs)
            for cell in reducing_cells(xs, diagonal):
                child = Node(
                    ancestors=node.ancestors + tuple(cell),
                    rows=lattice.restrict(node.rows, cell),
                    height=node.height + k_v,
                )
                node.children.append(len(nodes))
                node.edges.append(tuple(b for _, b in cell))
                nodes.append(child)
            expansions.append(Expansion(t, v, g, k_v, tuple(xs), tuple(diagonal)))
        leaves = [i for i, nd in enumerate(nodes) if nd.label is None]
        snapshots.append(tuple(leaves))
    t = t_final + 1  # step 7
    best, prime, _ = level(t)
    if len(w_star) < t:
        w_star.append(best)
    final = low(alpha6(t) - 4)  # α_t - 2α_Δ/3
    s_hat: dict[bytes, np.ndarray] = {}
    for v in prime:  # step 8, eq. (16)
        g = final & nodes[v].rows
        if g and lattice.is_irreducible(g, k_prime):
            table = lattice.soa(g)
            s_hat.setdefault(np.packbits(table).tobytes(), table)
    return ReduceTreeResult(
        s_hat=dict(sorted(s_hat.items())),
        t_final=t_final,
        w_star=tuple(w_star),
        nodes=tuple(nodes),
        leaves_prime=tuple(prime),
        expansions=tuple(expansions),
        snapshots=tuple(snapshots),
        ldim=d,
    )
