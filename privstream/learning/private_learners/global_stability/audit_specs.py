"""The global-stability learner in the privacy audit (:mod:`privstream.learning.audit`).

Two specs, both on the production code path (:func:`algorithm_m` in practical mode: correlated ERM
per batch, histogram at (ε, δ), selection at ε, parallel composition) on ``points:8`` at
(ε, δ) = (2, 0.05) (generous, so the audits have power in a few thousand runs):

* ``"global-stability"`` (replace-one, n public): K = 8 one-example batches at tolerance 0, S' =
  four copies of ``(7, 1)``. The pair replaces the canary ``(7, 1)`` of batch 0 by ``(7, 0)``; every
  other batch holds ``(7, 0)``. Only the canary's batch can output ``1[x = 7]`` (the one function of
  the class labelling 7 positive), a count-1 item that the histogram releases with probability
  <= δ; under the neighbour nobody outputs it. Event: the release labels 7 positive. Broken
  variants: ``exact_histogram`` releases every output with its exact count; ``no_threshold`` adds
  the noise but releases every noisy count >= 1.
* ``"global-stability-add-remove"`` (n private, ``expected_size`` = the smaller dataset's size):
  D = 16 batches' worth of alternating pairs ``(7,1),(7,1)`` / ``(3,1),(3,1)`` then S' = four
  ``(7, 1)``; D' = D with one more ``(7, 1)`` in front. The production split assigns every example
  independently (:func:`random_split`), so D' changes one batch. Broken variant ``positional``
  splits by position with the same (expected) layout: the extra example shifts every pair, mixed
  batches ``(7,1),(3,1)`` have no consistent point function (Fail), and ``1[x = 7]`` falls from 8
  batches to 1, from released to (almost) never.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit import AuditSpec, MechanismFactory
from privstream.learning.hypothesis_classes import Points
from privstream.learning.mechanisms import StableHistogram
from privstream.learning.private_learners.base import check_privacy_parameters
from privstream.learning.private_learners.global_stability.learner import (
    MECHANISM,
    Histogram,
    MParameters,
    Split,
    algorithm_m,
    positional_split,
)
from privstream.learning.randomness import RandomSource

__all__ = [
    "ADD_REMOVE_PAIR",
    "AUDIT_CLASS",
    "AUDIT_PAIR",
    "add_remove_audit_spec",
    "global_stability_audit_spec",
]

AUDIT_EPSILON = 2.0
AUDIT_DELTA = 0.05
AUDIT_CLASS = Points(8)
_CANARY = 7
_PRIME = ((7,) * 4, (1,) * 4)  # S': the selection prefers 1[x = 7] whenever it is a candidate


def _replace_one_dataset(canary_label: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """8 one-example batches ``(7, canary), (7, 0) x 7`` then S'."""
    return (_CANARY,) * 8 + _PRIME[0], (canary_label,) + (0,) * 7 + _PRIME[1]


#: Replace-one pair: the canary ``(7, 1)`` (only batch 0 can output ``1[x = 7]``) vs ``(7, 0)``.
AUDIT_PAIR: tuple[Any, Any] = (_replace_one_dataset(1), _replace_one_dataset(0))

_PAIRS = 8  # pairs of each kind in the add/remove dataset: K = 16 batches of 2


def _add_remove_dataset(extra: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    xs = ((7, 7, 3, 3) * _PAIRS) + _PRIME[0]
    ys = (1,) * (4 * _PAIRS) + _PRIME[1]
    return ((7, *xs), (1, *ys)) if extra else (xs, ys)


#: Add/remove pair: D' = D plus one ``(7, 1)`` in front.
ADD_REMOVE_PAIR: tuple[Any, Any] = (_add_remove_dataset(False), _add_remove_dataset(True))


def _labels_canary(h: Any) -> int:
    return int(h.predict(_CANARY))


def _params(
    epsilon: float, num_batches: int, batch_size: int, n_prime: int, expected_size: int | None
) -> MParameters:
    eps, dlt = check_privacy_parameters(epsilon, AUDIT_DELTA)
    return MParameters(
        mode="practical",
        num_batches=num_batches,
        batch_size=batch_size,
        n_prime=n_prime,
        eta=4 / (3 * num_batches),
        hist_threshold=StableHistogram(eps, dlt).threshold,
        hist_epsilon=eps,
        select_epsilon=eps,
        batch_learner="correlated-erm",
        tolerance=0.0,
        min_batch=1,
        max_draws=64,
        expected_size=expected_size,
    )


def _variant(
    params: MParameters, epsilon: float, histogram: Histogram | None = None, split: Split | None = None
) -> MechanismFactory:
    def build(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> Any:
            xs = np.array(dataset[0], dtype=np.int64)
            ys = np.array(dataset[1], dtype=np.uint8)
            return algorithm_m(
                AUDIT_CLASS,
                xs,
                ys,
                params,
                epsilon=epsilon,
                delta=AUDIT_DELTA,
                rng=rng,
                histogram=histogram,
                split=split,
            ).hypothesis

        return release

    return build


def _exact_counts(keys: Sequence[Hashable], rng: RandomSource) -> dict[Hashable, int]:
    counts: dict[Hashable, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return counts


def global_stability_audit_spec(epsilon: float = AUDIT_EPSILON) -> AuditSpec:
    """The replace-one :class:`AuditSpec` of Algorithm M (membership-inference canary, module docstring)."""
    params = _params(epsilon, 8, 1, 4, None)
    scale = StableHistogram(epsilon, AUDIT_DELTA).scale

    def no_threshold(keys: Sequence[Hashable], rng: RandomSource) -> dict[Hashable, int]:
        noisy = {key: c + rng.discrete_laplace(scale) for key, c in _exact_counts(keys, rng).items()}
        return {key: c for key, c in noisy.items() if c >= 1}

    return AuditSpec(
        name="global-stability",
        description=(
            f"Algorithm M (correlated ERM, parallel composition) on {AUDIT_CLASS.spec}, K=8 "
            f"one-example batches, eps={epsilon:g}, delta={AUDIT_DELTA:g}; pair: canary (7, 1) vs "
            f"(7, 0) in batch 0"
        ),
        claimed=PrivacyGuarantee(epsilon=epsilon, delta=AUDIT_DELTA, mechanism=MECHANISM),
        build=_variant(params, epsilon),
        pair=AUDIT_PAIR,
        discretise=_labels_canary,
        broken={
            "exact_histogram": _variant(params, epsilon, histogram=_exact_counts),
            "no_threshold": _variant(params, epsilon, histogram=no_threshold),
        },
        samples=4_000,
    )


def add_remove_audit_spec(epsilon: float = AUDIT_EPSILON) -> AuditSpec:
    """The add/remove-one :class:`AuditSpec` (``expected_size`` mode; module docstring)."""
    size = len(ADD_REMOVE_PAIR[0][0])
    params = _params(epsilon, 2 * _PAIRS, 2, size - 4 * _PAIRS, size)

    def positional(n: int, p: MParameters, rng: RandomSource) -> np.ndarray:
        layout = MParameters(**{**p.__dict__, "n_prime": n - p.num_batches * p.batch_size})
        return positional_split(n, layout)

    return AuditSpec(
        name="global-stability-add-remove",
        description=(
            f"Algorithm M with expected_size={size} (random split) on {AUDIT_CLASS.spec}, "
            f"eps={epsilon:g}, delta={AUDIT_DELTA:g}; pair: D vs D plus one (7, 1) in front"
        ),
        claimed=PrivacyGuarantee(epsilon=epsilon, delta=AUDIT_DELTA, mechanism=MECHANISM),
        build=_variant(params, epsilon),
        pair=ADD_REMOVE_PAIR,
        discretise=_labels_canary,
        broken={"positional": _variant(params, epsilon, split=positional)},
        samples=4_000,
    )
