"""The sanitizers in the privacy audit: mwem, mwem-zcdp, mwem-add-remove (n private), fooling.

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
  released without noise) at the claim takes thousands of runs (an audit of this sanitizer detects
  gross bugs only), hence 6,000.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit.harness import AuditSpec, MechanismFactory
from privstream.learning.hypotheses import hypothesis_from_dict
from privstream.learning.hypothesis_classes import Thresholds, parse_class_spec
from privstream.learning.randomness import RandomSource
from privstream.learning.sanitizers.base import SanitizerResult, make_sanitizer
from privstream.learning.sanitizers.distribution import SyntheticDistribution
from privstream.learning.sanitizers.mwem import MWEMSanitizer

__all__ = [
    "ADD_REMOVE_PAIR",
    "FOOLING_PAIR",
    "MWEM_PAIR",
    "fooling_audit_spec",
    "implied_normaliser",
    "mwem_add_remove_audit_spec",
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


def _noisy_count(result: SanitizerResult, round_: int) -> int:
    """The noisy count a sanitizer's transcript publishes for one round."""
    return int(result.dp_outputs["transcript"][round_]["noisy_count"])


def _first_count(result: SanitizerResult) -> int:
    return max(-3, min(8, _noisy_count(result, 0)))


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
        description=(
            f"MWEM on {MWEM_CLASS.spec}, one round, no replays, eps={epsilon:g} (basic "
            f"composition); pair {MWEM_PAIR[0]} vs {MWEM_PAIR[1]}; output: block edges and the "
            "noisy count"
        ),
        claimed=PrivacyGuarantee(epsilon),
        build=_mwem(epsilon, 0.0),
        pair=MWEM_PAIR,
        discretise=_edges_and_count,
        broken={
            "selection_without_noise": _mwem(epsilon, 0.0, noisy_selection=False),
            "measurement_without_noise": _mwem(epsilon, 0.0, noisy_measurement=False),
        },
        samples=2_000,
    )


def mwem_zcdp_audit_spec(epsilon: float = 0.8) -> AuditSpec:
    """MWEM, one round, (ε, 1e-3) by zCDP composition (see the module docstring)."""
    delta = 1e-3
    return AuditSpec(
        name="mwem-zcdp",
        description=(
            f"MWEM on {MWEM_CLASS.spec}, one round, no replays, eps={epsilon:g}, delta={delta:g} "
            f"(zCDP composition); pair {MWEM_PAIR[0]} vs {MWEM_PAIR[1]}; output: block edges"
        ),
        claimed=PrivacyGuarantee(epsilon, delta),
        build=_mwem(epsilon, delta),
        pair=MWEM_PAIR,
        discretise=_edges,
        broken={"selection_without_noise": _mwem(epsilon, delta, noisy_selection=False)},
        samples=2_000,
    )


def _negated_count(result: SanitizerResult) -> int:
    # the "¬h" direction's count: under the all-zero dataset every subsample point is 0, so it is 0 or m
    return max(-4, min(6, _noisy_count(result, 1)))


def _fooling(broken: str | None) -> MechanismFactory:
    def build(rng: RandomSource) -> Callable[[Any], Any]:
        sanitizer = make_sanitizer("fooling", learner="generic", rounds=1, broken=broken)
        return lambda d: sanitizer.fit(
            FOOLING_CLASS, _points(d), epsilon=FOOLING_CLAIM.epsilon, delta=FOOLING_CLAIM.delta, rng=rng
        )

    return build


def fooling_audit_spec() -> AuditSpec:
    """The fooling sanitizer, one round (see the module docstring)."""
    return AuditSpec(
        name="fooling",
        description=(
            f"fooling sanitizer (generic discriminator) on {FOOLING_CLASS.spec}, one round, "
            f"eps={FOOLING_CLAIM.epsilon:g}, delta={FOOLING_CLAIM.delta:g}; 45 zeros vs one "
            "replaced by 3; output: the negated direction's noisy count"
        ),
        claimed=FOOLING_CLAIM,
        build=_fooling(None),
        pair=FOOLING_PAIR,
        discretise=_negated_count,
        broken={"noiseless_check": _fooling("noiseless_check")},
        samples=6_000,
    )


# -- MWEM with n private, under add/remove-one neighbours ----------------------------------------
# Registered as ``mwem-add-remove`` (``privstream audit mwem-add-remove``):
#
# * **the production path**: :meth:`MWEMSanitizer.fit` with ``expected_size`` set (n private) on
#   ``thresholds:8``, one round, no replays, ε = 1 in total, a ``count_share`` of 1/2 so the noisy
#   count ν that normalises the update is measured at ε/2 (a large share makes the audit of the
#   count sharp; the default share is smaller);
# * **an add/remove-one pair**: ``D`` = twenty 1s and twenty 6s vs ``D' = D + (6,)``: the window
#   gained one example, and with it n went from 40 to 41;
# * **what the auditor looks at**: only the public release. With one round and no replays, the
#   released weight ``A'`` of the selected query h satisfies ``A'/(1 - A') = a/(1 - a)·e^{(v - a)/2}``,
#   where ``a`` is h's mass under the uniform start (public) and ``v = noisy_count/ν`` the measured
#   fraction; the transcript publishes ``noisy_count``, so the release determines ν
#   (:func:`implied_normaliser`). In production ν is the noisy count, a DP output;
# * **the broken variant** ``true_size_normaliser`` (``noisy_size=False``) normalises by the true n,
#   the mistake a port of the paper's replace-one MWEM makes on a time window: ν is then 40 under D
#   and 41 under D', an output impossible under the other dataset, so the audit reports an
#   unbounded loss.

ADD_REMOVE_CLASS = Thresholds(8)
#: Datasets are tuples of points; the second has one example more (add/remove-one neighbours).
ADD_REMOVE_PAIR: tuple[Any, Any] = ((1,) * 20 + (6,) * 20, (1,) * 20 + (6,) * 21)
EXPECTED_SIZE = 40  # the operator's expected window size in the add/remove audit
_REACH = 8  # bins of the implied normaliser: EXPECTED_SIZE ± _REACH, the tails lumped


def implied_normaliser(result: SanitizerResult) -> Hashable:
    """The ν a one-round, no-replay MWEM release implies (see the section docstring above), as a bin.

    ``"clipped"`` when the measured fraction was clipped to 0 or 1 (ν is then not determined) or
    the query has mass 0 or 1 under the uniform start; otherwise ν rounded, within
    ``EXPECTED_SIZE ± 8`` (the tails lumped into the end bins).
    """
    (round_,) = result.dp_outputs["transcript"]
    h = hypothesis_from_dict(round_["query"])
    uniform = SyntheticDistribution.uniform(result.distribution.domain_size)
    a, released = uniform.answer(h), result.distribution.answer(h)
    if not (0 < a < 1 and 0 < released < 1):
        return "clipped"
    v = a + 2 * math.log(released * (1 - a) / (a * (1 - released)))
    if not 1e-9 < v < 1 - 1e-9:
        return "clipped"
    nu = round(_noisy_count(result, 0) / v)
    return min(max(nu, EXPECTED_SIZE - _REACH), EXPECTED_SIZE + _REACH)


def mwem_add_remove_audit_spec(epsilon: float = 1.0) -> AuditSpec:
    """MWEM with n private on an add/remove-one pair (see the section docstring above)."""

    def factory(noisy_size: bool) -> MechanismFactory:
        sanitizer = MWEMSanitizer(rounds=1, repetitions=0, count_share=0.5, noisy_size=noisy_size)

        def build(rng: RandomSource) -> Callable[[Any], Any]:
            def release(dataset: Any) -> SanitizerResult:
                xs = np.array(dataset, dtype=np.int64)
                return sanitizer.fit(
                    ADD_REMOVE_CLASS, xs, epsilon=epsilon, rng=rng, expected_size=EXPECTED_SIZE
                )

            return release

        return build

    return AuditSpec(
        name="mwem-add-remove",
        description=(
            f"MWEM with n private (expected_size={EXPECTED_SIZE}) on {ADD_REMOVE_CLASS.spec}, "
            f"one round, eps={epsilon:g}; add/remove pair: 20 ones and 20 sixes vs one six more; "
            "output: the normaliser the release implies"
        ),
        claimed=PrivacyGuarantee(epsilon=epsilon, delta=0.0, mechanism="mwem"),
        build=factory(True),
        pair=ADD_REMOVE_PAIR,
        discretise=implied_normaliser,
        broken={"true_size_normaliser": factory(False)},
        samples=4_000,
    )
