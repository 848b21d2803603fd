"""Normals fitted to the data privately: features chosen, then a direction, then a cone of normals around it.

In high dimension a public net of a few thousand normals holds no normal close to a good one
(in d = 64 random unit vectors are nearly orthogonal to any given direction). The learner
therefore spends part of its ε on *where to look*, in two ε-DP steps, and adds a cone of normals
around what they find to the candidates of its final exponential mechanism:

1. **Features** (:func:`select_features`, ``ε_sel``; only when ``d > k``): feature ``t`` is scored
   by :func:`stump_scores`, the largest number of labelled rows a one-feature threshold rule
   ``1[u_t >= c]`` or ``1[u_t < c]`` classifies correctly, over every real ``c``. One row changes
   every rule's count by at most 1, so the score (a maximum of such counts) has sensitivity 1
   under replace-one and add/remove-one. ``k`` features are drawn one after another without
   replacement ("peeling"), each by the exponential mechanism at ``ε_sel/k`` with sensitivity 1
   (McSherry-Talwar 2007; [S Lemma 3.2]); sequential composition gives ``ε_sel``. Selection
   costs ``O(k log d / ε)`` rows where a noisy d-vector would cost ``O(d/ε)`` per coordinate.
2. **Direction** (:func:`private_direction`, ``ε_dir``): on the kept features, centred as
   ``v = u - ½ ∈ [-½, ½]^k`` and quantised per row to ``q = round(G·v)`` (``G`` =
   :data:`QUANTUM`, a fixed per-row map), the integer vector ``(Σ_{y=0} q, (G/2)·n_0, Σ_{y=1} q,
   (G/2)·n_1)`` over labelled rows gets discrete Laplace noise (exact sampler) of scale
   ``Δ/ε_dir``. A row adds ``(q, G/2)`` to its label's block: ℓ1 at most ``(k + 1)·G/2``, so
   ``Δ = (k + 1)·G/2`` under add/remove-one and ``(k + 1)·G`` under replace-one (one block loses
   a row, one gains one). The direction is the difference of the two noisy class means, the
   normal of the classic mean-difference classifier (post-processing).
3. **Cone** (:func:`fitted_normals`, post-processing): the direction and ``K - 1`` normalised
   ``w + s_i·g_i`` for pseudo-random unit vectors ``g_i`` of the kept features' subspace (a fixed
   public seed) at geometric scales ``s_i`` from 0.05 to 2, embedded in ``R^d`` with zeros on the
   other features. They are a function of the two DP outputs and public constants.

Everything here is pure ε-DP with exact samplers; what is published of it is only through the
learner's final choice (:mod:`.learner`), which is sequentially composed with it.

>>> from privstream.learning.randomness import seeded
>>> U = np.array([[0.1, 0.9], [0.2, 0.8], [0.8, 0.1], [0.9, 0.3]]); y = np.array([0, 0, 1, 1])
>>> stump_scores(U, y).tolist()
[4, 4]
>>> w = private_direction(U, y, 50.0, "add-remove-one", seeded(0)); bool(w[0] > 0 > w[1])
True
>>> fitted_normals(w, np.array([0, 2]), 3, 5).shape
(5, 3)
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from privstream.learning.mechanisms import DiscreteLaplaceMechanism, ExponentialMechanism
from privstream.learning.private_learners.base import NeighbouringRelation
from privstream.learning.randomness import RandomSource

__all__ = [
    "CONE_SEED",
    "QUANTUM",
    "direction_sensitivity",
    "fitted_normals",
    "private_direction",
    "private_fit",
    "select_features",
    "stump_scores",
]

#: Per-row quantisation of the centred features in the direction step (q = round(G·v)).
QUANTUM = 16
#: The public seed of the cone's pseudo-random perturbations (part of the candidates' definition).
CONE_SEED = 20261128
#: Range of the cone's perturbation scales (0.05: within ~3°; 2: up to ~63° from the direction).
CONE_SCALES = (0.05, 2.0)


def stump_scores(U: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per feature: the most labelled rows any rule ``1[u_t >= c]`` or ``1[u_t < c]`` gets right (ints).

    ``U`` holds labelled rows only, ``y`` their 0/1 labels. The cut ``c`` ranges over all reals,
    so the rule family is fixed in advance; only cuts between distinct values matter.

    >>> stump_scores(np.array([[0.5], [0.5], [0.7]]), np.array([0, 1, 1])).tolist()
    [2]
    """
    n, d = U.shape
    out = np.empty(d, dtype=np.int64)
    if n == 0:
        out[:] = 0
        return out
    ones = int(np.count_nonzero(y))
    for t in range(d):
        order = np.argsort(U[:, t], kind="stable")
        values, labels = U[order, t], y[order].astype(np.int64)
        # cuts between distinct values: after position i where values[i] < values[i + 1], and the ends
        last_of_run = np.flatnonzero(np.diff(values) > 0)
        ones_below = np.concatenate(([0], np.cumsum(labels)[last_of_run], [ones]))
        below = np.concatenate(([0], last_of_run + 1, [n]))
        correct = (below - ones_below) + (ones - ones_below)  # zeros below the cut + ones above it
        out[t] = max(int(correct.max()), int((n - correct).max()))
    return out


def select_features(U: np.ndarray, y: np.ndarray, k: int, epsilon: Fraction, rng: RandomSource) -> np.ndarray:
    """``k`` feature indices (sorted), drawn by ``k`` exponential mechanisms at ``epsilon/k`` each.

    ``U``/``y``: the labelled rows. Each draw picks among the features not drawn yet with
    probability ∝ ``exp(ε/(2k)·score)`` (:func:`stump_scores`, sensitivity 1): ``epsilon``-DP.
    """
    d = U.shape[1]
    if not 1 <= k <= d:
        raise ValueError(f"need 1 <= k <= d, got k={k}, d={d}")
    scores = [int(s) for s in stump_scores(U, y)]
    remaining = list(range(d))
    chosen: list[int] = []
    mech = ExponentialMechanism(Fraction(epsilon) / k, 1, rng=rng)
    for _ in range(k):
        i = mech.select([scores[t] for t in remaining])
        chosen.append(remaining.pop(i))
    return np.array(sorted(chosen), dtype=np.int64)


def direction_sensitivity(k: int, relation: NeighbouringRelation) -> int:
    """ℓ1-sensitivity of the quantised class sums and counts on ``k`` features (see the module docstring).

    >>> direction_sensitivity(12, "replace-one"), direction_sensitivity(12, "add-remove-one")
    (208, 104)
    """
    per_row = (k + 1) * QUANTUM // 2
    return 2 * per_row if relation == "replace-one" else per_row


def private_direction(
    V: np.ndarray, y: np.ndarray, epsilon: Fraction | float, relation: NeighbouringRelation, rng: RandomSource
) -> np.ndarray:
    """The noisy class-mean difference (length k) of labelled unit-box rows ``V`` (``epsilon``-DP).

    Zero rows give pure noise, which is as private and as valid as any other output.
    """
    k = V.shape[1]
    q = np.rint(QUANTUM * (V - 0.5)).astype(np.int64)  # in [-G/2, G/2]: a fixed per-row map
    weight = QUANTUM // 2
    exact: list[int] = []
    for label in (0, 1):
        rows = q[y == label]
        exact += [int(v) for v in rows.sum(axis=0)] + [weight * int(rows.shape[0])]
    mech = DiscreteLaplaceMechanism(
        epsilon,
        direction_sensitivity(k, relation),
        dimension=2 * k + 2,
        rng=rng,
    )
    noisy = np.array(mech.release(exact), dtype=np.float64)
    means = []
    for block in (noisy[: k + 1], noisy[k + 1 :]):
        rows = max(float(block[k] / weight), 1.0)  # a noisy count below 1 would flip or blow up the mean
        means.append(block[:k] / rows)
    difference: np.ndarray = means[1] - means[0]
    return difference


def private_fit(
    U: np.ndarray,
    y: np.ndarray,
    k: int,
    epsilon_selection: Fraction,
    epsilon_direction: Fraction,
    relation: NeighbouringRelation,
    rng: RandomSource,
) -> tuple[np.ndarray, np.ndarray]:
    """``(features, direction)``: steps 1 and 2 on the labelled unit-box rows (``ε_sel + ε_dir``-DP).

    With ``k >= d`` every feature is kept and ``epsilon_selection`` must be 0.
    """
    d = U.shape[1]
    if k < d:
        features = select_features(U, y, k, epsilon_selection, rng)
    elif epsilon_selection:
        raise ValueError("no feature is selected when k >= d: its epsilon must be 0")
    else:
        features = np.arange(d)
    return features, private_direction(U[:, features], y, epsilon_direction, relation, rng)


def fitted_normals(direction: np.ndarray, features: np.ndarray, d: int, count: int) -> np.ndarray:
    """``count`` unit normals in ``R^d``: the direction and a public cone around it (module docstring).

    >>> fitted_normals(np.array([0.0, 0.0]), np.array([1, 2]), 3, 2)[0].tolist()  # no direction: e_first
    [0.0, 1.0, 0.0]
    """
    k = features.shape[0]
    norm = float(np.linalg.norm(direction))
    w = direction / norm if norm > 0 else np.eye(k)[0]
    g = np.random.default_rng(CONE_SEED).standard_normal((count - 1, k))
    g /= np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-300)
    scales = np.geomspace(*CONE_SCALES, count - 1)[:, None] if count > 1 else np.zeros((0, 1))
    cone = np.vstack((w, w + scales * g))
    lengths = np.linalg.norm(cone, axis=1, keepdims=True)
    cone = np.where(lengths > 0, cone / np.maximum(lengths, 1e-300), w)
    out = np.zeros((count, d))
    out[:, features] = cone
    return out
