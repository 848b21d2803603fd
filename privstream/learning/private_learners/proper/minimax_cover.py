"""A small proper cover of a classifier (GGKM Lemmas 6.1-6.2): rows of F close to f̂ under every P.

GGKM21 Lemmas 6.1-6.2, made concrete for a finite domain (ours). Solve the zero-sum game

    v* = min_{D in Δ(F)} max_{x in X} Pr_{h~D}[h(x) != f̂(x)]

as a linear program and return ``H = supp(D)`` of the (vertex) solution. For every distribution
P on X, ``E_{h~D} Pr_P[h != f̂] <= v*``, so ``min_{h in H} Pr_P[h != f̂] <= v*`` (the sup over P of
a linear functional is attained at point masses). This is a deterministic alternative
to sampling ``⌈C_0 d*/α²⌉`` rows from D: it gives the bound ``v*`` instead of ``v* + α`` and
``|H| <= |X| + 1``. Lemma 6.1 bounds ``v* <= α`` when ``f̂ = SOA_G`` with G
``⌈C_0 d/α²⌉``-irreducible.

H depends only on f̂ (and F), never on data: it is post-processing of a private output. If
``f̂ in F`` the cover is ``{f̂}`` with ``v* = 0`` (no LP). The LP uses ``scipy.optimize.linprog``
(HiGHS, deterministic); without scipy the cover falls back to all of F (still proper and
post-processing, only the later selection has more candidates).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

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
from privstream.learning.private_learners.proper.structured_selection import coordinates

__all__ = ["Cover", "aligned_candidates", "minimax_cover", "structured_cover"]

_SUPPORT_TOL = 1e-9
_MAX_CANDIDATE_POINTS = 4096


@dataclass(frozen=True)
class Cover:
    """Row indices ``rows`` of F (sorted, distinct) and the game value ``value`` (= max_x mixture error)."""

    rows: tuple[int, ...]
    value: float
    solver: str


def minimax_cover(matrix: np.ndarray, f_hat: np.ndarray) -> Cover:
    """The cover of the boolean table ``f_hat`` by rows of the boolean ``|F| x N`` ``matrix``."""
    m = np.asarray(matrix, dtype=bool)
    f = np.asarray(f_hat, dtype=bool)
    equal = np.flatnonzero((m == f[None, :]).all(axis=1))
    if equal.size:
        return Cover((int(equal[0]),), 0.0, "member")
    disagree = m != f[None, :]  # |F| x N
    # Points with the same disagreement column give the same constraint.
    cols = np.unique(disagree.T, axis=0).astype(float)  # constraints x rows
    try:
        from scipy.optimize import linprog
    except ImportError:  # pragma: no cover - scipy is installed in the project environment
        worst = float(disagree.mean(axis=0).max())
        return Cover(tuple(range(m.shape[0])), worst, "all-rows")
    k, rows = cols.shape[0], m.shape[0]
    c = np.zeros(rows + 1)
    c[-1] = 1.0  # minimise v
    a_ub = np.hstack([cols, -np.ones((k, 1))])
    a_eq = np.hstack([np.ones((1, rows)), np.zeros((1, 1))])
    res = linprog(
        c,
        A_ub=a_ub,
        b_ub=np.zeros(k),
        A_eq=a_eq,
        b_eq=[1.0],
        bounds=[(0, None)] * rows + [(0, 1)],
        method="highs",
    )
    if res.status != 0:  # pragma: no cover - the LP is always feasible and bounded
        raise RuntimeError(f"minimax cover LP failed: {res.message}")
    weights = res.x[:rows]
    support = np.flatnonzero(weights > _SUPPORT_TOL)
    # The exact value of the support's uniform mixture is not what matters; report the LP value.
    return Cover(tuple(int(r) for r in support), float(res.x[-1]), "highs")


def aligned_candidates(hclass: HypothesisClass, f_hat: Hypothesis) -> list[Hypothesis]:
    """Members of thresholds, points or intervals that lose nothing in the cover of ``f_hat``.

    Every member h has a candidate c with ``{c != f̂} ⊂ {h != f̂}`` (so any mixture can move its mass
    to candidates without raising its error anywhere):

    * points: ``δ_y`` with ``f̂(y) = 0`` errs wherever the all-zero function does and at y, and the
      all-zero function errs on every one of f̂ where ``δ_x`` (x a one of f̂) errs on all but x: the
      ``δ_x`` and the zero function suffice;
    * intervals (and thresholds): moving an end point inside a run of f̂ to the run's boundary
      (outwards in a 1-run, inwards in a 0-run) never adds an error: intervals whose ends are change
      points of f̂ (or 0, N) suffice, and the empty one.
    """
    n = hclass.domain_size
    changes = f_hat.change_points()[1]
    edges = sorted({0, n, *changes})
    if isinstance(hclass, Points):
        ones = [x for a, b in itertools.pairwise(edges) if f_hat.predict(a) for x in range(a, b)]
        candidates = [point_hypothesis(n, x) for x in ones[:_MAX_CANDIDATE_POINTS]]
        candidates.append(point_hypothesis(n, None))
        return candidates
    if isinstance(hclass, Intervals):
        return [interval_hypothesis(n, 0, 0)] + [
            interval_hypothesis(n, a, b) for i, a in enumerate(edges) for b in edges[i + 1 :]
        ]
    if isinstance(hclass, Thresholds):
        return [threshold_hypothesis(n, t) for t in edges]
    raise TypeError(f"{hclass.spec}: structured covers exist for thresholds, points and intervals only")


def structured_cover(hclass: HypothesisClass, f_hat: Hypothesis) -> tuple[tuple[Hypothesis, ...], float]:
    """The cover of ``f_hat`` by members of thresholds, points or intervals of any size: (members, v*).

    A member is its own cover. Otherwise :func:`minimax_cover` runs on the :func:`aligned_candidates`
    only, whose change points are all f̂'s (points: its ones), so the LP has one constraint per run of
    f̂; by the dominance of the candidates its optimum is the minimax value over the whole class.
    Depends on f̂ only (post-processing).
    """
    if coordinates(hclass, f_hat) is not None:
        return (f_hat,), 0.0
    candidates = aligned_candidates(hclass, f_hat)
    cells = sorted({0}.union(*(h.change_points()[1] for h in candidates), f_hat.change_points()[1]))
    grid = np.array(cells, dtype=np.int64)
    matrix = np.stack([h.predict(grid).astype(bool) for h in candidates])
    cover = minimax_cover(matrix, f_hat.predict(grid).astype(bool))
    return tuple(candidates[r] for r in cover.rows), cover.value
