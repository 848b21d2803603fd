"""The one-vs-rest release in the privacy audit (:mod:`privstream.learning.audit`, name ``"one-vs-rest"``).

``privstream audit one-vs-rest`` runs :func:`one_vs_rest_audit_spec`: three classes, the halfspace
learner at the audit's resolution R = 8 on [0, 1]² (the net of
:mod:`privstream.learning.private_learners.halfspaces.audit_specs`), ε = 1 in all (ε/3 per class).

* **The pair** (replace-one): five rows at (0.35, 0.5) of class 1 and one row at (0.2, 0.5) of
  class 1 or 2. Class 0's fit sees the same labels (all 0) under both; class 1's sees the halfspaces
  audit's tight pair (the row's label 1 -> 0) and class 2's its complement (0 -> 1): two of the
  three fits move, each within ε/3.
* **Output**: every class's halfspace binned by its prediction at (0.2, 0.5), on which alone its
  fit's loss on the pair depends (the halfspaces audit's argument). The three fits draw
  independently, so the exact law is the product of the three binned laws (brute force over the
  net).
* **Broken variants** claiming the same ε: ``budget_not_split`` (each class at the whole ε: the
  sum of the budgets is 3ε; loss ≈ 1.8 on the pair) and ``no_noise`` (each class's first empirical
  risk minimiser).

>>> spec = one_vs_rest_audit_spec()
>>> from privstream.learning.audit import privacy_loss
>>> 0.4 < privacy_loss(*spec.exact()) <= 1.0
True
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit.harness import AuditSpec, MechanismFactory
from privstream.learning.private_learners.halfspaces.audit_specs import (
    AUDIT_BOUNDS,
    AUDIT_RESOLUTION,
    exact_laws,
    probe_key,
)
from privstream.learning.private_learners.halfspaces.learner import MECHANISM, HalfspaceLearner
from privstream.learning.private_learners.halfspaces.net import halfspace_net, net_errors
from privstream.learning.private_learners.one_vs_rest import OneVsRestModel, fit_one_vs_rest
from privstream.learning.randomness import RandomSource

__all__ = ["CLASSES", "PAIR", "one_vs_rest_audit_spec"]

CLASSES = 3
#: Datasets of ``(x1, x2, class)`` rows; replace-one neighbours (the last row's class 1 -> 2).
PAIR: tuple[Any, Any] = (
    ((0.35, 0.5, 1),) * 5 + ((0.2, 0.5, 1),),
    ((0.35, 0.5, 1),) * 5 + ((0.2, 0.5, 2),),
)


def _arrays(dataset: Any) -> tuple[np.ndarray, np.ndarray]:
    return np.array([r[:2] for r in dataset], dtype=np.float64), np.array(
        [r[2] for r in dataset], dtype=np.int64
    )


def _key(model: OneVsRestModel) -> Hashable:
    """Each class's prediction at (0.2, 0.5): a fit's loss on the pair depends on nothing else."""
    return tuple(probe_key(h)[0] for h in model.halfspaces)  # type: ignore[index]


def _fit(per_class: float, claimed: float) -> MechanismFactory:
    learner = HalfspaceLearner(resolution=AUDIT_RESOLUTION)

    def build(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> OneVsRestModel:
            X, y = _arrays(dataset)
            # fit_one_vs_rest splits its epsilon in CLASSES: pass what gives `per_class` each
            return fit_one_vs_rest(
                X,
                y,
                classes=CLASSES,
                epsilon=per_class * CLASSES,
                bounds=AUDIT_BOUNDS,
                rng=rng,
                learner=learner,
            )

        return release

    return build


def _no_noise(rng: RandomSource) -> Callable[[Any], Any]:
    net = halfspace_net(2, AUDIT_RESOLUTION)

    def release(dataset: Any) -> OneVsRestModel:
        X, y = _arrays(dataset)
        members = [
            net.member(int(np.argmin(net_errors(net, X, (y == k).astype(np.uint8)))), AUDIT_BOUNDS)
            for k in range(CLASSES)
        ]
        return OneVsRestModel(tuple(members), 1.0, 0.0)

    return release


def one_vs_rest_audit_spec(epsilon: float = 1.0) -> AuditSpec:
    """The :class:`AuditSpec` of one-vs-rest at ``epsilon`` in all (see the module docstring)."""

    def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        per_class = []
        for k in range(CLASSES):
            binary = tuple(tuple((x1, x2, int(c == k)) for x1, x2, c in d) for d in PAIR)
            per_class.append(exact_laws(epsilon / CLASSES, pair=(binary[0], binary[1])))
        laws = []
        for side in (0, 1):
            law: dict[Hashable, float] = {}
            for combo in itertools.product(*(sorted(p[side].items()) for p in per_class)):
                prob = 1.0
                for _, pk in combo:
                    prob *= pk
                key = tuple(k[0] for k, _ in combo)  # type: ignore[index]
                law[key] = law.get(key, 0.0) + prob
            laws.append(law)
        return laws[0], laws[1]

    return AuditSpec(
        name="one-vs-rest",
        description=f"one-vs-rest, {CLASSES} halfspaces at eps/{CLASSES} (R={AUDIT_RESOLUTION}), "
        f"eps={epsilon:g}",
        claimed=PrivacyGuarantee(epsilon=epsilon, delta=0.0, mechanism=MECHANISM),
        build=_fit(epsilon / CLASSES, epsilon),
        pair=PAIR,
        discretise=_key,
        broken={"budget_not_split": _fit(epsilon, epsilon), "no_noise": _no_noise},
        samples=6_000,
        exact=exact,
    )
