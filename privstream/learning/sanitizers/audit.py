"""MWEM under add/remove-one neighbours in the privacy audit (:mod:`privstream.learning.audit`).

Importing this module adds ``"mwem_add_remove"`` to
:data:`~privstream.learning.audit.AUDITABLE_MECHANISMS` (``privstream audit mwem_add_remove``):

* **the production path**: :meth:`MWEMSanitizer.fit` with ``expected_size`` set (n private) on
  ``thresholds:8``, one round, no replays, ε = 1 in total, a ``count_share`` of 1/2 so the noisy
  count ν that normalises the update is measured at ε/2 (a large share makes the audit of the
  count sharp; the default share is smaller);
* **an add/remove-one pair**: ``D`` = twenty 1s and twenty 6s vs ``D' = D + (6,)``: the window
  gained one example, and with it n went from 40 to 41;
* **what the auditor looks at**: only the public release. With one round and no replays, the
  released weight ``A'`` of the selected query h satisfies ``A'/(1 - A') = a/(1 - a)·e^{(v - a)/2}``,
  where ``a`` is h's mass under the uniform start (public) and ``v = noisy_count/ν`` the measured
  fraction; the transcript publishes ``noisy_count``, so the release determines ν
  (:func:`implied_normaliser`). In production ν is the noisy count, a DP output;
* **the broken variant** ``true_size_normaliser`` (``noisy_size=False``) normalises by the true n,
  the mistake a port of the paper's replace-one MWEM makes on a time window: ν is then 40 under D
  and 41 under D', an output impossible under the other dataset, so the audit reports an
  unbounded loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit import AUDITABLE_MECHANISMS, AuditSpec, MechanismFactory
from privstream.learning.hypotheses import hypothesis_from_dict
from privstream.learning.hypothesis_classes import Thresholds
from privstream.learning.randomness import RandomSource
from privstream.learning.sanitizers.base import SanitizerResult
from privstream.learning.sanitizers.distribution import SyntheticDistribution
from privstream.learning.sanitizers.mwem import MWEMSanitizer

__all__ = ["ADD_REMOVE_PAIR", "AUDIT_CLASS", "implied_normaliser", "mwem_add_remove_audit_spec"]

AUDIT_CLASS = Thresholds(8)
#: Datasets are tuples of points; the second has one example more (add/remove-one neighbours).
ADD_REMOVE_PAIR: tuple[Any, Any] = ((1,) * 20 + (6,) * 20, (1,) * 20 + (6,) * 21)
EXPECTED_SIZE = 40
_REACH = 8  # bins of the implied normaliser: EXPECTED_SIZE ± _REACH, the tails lumped


def implied_normaliser(result: SanitizerResult) -> Hashable:
    """The ν a one-round, no-replay MWEM release implies (see the module docstring), as a bin.

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
    nu = round(round_["noisy_count"] / v)
    return min(max(nu, EXPECTED_SIZE - _REACH), EXPECTED_SIZE + _REACH)


def mwem_add_remove_audit_spec(epsilon: float = 1.0) -> AuditSpec:
    """MWEM with n private on an add/remove-one pair (see the module docstring)."""

    def factory(noisy_size: bool) -> MechanismFactory:
        sanitizer = MWEMSanitizer(rounds=1, repetitions=0, count_share=0.5, noisy_size=noisy_size)

        def build(rng: RandomSource) -> Callable[[Any], Any]:
            def release(dataset: Any) -> SanitizerResult:
                xs = np.array(dataset, dtype=np.int64)
                return sanitizer.fit(AUDIT_CLASS, xs, epsilon=epsilon, rng=rng, expected_size=EXPECTED_SIZE)

            return release

        return build

    return AuditSpec(
        name="mwem_add_remove",
        description=(f"MWEM with n private (expected_size={EXPECTED_SIZE}) on {AUDIT_CLASS.spec}, one round, "
                     f"eps={epsilon:g}; add/remove pair: 20 ones and 20 sixes vs one six more; "
                     "output: the normaliser the release implies"),
        claimed=PrivacyGuarantee(epsilon=epsilon, delta=0.0, mechanism="mwem"),
        build=factory(True),
        pair=ADD_REMOVE_PAIR,
        discretise=implied_normaliser,
        broken={"true_size_normaliser": factory(False)},
        samples=4_000,
    )


AUDITABLE_MECHANISMS.setdefault("mwem_add_remove", mwem_add_remove_audit_spec)
