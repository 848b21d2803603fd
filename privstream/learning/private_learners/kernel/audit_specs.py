"""The kernel learner in the privacy audit (:mod:`privstream.learning.audit`): two specs.

``privstream audit kernel`` runs :func:`kernel_audit_spec`: **the production path**,
:meth:`KernelLearner.fit` with one frequency on one feature and a public bandwidth (so the map
``φ(u) = (cos ωu, sin ωu)`` is fixed), claiming ``(1, 0.05)``-DP under replace-one. The audit tests
one point of the privacy profile; a large δ keeps the events frequent enough for a CI-sized
sample (as for the Gaussian mechanism's own audit). The bandwidth puts ``ωu`` a quarter turn
apart at ``u = 0.25, 0.5, 0.75``:

* **the pair**: 100 rows at 0.25 labelled 1, 100 at 0.75 labelled 0 (their features are opposite,
  and both orthogonal to ``φ(0.5)``), and one row at 0.5 labelled 1 in one dataset, 0 in the
  other. The label flip moves the class-weighted sum by ``a₁ - a₀ ≈ 2`` along ``φ(0.5)``, the
  sensitivity, and changes nothing else along it;
* **the output's bin**: the released rule's score at 0.5, ``⟨v̂, φ(0.5)⟩`` (a function of the
  model), in quarter-units of the noise's standard deviation;
* **broken variants** that claim the same guarantee and must be caught: ``no_noise`` (the exact
  counts and sum, the best offset: the score is ``±2`` exactly, an unbounded loss) and
  ``noise_halved`` (every noise scale halved: the learner run at the ε of a four times larger ρ).

``privstream audit kernel-spread`` runs :func:`spread_audit_spec`: the bandwidth's private step
(:func:`~privstream.learning.private_learners.kernel.steps.private_spread`, the function the
learner calls) alone, claiming ``(1, 0.05)`` under replace-one: its two releases share the zCDP
budget of that guarantee 1:2, the learner's ratio. The pair: 100 rows at 0 and 100 at 0.1, and
one row at 0.05 in one dataset, at 1 in the other: its squared distance from the mean moves from
0 to about 0.9, which the step clips to ¼ (a move of 1 in the released sum, its sensitivity).
Output: the released mean squared distance, in quarters of its noise's standard deviation.
Broken variants: ``unclipped`` (no clip: the sum moves by about 3.6) and ``no_noise``.

>>> spec = kernel_audit_spec()
>>> spec.claimed.epsilon, spec.claimed.delta, sorted(spec.broken)
(1.0, 0.05, ['no_noise', 'noise_halved'])
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit.harness import AuditSpec, MechanismFactory
from privstream.learning.private_learners.kernel.budget import composed_epsilon, split_budget, zcdp_budget
from privstream.learning.private_learners.kernel.features import FEATURE_SEED, RandomFeatures
from privstream.learning.private_learners.kernel.learner import MECHANISM, KernelLearner
from privstream.learning.private_learners.kernel.rule import KernelModel
from privstream.learning.private_learners.kernel.steps import (
    OFFSETS,
    SPREAD_FLOOR,
    class_weights,
    direction_sensitivity,
    gaussian,
    mean_query,
    mean_sensitivity,
    noise_sd,
    offset_errors,
    private_spread,
    spread_query,
)
from privstream.learning.randomness import RandomSource

__all__ = [
    "AUDIT_DELTA",
    "AUDIT_EPSILON",
    "KERNEL_PAIR",
    "SPREAD_PAIR",
    "kernel_audit_spec",
    "quarter_turn_bandwidth",
    "spread_audit_spec",
]

AUDIT_EPSILON = 1.0
AUDIT_DELTA = 0.05
UNIT = np.array([[0.0, 1.0]])
PROBE = 0.5
BULK = 100
#: Datasets are tuples of ``(u, label)`` rows (hashable); replace-one neighbours (one label flips).
KERNEL_PAIR: tuple[Any, Any] = (
    ((0.25, 1),) * BULK + ((0.75, 0),) * BULK + ((PROBE, 1),),
    ((0.25, 1),) * BULK + ((0.75, 0),) * BULK + ((PROBE, 0),),
)
SPREAD_PAIR: tuple[Any, Any] = (
    ((0.0, 0),) * BULK + ((0.1, 0),) * BULK + ((0.05, 0),),
    ((0.0, 0),) * BULK + ((0.1, 0),) * BULK + ((1.0, 0),),
)


def _arrays(dataset: Any) -> tuple[np.ndarray, np.ndarray]:
    X = np.array([[row[0]] for row in dataset], dtype=np.float64)
    y = np.array([row[1] for row in dataset], dtype=np.int64)
    return X, y


def quarter_turn_bandwidth() -> float:
    """The public bandwidth whose single frequency turns ``φ`` by a quarter turn per 0.25 of ``u``.

    >>> features = RandomFeatures(1, 1, quarter_turn_bandwidth())
    >>> phi = features.transform(np.array([[0.25], [0.5], [0.75]]))
    >>> [round(float(phi[1] @ p), 9) + 0.0 for p in phi]  # orthogonal, unit, orthogonal
    [0.0, 1.0, 0.0]
    """
    g = float(np.random.RandomState(FEATURE_SEED).standard_normal((1, 1))[0, 0])
    return math.sqrt(2.0) * abs(g) / (2 * math.pi)  # ω = g·√2/h = ±2π


@functools.lru_cache(maxsize=4)
def _direction_sd(epsilon: float, delta: float) -> float:
    budget = split_budget(epsilon, delta, public_bandwidth=True)
    return noise_sd(budget.direction, direction_sensitivity("replace-one"), 2)


def _score_bin(epsilon: float, delta: float) -> Callable[[Any], Hashable]:
    def key(model: KernelModel) -> Hashable:
        score = float(model.scores(np.array([[PROBE]]))[0])
        return max(-24, min(24, math.floor(4 * score / _direction_sd(epsilon, delta))))

    return key


def _fit_at(epsilon: float, delta: float) -> MechanismFactory:
    learner = KernelLearner(frequencies=1, bandwidth=quarter_turn_bandwidth())

    def build(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> KernelModel:
            X, y = _arrays(dataset)
            return learner.fit(X, y, epsilon=epsilon, delta=delta, bounds=UNIT, rng=rng).model  # type: ignore[return-value]

        return release

    return build


def _exact_release(rng: RandomSource) -> Callable[[Any], Any]:
    features = RandomFeatures(1, 1, quarter_turn_bandwidth())

    def release(dataset: Any) -> KernelModel:
        X, y = _arrays(dataset)
        weights = class_weights((float(np.sum(y == 1)), float(np.sum(y == 0))))
        v = np.where(y == 1, weights[0], weights[1]) @ features.transform(X)
        scores = features.transform(X) @ v / np.linalg.norm(v)
        offset = float(OFFSETS[int(np.argmin(offset_errors(scores, y)))])
        return KernelModel(UNIT, bandwidth=features.bandwidth, frequencies=1, weights=v, offset=offset)

    return release


def kernel_audit_spec(epsilon: float = AUDIT_EPSILON, delta: float = AUDIT_DELTA) -> AuditSpec:
    """The kernel learner's production fit on :data:`KERNEL_PAIR` (module docstring)."""
    halved = composed_epsilon(4 * zcdp_budget(epsilon, delta), delta)  # every noise scale halved
    return AuditSpec(
        name="kernel",
        description=(
            f"kernel learner (1 frequency, public bandwidth) on [0,1], ({epsilon:g}, {delta:g})-DP "
            f"claimed; pair: {BULK} rows at 0.25 labelled 1, {BULK} at 0.75 labelled 0, the row at 0.5 "
            "labelled 1 vs 0; output: the rule's score at 0.5"
        ),
        claimed=PrivacyGuarantee(epsilon=epsilon, delta=delta, mechanism=MECHANISM),
        build=_fit_at(epsilon, delta),
        pair=KERNEL_PAIR,
        discretise=_score_bin(epsilon, delta),
        broken={"no_noise": _exact_release, "noise_halved": _fit_at(halved, delta)},
        samples=12_000,
    )


def _spread_unclipped(U: np.ndarray, rho_mean: float, rho_spread: float, rng: RandomSource) -> float:
    """:func:`private_spread` under replace-one without its clip (the noise still calibrated for it)."""
    n, d = U.shape
    first = gaussian(rho_mean, mean_sensitivity("replace-one"), d + 1, rng)
    mean = np.array(first.release(mean_query(U).tolist()), dtype=np.float64)[:d] * math.sqrt(d) / n
    squares = 4.0 * float(np.sum((U - mean) ** 2) / d)  # the bug: no min(., 1/4) per row
    spread_sum = float(gaussian(rho_spread, 1.0, 1, rng).release(squares))
    spread = spread_sum * d / (4.0 * n) - (d * first.sigma / n) ** 2
    return float(min(max(2.0 * spread, d * SPREAD_FLOOR), d / 2))


def _spread_at(epsilon: float, delta: float, variant: str | None = None) -> MechanismFactory:
    rho = zcdp_budget(epsilon, delta)
    rho_mean, rho_spread = rho / 3, 2 * rho / 3  # the step alone at (ε, δ), in the learner's 1:2 ratio

    def build(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> float:
            X, _ = _arrays(dataset)
            if variant == "unclipped":
                return _spread_unclipped(X, rho_mean, rho_spread, rng)
            if variant == "no_noise":
                return float(2.0 * spread_query(X, X.mean(axis=0)) / (4.0 * X.shape[0]))
            return private_spread(X, rho_mean, rho_spread, "replace-one", rng)

        return release

    return build


def spread_audit_spec(epsilon: float = AUDIT_EPSILON, delta: float = AUDIT_DELTA) -> AuditSpec:
    """The bandwidth's private step on :data:`SPREAD_PAIR` (module docstring)."""
    rows = len(SPREAD_PAIR[0])
    unit = 2.0 * noise_sd(2 * zcdp_budget(epsilon, delta) / 3, 1.0, 1) / (4.0 * rows)  # one sd of m₂

    def key(spread: float) -> Hashable:
        return max(-16, min(40, math.floor(4 * spread / unit)))

    return AuditSpec(
        name="kernel-spread",
        description=(
            f"the kernel learner's private spread (bandwidth) step alone, ({epsilon:g}, {delta:g})-DP "
            f"claimed; pair: {BULK} rows at 0 and {BULK} at 0.1, the last row at 0.05 vs 1; output: the "
            "mean squared distance"
        ),
        claimed=PrivacyGuarantee(epsilon=epsilon, delta=delta, mechanism=MECHANISM),
        build=_spread_at(epsilon, delta),
        pair=SPREAD_PAIR,
        discretise=key,
        broken={
            "unclipped": _spread_at(epsilon, delta, "unclipped"),
            "no_noise": _spread_at(epsilon, delta, "no_noise"),
        },
        samples=8_000,
    )
