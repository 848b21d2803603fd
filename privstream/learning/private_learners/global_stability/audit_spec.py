"""The global-stability learner in the privacy audit (:mod:`privstream.learning.audit`).

Name ``"global-stability"``: a membership-inference canary (blm_almm.md §5.1.7), see
:func:`global_stability_audit_spec`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit.harness import AuditSpec, MechanismFactory
from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import Points
from privstream.learning.mechanisms import StableHistogram
from privstream.learning.private_learners.base import check_privacy_parameters
from privstream.learning.private_learners.global_stability.learner import (
    MECHANISM,
    Histogram,
    MParameters,
    algorithm_m,
)
from privstream.learning.randomness import RandomSource

__all__ = ["AUDIT_CLASS", "AUDIT_DELTA", "AUDIT_EPSILON", "AUDIT_PAIR", "global_stability_audit_spec"]

AUDIT_EPSILON = 2.0
AUDIT_DELTA = 0.05
AUDIT_CLASS = Points(8)
_CANARY = 7


def _audit_dataset(canary_label: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """8 one-example batches then S' = [(0, 0), (1, 0)]; batch 0 is the canary ``(7, label)``."""
    xs = (_CANARY, 0, 1, 2, 3, 4, 5, 6, 0, 1)
    ys = (canary_label,) + (0,) * 9
    return xs, ys


#: Replace-one pair: the canary ``(7, 1)`` (only batch 0's G outputs ``1[x = 7]``) vs ``(7, 0)``.
AUDIT_PAIR: tuple[Any, Any] = (_audit_dataset(1), _audit_dataset(0))


def global_stability_audit_spec(epsilon: float = AUDIT_EPSILON) -> AuditSpec:
    """The :class:`~privstream.learning.audit.AuditSpec` of Algorithm M (membership-inference canary).

    Worst case for the δ part (blm_almm.md §5.1.7 "canary audit"): ``points:8``, K = 8 batches of
    one example (G = SOA of that example), S' = two negatives. Under d0 the canary's batch outputs
    ``1[x = 7]``, a count-1 item, which the histogram releases with probability <= δ; under d1 it
    cannot appear. The event is "the release labels 7 positive". ``η = 4/(3K)`` makes step 3 keep
    count-1 items (so only the histogram protects the canary). Broken variants (must be caught):
    ``exact_histogram`` releases every item with its exact count; ``no_threshold`` adds the noise but
    releases every noisy count >= 1.
    """
    eps, dlt = check_privacy_parameters(epsilon, AUDIT_DELTA)
    k = 8
    params = MParameters(mode="practical", num_batches=k, batch_size=1, n_aux=1, budget=0, max_depth=0,
                         eta=4 / (3 * k), n_prime=2, hist_threshold=StableHistogram(eps / 2, dlt).threshold)

    def variant(histogram: Histogram | None) -> MechanismFactory:
        def build(rng: RandomSource) -> Callable[[Any], Any]:
            def release(dataset: Any) -> Hypothesis:
                xs = np.array(dataset[0], dtype=np.int64)
                ys = np.array(dataset[1], dtype=np.uint8)
                return algorithm_m(AUDIT_CLASS, xs, ys, params, epsilon=eps, delta=dlt, rng=rng,
                                   histogram=histogram).hypothesis

            return release

        return build

    def exact_counts(keys: Sequence[Hashable], rng: RandomSource) -> dict[Hashable, int]:
        counts: dict[Hashable, int] = {}
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
        return counts

    def no_threshold(keys: Sequence[Hashable], rng: RandomSource) -> dict[Hashable, int]:
        scale = StableHistogram(eps / 2, dlt).scale
        noisy = {key: c + rng.discrete_laplace(scale) for key, c in exact_counts(keys, rng).items()}
        return {key: c for key, c in noisy.items() if c >= 1}

    return AuditSpec(
        name="global-stability",
        description=(f"Algorithm M (global stability) on {AUDIT_CLASS.spec}, K=8 one-example batches, "
                     f"eps={eps:g}, delta={dlt:g}; pair: canary (7, 1) vs (7, 0) in batch 0"),
        claimed=PrivacyGuarantee(epsilon=eps, delta=dlt, mechanism=MECHANISM),
        build=variant(None),
        pair=AUDIT_PAIR,
        discretise=lambda h: int(h.predict(_CANARY)),
        broken={"exact_histogram": variant(exact_counts), "no_threshold": variant(no_threshold)},
        samples=20_000,
    )
