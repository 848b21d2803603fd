"""The sanitizers in the privacy audit (:mod:`privstream.learning.audit`): mwem, mwem-zcdp, fooling.

Each spec runs the production ``fit`` on a replace-one neighbouring pair; its broken variants are
built by the sanitizer's own switches (``noisy_selection``, ``noisy_measurement``, ``broken``), so
the code path is the production one. Outputs are discretised by post-processing of the *release*
(block edges of the synthetic distribution; the public transcript of selected queries and noisy
counts in the certificate parameters), which can only lower the true ε.

* ``mwem``: one round, no replays, ε = 1 (basic composition) on ``thresholds:8``; the pair
  ``(1, 1, 6, 6, 6)`` vs ``(1, 1, 1, 6, 6)`` moves the worst threshold from t = 6 to t = 2.
  Broken: ``selection_without_noise`` (argmax selection: the edges differ deterministically) and
  ``measurement_without_noise`` (exact counts 2/3 vs 3/2: supports never overlap).
* ``mwem-zcdp``: the same at (0.8, 1e-3) with zCDP composition; broken: ``selection_without_noise``.
* ``fooling``: one round of the fooling sanitizer with the generic learner as discriminator on
  ``thresholds:4`` at (1, 1e-2); 45 zeros vs one of them replaced by 3. Its per-round outputs are
  computed on a secret τ-subsample, so the changed example shows only in the rounds whose
  subsample holds it (probability τ ≈ 0.045): catching ``noiseless_check`` (the check's count
  released without noise) at the claim takes thousands of runs (spec §4.4C: "detects gross bugs
  only"), hence the spec's 6,000.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit.harness import AuditSpec, MechanismFactory
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.randomness import RandomSource
from privstream.learning.sanitizers.base import SanitizerResult, make_sanitizer

__all__ = [
    "FOOLING_PAIR",
    "MWEM_PAIR",
    "fooling_audit_spec",
    "mwem_audit_spec",
    "mwem_zcdp_audit_spec",
]

MWEM_CLASS = parse_class_spec("thresholds:8")
#: Datasets are tuples of points; replace-one neighbours whose worst threshold differs.
MWEM_PAIR: tuple[Any, Any] = ((1, 1, 6, 6, 6), (1, 1, 1, 6, 6))

FOOLING_CLASS = parse_class_spec("thresholds:4")
FOOLING_CLAIM = PrivacyGuarantee(1.0, 1e-2)
#: 45 zeros (m = floor(τ·45) = 2 points per round) vs the first replaced by 3.
FOOLING_PAIR: tuple[Any, Any] = ((0,) * 45, (3,) + (0,) * 44)


def _points(dataset: Any) -> np.ndarray:
    return np.array(dataset, dtype=np.int64)


def _edges(result: SanitizerResult) -> Hashable:
    return result.distribution.edges


def _first_count(result: SanitizerResult) -> int:
    return max(-3, min(8, result.parameters["transcript"][0]["noisy_count"]))


def _edges_and_count(result: SanitizerResult) -> Hashable:
    return _edges(result), _first_count(result)


def _mwem(epsilon: float, delta: float, **switches: bool) -> MechanismFactory:
    def build(rng: RandomSource) -> Callable[[Any], Any]:
        sanitizer = make_sanitizer("mwem", rounds=1, repetitions=0, **switches)
        return lambda d: sanitizer.fit(MWEM_CLASS, _points(d), epsilon=epsilon, delta=delta, rng=rng)

    return build


def mwem_audit_spec(epsilon: float = 1.0) -> AuditSpec:
    """MWEM, one round, pure ε (see the module docstring)."""
    return AuditSpec(
        name="mwem",
        description=(f"MWEM on {MWEM_CLASS.spec}, one round, no replays, eps={epsilon:g} (basic "
                     f"composition); pair {MWEM_PAIR[0]} vs {MWEM_PAIR[1]}; output: block edges and the "
                     "noisy count"),
        claimed=PrivacyGuarantee(epsilon),
        build=_mwem(epsilon, 0.0),
        pair=MWEM_PAIR,
        discretise=_edges_and_count,
        broken={"selection_without_noise": _mwem(epsilon, 0.0, noisy_selection=False),
                "measurement_without_noise": _mwem(epsilon, 0.0, noisy_measurement=False)},
        samples=2_000,
    )


def mwem_zcdp_audit_spec(epsilon: float = 0.8) -> AuditSpec:
    """MWEM, one round, (ε, 1e-3) by zCDP composition (see the module docstring)."""
    delta = 1e-3
    return AuditSpec(
        name="mwem-zcdp",
        description=(f"MWEM on {MWEM_CLASS.spec}, one round, no replays, eps={epsilon:g}, delta={delta:g} "
                     f"(zCDP composition); pair {MWEM_PAIR[0]} vs {MWEM_PAIR[1]}; output: block edges"),
        claimed=PrivacyGuarantee(epsilon, delta),
        build=_mwem(epsilon, delta),
        pair=MWEM_PAIR,
        discretise=_edges,
        broken={"selection_without_noise": _mwem(epsilon, delta, noisy_selection=False)},
        samples=2_000,
    )


def _negated_count(result: SanitizerResult) -> int:
    # the "¬h" direction's count: under the all-zero dataset every subsample point is 0, so it is 0 or m
    return max(-4, min(6, result.parameters["transcript"][1]["noisy_count"]))


def _fooling(broken: str | None) -> MechanismFactory:
    def build(rng: RandomSource) -> Callable[[Any], Any]:
        sanitizer = make_sanitizer("fooling", learner="generic", rounds=1, broken=broken)
        return lambda d: sanitizer.fit(FOOLING_CLASS, _points(d), epsilon=FOOLING_CLAIM.epsilon,
                                       delta=FOOLING_CLAIM.delta, rng=rng)

    return build


def fooling_audit_spec() -> AuditSpec:
    """The fooling sanitizer, one round (see the module docstring)."""
    return AuditSpec(
        name="fooling",
        description=(f"fooling sanitizer (generic discriminator) on {FOOLING_CLASS.spec}, one round, "
                     f"eps={FOOLING_CLAIM.epsilon:g}, delta={FOOLING_CLAIM.delta:g}; 45 zeros vs one "
                     "replaced by 3; output: the negated direction's noisy count"),
        claimed=FOOLING_CLAIM,
        build=_fooling(None),
        pair=FOOLING_PAIR,
        discretise=_negated_count,
        broken={"noiseless_check": _fooling("noiseless_check")},
        samples=6_000,
    )
