"""PCL2 on a finite metric space: the cube rule's Voronoi analogue ([B App. A, Alg 4, Thm A.6, A.12]).

Supported case (a practical form of [B Alg 4]): a *finite, public* ground
set 𝒳 = {g_0, ..., g_{N-1}} with a metric ρ; data points are indices into it.

1. ``r = diam(𝒳) · n^{-1/(4·ddim)}`` ([B Alg 4 step 1] for a space of diameter 1; ``ddim`` is the
   doubling dimension, supplied by the caller: estimating it from the data would leak).
2. 𝒩 = a maximal r-packing, built greedily over the ground set in its given (data-independent)
   order: g_i becomes a centre iff ρ(g_i, c) >= r for every earlier centre c. A maximal r-packing
   is an r-cover ([B Thm A.4.1]), so every Voronoi cell has diameter <= 2r ([B Lemma A.8],
   corrected here).
3. Voronoi cells: each ground point goes to its nearest centre, ties to the lowest index.
4. Each cell's label has exactly PCL's law (:func:`~privstream.learning.consistent.pcl.cell_label`:
   the coin w.p. e^{-ε|v|/2}, else the majority, with v = #1 - #0 in the cell). The release holds
   every cell, so the noise is drawn from the random source directly
   (:func:`~privstream.learning.consistent.pcl.label_table`; information-theoretic), or from the
   keyed PRF of :mod:`.prf` with ``randomness="prf"`` (computational).

**Privacy (ε-DP, replace-one, n public) [B Thm A.6].** The partition depends only on the public
ground set, ρ, ddim and n; from there the argument is PCL's (:mod:`.pcl`): a replacement moves
``Σ|Δv| <= 2`` and each cell's label law is log-Lipschitz with constant ε/2 in v. The release
(:class:`VoronoiLabelModel`) is the label of every cell (at most N), a function of that DP output.

**Add/remove-one (``expected_size=m``, n private).** The radius uses m instead of n, so the
partition (the released centres and radius) is a function of the configuration; one point
joining or leaving moves one vote by 1 (``Σ|Δv| <= 1``), so the release is ε/2-DP, reported as ε
(one calibration for both relations, as in :mod:`.pcl`). Zero points give every cell a coin.

>>> import numpy as np
>>> from privstream.learning.randomness import seeded
>>> ground = np.linspace(0, 1, 11)[:, None]
>>> packing = maximal_packing(ground, 0.25)
>>> packing.centres.tolist()
[0, 3, 6, 9]
>>> model = pcl2_fit(np.array([0, 1, 9, 10]), np.array([0, 0, 1, 1]), ground=ground, ddim=1,
...                  epsilon=1.0, rng=seeded(0))
>>> model.predict(np.array([0, 10])).dtype
dtype('uint8')
>>> empty = pcl2_fit(np.array([], dtype=np.int64), np.array([]), ground=ground, ddim=1, epsilon=1.0,
...                  rng=seeded(0), expected_size=4)
>>> empty.packing.radius == model.packing.radius
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from privstream.learning.consistent.pcl import cell_label, label_table
from privstream.learning.consistent.prf import CellStream, coin_bits, new_key
from privstream.learning.errors import LearningInputError
from privstream.learning.private_learners.base import PrivacyKind, check_expected_size
from privstream.learning.private_learners.vector_base import finite_epsilon, split_labels
from privstream.learning.randomness import RandomSource, resolve

__all__ = ["Metric", "Packing", "VoronoiLabelModel", "euclidean", "manhattan", "maximal_packing", "pcl2_fit"]

#: ``metric(a, B)``: distances from one point ``a`` (shape (d,)) to each row of ``B`` (shape (m, d)).
Metric = Callable[[np.ndarray, np.ndarray], np.ndarray]


def euclidean(a: np.ndarray, B: np.ndarray) -> np.ndarray:
    distances: np.ndarray = np.sqrt(np.sum((B - a) ** 2, axis=1))
    return distances


def manhattan(a: np.ndarray, B: np.ndarray) -> np.ndarray:
    distances: np.ndarray = np.sum(np.abs(B - a), axis=1)
    return distances


@dataclass(frozen=True)
class Packing:
    """A maximal r-packing of a ground set and its Voronoi partition (``cell[i]`` = centre slot of g_i)."""

    radius: float
    centres: np.ndarray
    cell: np.ndarray


def maximal_packing(ground: np.ndarray, radius: float, metric: Metric = euclidean) -> Packing:
    """Greedy maximal ``radius``-packing in the ground set's order, with its Voronoi cells. O(N·|𝒩|)."""
    pts = np.asarray(ground, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[0] < 1:
        raise LearningInputError("the ground set must be a non-empty (N, d) array")
    if not radius > 0:
        raise LearningInputError(f"radius must be > 0, got {radius!r}")
    nearest = np.full(pts.shape[0], np.inf)  # distance to the closest centre so far
    cell = np.zeros(pts.shape[0], dtype=np.int64)
    centres: list[int] = []
    for i in range(pts.shape[0]):
        if nearest[i] >= radius:
            dist = metric(pts[i], pts)
            closer = dist < nearest  # strict: ties stay with the earlier (lower-index) centre
            cell[closer] = len(centres)
            nearest = np.minimum(nearest, dist)
            centres.append(i)
    return Packing(float(radius), np.array(centres, dtype=np.int64), cell)


class VoronoiLabelModel:
    """Released PCL2 predictor on the ground set: the label of every Voronoi cell.

    ``privacy`` says how the cells' noise was drawn (``"computational"`` with the keyed PRF).
    """

    kind = "voronoi-labels"

    def __init__(
        self, packing: Packing, labels: np.ndarray, privacy: PrivacyKind = "information-theoretic"
    ) -> None:
        self.packing = packing
        self.labels = np.asarray(labels, dtype=np.uint8)
        self.privacy = privacy

    def predict(self, points: np.ndarray) -> np.ndarray:
        """Labels of ground-set indices."""
        idx = np.asarray(points, dtype=np.int64)
        labels: np.ndarray = self.labels[self.packing.cell[idx]]
        return labels

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "radius": self.packing.radius,
            "centres": self.packing.centres.tolist(),
            "labels": self.labels.tolist(),
        }


def pcl2_fit(
    points: np.ndarray,
    y: np.ndarray,
    *,
    ground: np.ndarray,
    ddim: float,
    epsilon: float,
    metric: Metric = euclidean,
    rng: RandomSource | None = None,
    radius: float | None = None,
    expected_size: int | None = None,
    randomness: str = "direct",
) -> VoronoiLabelModel:
    """Fit PCL2 (ε-DP) on ground-set indices ``points`` with 0/1 labels ``y`` (-1/NaN: no vote).

    The radius uses n, or ``expected_size`` when n is private, unless ``radius`` is given.
    """
    eps = finite_epsilon(epsilon)
    m = check_expected_size(expected_size)
    if randomness not in ("direct", "prf"):
        raise ValueError(f"randomness must be 'direct' or 'prf', got {randomness!r}")
    pts = np.asarray(ground, dtype=np.float64)
    idx = np.asarray(points)
    if idx.size == 0:
        idx = np.zeros(0, dtype=np.int64)
    outside = idx.size > 0 and idx.dtype.kind in "iu" and (idx.min() < 0 or idx.max() >= pts.shape[0])
    if idx.ndim != 1 or idx.dtype.kind not in "iu" or outside:
        raise LearningInputError("points must be a 1-D array of ground-set indices")
    labels, labelled = split_labels(y, idx.shape[0])
    if not ddim > 0:
        raise LearningInputError(f"ddim must be > 0, got {ddim!r}")
    if radius is None:
        size = max(idx.shape[0] if m is None else m, 1)
        diameter = max(float(np.max(metric(p, pts))) for p in pts)  # public: the ground set's
        radius = diameter * size ** (-1.0 / (4.0 * ddim))
    packing = maximal_packing(pts, radius, metric)
    cells = packing.cell[idx[labelled]]
    votes = np.rint(
        np.bincount(cells, weights=2.0 * labels[labelled] - 1.0, minlength=packing.centres.size)
    ).astype(np.int64)
    slots = np.arange(packing.centres.size, dtype=np.int64)
    if randomness == "direct":
        table = label_table(packing.centres.size, slots.tolist(), votes.tolist(), eps, resolve(rng))
        return VoronoiLabelModel(packing, table)
    key = new_key(resolve(rng))
    coins = coin_bits(key, slots)
    eps_q = Fraction(eps)
    table = np.array(
        [
            cell_label(int(v), eps_q, CellStream(key, int(c)), int(b))
            for c, v, b in zip(slots, votes, coins, strict=True)
        ],
        dtype=np.uint8,
    )
    return VoronoiLabelModel(packing, table, privacy="computational")
