"""The kernel learner's private steps: the rows' spread, the label counts, the class-weighted sum, the offset.

Rows are unit-box features ``u ∈ [0, 1]^d`` (public bounds, clipped); ``labelled`` marks the rows
with a label ``y ∈ {0, 1}``. Sensitivities are stated for the two neighbouring relations of
:mod:`~privstream.learning.private_learners.base`: *replace-one* (n public) and *add/remove-one*
(n private).

1. :func:`private_spread` (skipped when the bandwidth is public), two Gaussian releases.
   (a) ρ_m: the sum over rows of ``(u/√d, 1)``; a row moves it by ``‖u - u'‖/√d <= 1`` under
   replace-one and by ``√(‖u‖²/d + 1) <= √2`` under add/remove-one. It gives the rows' mean ``ū``
   (and their number, when n is private). (b) ρ_s: the sum over rows of
   ``4·min(‖u - ū‖²/d, ¼) ∈ [0, 1]`` (``ū`` is public after (a)): ``Δ = 1`` under both relations.
   Its mean, less the known share of the noise of ``ū`` in it, estimates the spread
   ``E‖u - E u‖²`` (rows farther than half the box's diagonal from the mean count as that far);
   twice the spread is the mean squared distance ``m₂`` between two rows (clamped to
   ``[d·10⁻⁴, d/2]``).
2. :func:`private_counts` (Gaussian, ρ_c): the labelled rows of each label, ``(n₁, n₀)``:
   ``Δ = √2`` under replace-one (a label changes), 1 under add/remove-one.
3. :func:`private_direction` (Gaussian, ρ_d): with the random features ``φ`` of :mod:`.features`
   (``‖φ(u)‖ = 1``) and class weights ``(a₁, a₀)`` from the noisy counts (:func:`class_weights`:
   ``a₁ = 1, a₀ = -n₁/n₀`` or ``a₁ = n₀/n₁, a₀ = -1``, so ``|a| <= 1``), the sum
   ``v = Σ_labelled a_y·φ(u)``. Replacing a row moves it by ``‖a_y φ(u) - a_{y'} φ(u')‖ <= 2``;
   adding or removing one by ``|a_y| <= 1``. So ``Δ = 2`` (replace-one) or ``1`` (add/remove-one).
   The weights make ``v`` proportional to ``n₁·(μ₁ - μ₀)``, the difference of the two classes'
   kernel mean embeddings ``μ_c = mean of φ(u) over class c``: the score ``⟨v, φ(u)⟩`` compares
   the mean similarity of ``u`` to each class (a Parzen-window rule with the classes balanced).
4. :func:`choose_offset` (exponential mechanism, ε_o): the offset ``b`` of ``1[⟨v̂, φ(u)⟩ >= b]`` is
   ``‖v̂‖·t`` for ``t`` in the public grid :data:`OFFSETS` (0 and ``±10⁻⁴..1`` in 128 geometric
   steps; scores lie in ``[-‖v̂‖, ‖v̂‖]``), drawn with probability ``∝ exp(-ε_o·errors(t)/2)``,
   ``errors`` counted on the labelled rows: sensitivity 1 under both relations.

The Gaussian noise is the exact discrete Gaussian on a fine grid
(:class:`~privstream.learning.mechanisms.GaussianMechanism`, rounding included in its ρ); the
exponential mechanism is exact (:class:`~privstream.learning.mechanisms.ExponentialMechanism`).

>>> from privstream.learning.randomness import seeded
>>> U = np.array([[0.1, 0.1], [0.2, 0.1], [0.9, 0.8], [0.8, 0.9]]); y = np.array([0, 0, 1, 1])
>>> round(private_spread(U, 1e4, 1e4, "replace-one", seeded(0)), 2)  # the exact m₂ is 0.534
0.53
>>> counts = private_counts(y, np.ones(4, dtype=bool), 1e4, "replace-one", seeded(0))
>>> [round(a, 1) for a in class_weights(counts)]
[1.0, -1.0]
>>> offset_errors(np.array([-0.5, -0.1, 0.2, 0.4]), y)[[0, 128, 256]].tolist()  # offsets -1, 0, 1
[2, 0, 2]
"""

from __future__ import annotations

import functools
import math

import numpy as np

from privstream.learning.accounting import zcdp_to_dp
from privstream.learning.mechanisms import ExponentialMechanism, GaussianMechanism
from privstream.learning.private_learners.base import NeighbouringRelation
from privstream.learning.private_learners.kernel.features import RandomFeatures
from privstream.learning.randomness import RandomSource

__all__ = [
    "OFFSETS",
    "SPREAD_CLIP",
    "SPREAD_FLOOR",
    "choose_offset",
    "class_weights",
    "counts_query",
    "counts_sensitivity",
    "direction_query",
    "direction_sensitivity",
    "gaussian",
    "mean_query",
    "mean_sensitivity",
    "noise_sd",
    "offset_errors",
    "private_counts",
    "private_direction",
    "private_spread",
    "spread_query",
]

#: The smallest mean squared distance the bandwidth is scaled from, per feature.
SPREAD_FLOOR = 1e-4
#: The clip of a row's squared distance from the mean, per feature (a quarter: half the diagonal).
SPREAD_CLIP = 0.25
#: The offsets of the final rule, in units of ``‖v̂‖``: 0 and ±10^-4..1 (128 geometric steps).
OFFSETS = np.concatenate((-np.geomspace(1.0, 1e-4, 128), [0.0], np.geomspace(1e-4, 1.0, 128)))
#: Any δ in (0, 1) (the classical conversion's image of ρ is inverted at the same δ).
_CONVERSION_DELTA = 0.5


def gaussian(rho: float, sensitivity: float, dimension: int, rng: RandomSource | None) -> GaussianMechanism:
    """A ``rho``-zCDP Gaussian mechanism (at most ``rho``) on real vectors of ℓ2-sensitivity ``sensitivity``.

    :class:`~privstream.learning.mechanisms.GaussianMechanism` takes a target (ε, δ) and runs at the
    largest ρ whose classical conversion is at most ε; it is handed that conversion's image of
    ``rho``, stepped down until its ρ is at most ``rho``.

    >>> from privstream.learning.randomness import seeded
    >>> m = gaussian(0.02, 2.0, 3, seeded(0)); m.rho <= 0.02, round(m.sigma, 2)
    (True, 10.0)
    """
    epsilon = _target_epsilon(rho, sensitivity, dimension)
    return GaussianMechanism(epsilon, _CONVERSION_DELTA, sensitivity, dimension=dimension, rng=rng)


@functools.lru_cache(maxsize=256)
def _target_epsilon(rho: float, sensitivity: float, dimension: int) -> float:
    epsilon = zcdp_to_dp(rho, _CONVERSION_DELTA)
    while GaussianMechanism(epsilon, _CONVERSION_DELTA, sensitivity, dimension=dimension).rho > rho:
        epsilon = math.nextafter(epsilon, 0.0)
    return epsilon


@functools.lru_cache(maxsize=256)
def noise_sd(rho: float, sensitivity: float, dimension: int) -> float:
    """The standard deviation of :func:`gaussian`'s noise (a public figure; nothing is drawn).

    >>> round(noise_sd(0.02, 2.0, 3), 2)
    10.0
    """
    return gaussian(rho, sensitivity, dimension, None).sigma


def mean_sensitivity(relation: NeighbouringRelation) -> float:
    """ℓ2-sensitivity of the sum of ``(u/√d, 1)`` (step 1a).

    >>> mean_sensitivity("replace-one"), round(mean_sensitivity("add-remove-one"), 4)
    (1.0, 1.4142)
    """
    return 1.0 if relation == "replace-one" else math.sqrt(2.0)


def mean_query(U: np.ndarray) -> np.ndarray:
    """Step 1a's exact query: ``Σ (u/√d, 1)`` over the rows."""
    n, d = U.shape
    return np.concatenate((U.sum(axis=0) / math.sqrt(d), [float(n)]))


def spread_query(U: np.ndarray, mean: np.ndarray) -> float:
    """Step 1b's exact query: ``Σ 4·min(‖u - ū‖²/d, ¼)`` over the rows, for a public ``ū``."""
    d = U.shape[1]
    return 4.0 * float(np.minimum(np.sum((U - mean) ** 2, axis=1) / d, SPREAD_CLIP).sum())


def private_spread(
    U: np.ndarray, rho_mean: float, rho_spread: float, relation: NeighbouringRelation, rng: RandomSource
) -> float:
    """Step 1: the mean squared distance ``m₂`` between two rows (``rho_mean + rho_spread``-zCDP)."""
    n, d = U.shape
    first = gaussian(rho_mean, mean_sensitivity(relation), d + 1, rng)
    noisy = np.array(first.release(mean_query(U).tolist()), dtype=np.float64)
    rows = max(float(n) if relation == "replace-one" else float(noisy[d]), 1.0)
    mean = noisy[:d] * math.sqrt(d) / rows
    second = gaussian(rho_spread, 1.0, 1, rng)
    spread_sum = float(second.release(spread_query(U, mean)))
    # E‖u - ū‖² = E‖u - E u‖² + ‖ū - E u‖², and the second term is d·(first.sigma·√d/rows)² on average
    spread = spread_sum * d / (4.0 * rows) - (d * first.sigma / rows) ** 2
    return float(min(max(2.0 * spread, d * SPREAD_FLOOR), d / 2))


def counts_sensitivity(relation: NeighbouringRelation) -> float:
    """ℓ2-sensitivity of the label counts ``(n₁, n₀)`` (step 2).

    >>> round(counts_sensitivity("replace-one"), 4), counts_sensitivity("add-remove-one")
    (1.4142, 1.0)
    """
    return math.sqrt(2.0) if relation == "replace-one" else 1.0


def private_counts(
    y: np.ndarray, labelled: np.ndarray, rho: float, relation: NeighbouringRelation, rng: RandomSource
) -> tuple[float, float]:
    """Step 2: the noisy ``(n₁, n₀)`` of the labelled rows, each at least 1 (``rho``-zCDP)."""
    noisy = gaussian(rho, counts_sensitivity(relation), 2, rng).release(counts_query(y, labelled).tolist())
    return max(float(noisy[0]), 1.0), max(float(noisy[1]), 1.0)


def counts_query(y: np.ndarray, labelled: np.ndarray) -> np.ndarray:
    """Step 2's exact query: ``(n₁, n₀)`` of the labelled rows."""
    ones = np.count_nonzero(labelled & (y == 1))
    return np.array([ones, np.count_nonzero(labelled) - ones], dtype=np.float64)


def class_weights(counts: tuple[float, float]) -> tuple[float, float]:
    """``(a₁, a₀)``: ``a₁·n₁ = -a₀·n₀`` on the noisy counts, the larger in magnitude exactly 1.

    >>> class_weights((20.0, 80.0)), class_weights((80.0, 20.0))
    ((1.0, -0.25), (0.25, -1.0))
    """
    ratio = counts[0] / counts[1]
    return (1.0, -ratio) if ratio <= 1 else (1.0 / ratio, -1.0)


def direction_sensitivity(relation: NeighbouringRelation) -> float:
    """ℓ2-sensitivity of the class-weighted feature sum (step 3).

    >>> direction_sensitivity("replace-one"), direction_sensitivity("add-remove-one")
    (2.0, 1.0)
    """
    return 2.0 if relation == "replace-one" else 1.0


def private_direction(
    features: RandomFeatures,
    U: np.ndarray,
    y: np.ndarray,
    weights: tuple[float, float],
    rho: float,
    relation: NeighbouringRelation,
    rng: RandomSource,
) -> np.ndarray:
    """Step 3: the noisy ``v̂ = Σ a_y φ(u) + noise`` over the labelled rows ``U`` (``rho``-zCDP)."""
    mechanism = gaussian(rho, direction_sensitivity(relation), features.size, rng)
    return np.array(mechanism.release(direction_query(features, U, y, weights).tolist()), dtype=np.float64)


def direction_query(
    features: RandomFeatures, U: np.ndarray, y: np.ndarray, weights: tuple[float, float]
) -> np.ndarray:
    """Step 3's exact query: ``Σ a_y φ(u)`` over the labelled rows ``U`` (labels ``y``)."""
    row_weights = np.where(y == 1, weights[0], weights[1])
    total = np.zeros(features.size)
    first = 0
    for chunk in features.chunks(U):
        total += row_weights[first : first + chunk.shape[0]] @ chunk
        first += chunk.shape[0]
    return total


def offset_errors(scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Errors of ``1[score >= t]`` on the labelled rows for every ``t`` of :data:`OFFSETS` (ints);
    ``scores`` are in units of ``‖v̂‖``."""
    order = np.argsort(scores, kind="stable")
    ones_below = np.concatenate(([0], np.cumsum(y[order] == 1)))  # ones among the first i scores
    below = np.searchsorted(scores[order], OFFSETS, side="left")  # rows said 0 by offset t
    zeros_above = int(np.count_nonzero(y != 1)) - (below - ones_below[below])
    return (ones_below[below] + zeros_above).astype(np.int64)


def choose_offset(errors: np.ndarray, epsilon: float, rng: RandomSource) -> int:
    """Step 4: an index of :data:`OFFSETS` with probability ``∝ exp(-epsilon·errors/2)``, exactly."""
    counts = np.bincount(errors)  # block e: the offsets with e errors
    levels = np.flatnonzero(counts)
    mechanism = ExponentialMechanism(epsilon, 1, rng=rng)
    level = int(levels[mechanism.select_block([(int(counts[e]), -int(e)) for e in levels])])
    members = np.flatnonzero(errors == level)
    return int(members[rng.uniform_int(members.shape[0])])
