"""The generic learner in the privacy audit (:mod:`privstream.learning.audit`, name ``"generic"``).

``privstream audit generic`` runs :func:`generic_audit_spec`:

* **the production path**: :meth:`GenericLearner.fit` on ``thresholds:8`` (ε = 1 by default;
  :func:`generic_audit_spec` takes another ε);
* **a worst-case replace-one pair**: ``S = [(7, 1)]`` vs ``S' = [(7, 0)]``. The example sits at
  the last point, where 8 of the 9 thresholds label it 1: flipping its label gives the all-zero
  function one error less while every other threshold gets one error more, so both the
  numerator and the normaliser of ``P(all-zero)`` move against each other. The exact privacy
  loss is ``ln((8e^{ε/2} + 1)/(8e^{-ε/2} + 1)) ≈ 0.886`` at ε = 1 (the supremum over N is ε);
* **broken variants** that claim the same ε and must be caught:
  ``sensitivity_understated`` samples ∝ ``exp(-ε·errors)`` (Δ taken as 1/2: really 2ε-DP, loss
  ≈ 1.75 on this pair) and ``no_noise`` is ERM (a uniformly chosen empirical risk minimiser; the
  all-zero function is impossible under S and certain under S': unbounded loss).

``privstream audit generic-intervals`` runs :func:`generic_intervals_audit_spec`: the same
learner on ``intervals:8``, whose releases come from the interval sampler
(:mod:`~privstream.learning.private_learners.generic.interval_sampler`), on ``S = [(0, 1)]`` vs
``S' = [(0, 0)]``: the 8 intervals ``[0, b)`` cover the example, the 29 other functions do not,
so with ``ρ = e^{-ε/2}`` the loss on ``[0, b)`` is ``ln((8ρ + 29)/(ρ(8 + 29ρ))) ≈ 0.780`` at
ε = 1 (it tends to ε as N grows); the same two broken variants (losses ≈ 1.54 and ∞).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from privstream.learning.audit.harness import AuditSpec, MechanismFactory
from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import HypothesisClass, Intervals, Thresholds
from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.private_learners.generic.error_levels import error_levels
from privstream.learning.private_learners.generic.learner import (
    GenericLearner,
    exponential_mechanism,
    output_law,
)
from privstream.learning.randomness import RandomSource

__all__ = [
    "AUDIT_CLASS",
    "AUDIT_EPSILON",
    "AUDIT_PAIR",
    "INTERVALS_AUDIT_CLASS",
    "INTERVALS_AUDIT_PAIR",
    "generic_audit_spec",
    "generic_intervals_audit_spec",
]

AUDIT_EPSILON = 1.0
AUDIT_CLASS = Thresholds(8)
#: Datasets are ``(xs, ys)`` tuples (hashable, immutable); replace-one neighbours.
AUDIT_PAIR: tuple[Any, Any] = (((7,), (1,)), ((7,), (0,)))
INTERVALS_AUDIT_CLASS = Intervals(8)
INTERVALS_AUDIT_PAIR: tuple[Any, Any] = (((0,), (1,)), ((0,), (0,)))


def _arrays(dataset: Any) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = dataset
    return np.array(xs, dtype=np.int64), np.array(ys, dtype=np.uint8)


def _threshold_of(h: Hypothesis) -> int:
    """The cut t of ``1[x >= t]``: orders the outputs so the audit can also try tail events."""
    first, changes = h.change_points()
    return 0 if first else (changes[0] if changes else h.domain_size)


def _interval_of(h: Hypothesis) -> tuple[int, int]:
    """``(a, b)`` of ``1[a <= x < b]`` (``(0, 0)``: the empty function), in an order for tail events."""
    first, changes = h.change_points()
    bounds = ([0] if first else []) + list(changes) + [h.domain_size]
    return (bounds[0], bounds[1]) if len(bounds) > 1 else (0, 0)


def generic_audit_spec(epsilon: float = AUDIT_EPSILON) -> AuditSpec:
    """The :class:`AuditSpec` of the generic learner at ``epsilon`` (see the module docstring)."""
    return _spec(
        "generic", AUDIT_CLASS, AUDIT_PAIR, _threshold_of, epsilon, "pair: one example (7, 1) vs (7, 0)"
    )


def generic_intervals_audit_spec(epsilon: float = AUDIT_EPSILON) -> AuditSpec:
    """The generic learner on ``intervals:8``: the interval sampler's production path."""
    return _spec(
        "generic-intervals",
        INTERVALS_AUDIT_CLASS,
        INTERVALS_AUDIT_PAIR,
        _interval_of,
        epsilon,
        "pair: one example (0, 1) vs (0, 0)",
    )


def _spec(
    name: str,
    hclass: HypothesisClass,
    pair: tuple[Any, Any],
    discretise: Callable[[Any], Hashable],
    epsilon: float,
    pair_text: str,
) -> AuditSpec:
    learner = GenericLearner()

    def production(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> Hypothesis:
            xs, ys = _arrays(dataset)
            return learner.fit(hclass, xs, ys, epsilon=epsilon, rng=rng).hypothesis

        return release

    def understated(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> Hypothesis:
            return exponential_mechanism(hclass, *_arrays(dataset), epsilon, rng, sensitivity=0.5)

        return release

    def erm(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> Hypothesis:
            levels = error_levels(hclass, *_arrays(dataset))
            best, count = levels.nonempty()[0]
            return levels.member(best, rng.uniform_int(count))

        return release

    def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        laws = [output_law(hclass, *_arrays(d), epsilon) for d in pair]
        first, second = ({discretise(h): p for h, p in law.items()} for law in laws)
        return first, second

    broken: dict[str, MechanismFactory] = {"sensitivity_understated": understated, "no_noise": erm}
    return AuditSpec(
        name=name,
        description=(
            f"generic learner (exponential mechanism, score -errors) on {hclass.spec}, "
            f"eps={epsilon:g}; {pair_text}"
        ),
        claimed=ExponentialMechanism(epsilon).guarantee(),
        build=production,
        pair=pair,
        discretise=discretise,
        broken=broken,
        samples=20_000,
        exact=exact,
    )
