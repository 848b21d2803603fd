"""The halfspace learner in the privacy audit (:mod:`privstream.learning.audit`, name ``"halfspaces"``).

``privstream audit halfspaces`` runs :func:`halfspaces_audit_spec`:

* **the production path**: :meth:`HalfspaceLearner.fit` at the public resolution R = 8 on two
  features in the unit box (ε = 1 by default): the net has 8 normals (every 45°) with 8 offsets
  each and the two constants, 66 hypotheses;
* **a tight replace-one pair**: five rows at (0.35, 0.5) labelled 1 and one row at (0.2, 0.5)
  whose label flips from 1 to 0. Of the 66 members, 32 label both points 1, 32 both 0, one
  (``1[u_1 >= 0.3125]``, the only member separating the two points) labels only (0.35, 0.5) 1 and
  one only (0.2, 0.5). Flipping the label moves the error counts (0, 5, 1, 6) of these four groups
  to (1, 6, 0, 5): every member that says 0 at (0.2, 0.5) gains a factor ``e^{ε/2}`` while the
  normaliser, dominated by the 32 perfect members, shrinks by nearly ``e^{-ε/2}``. With
  ``ρ = e^{-ε/2}`` the privacy loss is
  ``ε/2 + ln((32 + ρ + ρ⁵ + 32ρ⁶)/(1 + 32ρ + 32ρ⁵ + ρ⁶)) ≈ 0.895`` at ε = 1 (the exponential
  mechanism's ε is the supremum over all pairs); the event "predicts 0 at (0.2, 0.5)" has
  probability 0.064 vs 0.157;
* **broken variants** that claim the same ε and must be caught: ``epsilon_doubled`` (the
  sensitivity understated: the same fit at 2ε, loss ≈ 1.92 on the pair) and ``no_noise`` (the
  first empirical risk minimiser of the net: the all-ones constant under S, the separator under
  S'; unbounded loss).

An output is binned by its predictions at the pair's two points (:func:`probe_key`). The loss
``ln p_S'(h)/p_S(h)`` depends only on the change of h's error count, i.e. on h's prediction at
(0.2, 0.5), so it is constant on each bin and the binned law has the same privacy loss as the law
of the released model. :func:`exact_laws` computes those laws **independently of the learner's
scoring** (:func:`~privstream.learning.private_learners.halfspaces.net_errors`): each net member's
errors are counted with its own ``predict``.

``privstream audit halfspaces-fitted`` runs :func:`fitted_audit_spec`: the private fit of the
normals (:func:`~privstream.learning.private_learners.halfspaces.direction.private_fit`, the
function the learner calls when it fits normals) on two features with one kept, at ``ε_sel = 0.6``
and ``ε_dir = 0.4`` (the learner's 3:2 split; claim ε = 1, replace-one). The pair (found by a
search over five-row datasets): replacing one row makes the one-feature rules of the two
features tie instead of favouring the second, and flips the sign of the class-mean difference
on both features. Output: (the kept feature, the sign of the direction). Broken variants:
``selection_argmax`` (the best feature without noise, the first on a tie) and
``direction_exact`` (the class sums and counts without noise): both make the output a
deterministic function that differs across the pair.

>>> spec = halfspaces_audit_spec()
>>> p, q = spec.exact()
>>> from privstream.learning.audit import privacy_loss
>>> round(privacy_loss(p, q), 4), round(p[(0, 1)] + p[(0, 0)], 3), round(q[(0, 1)] + q[(0, 0)], 3)
(0.8954, 0.064, 0.157)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable
from fractions import Fraction
from typing import Any

import numpy as np

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit.harness import AuditSpec, MechanismFactory, privacy_loss
from privstream.learning.private_learners.halfspaces.direction import (
    QUANTUM,
    private_direction,
    private_fit,
    stump_scores,
)
from privstream.learning.private_learners.halfspaces.learner import (
    DIRECTION_SHARE,
    MECHANISM,
    SELECTION_SHARE,
    HalfspaceLearner,
)
from privstream.learning.private_learners.halfspaces.model import HalfspaceModel
from privstream.learning.private_learners.halfspaces.net import halfspace_net, net_errors
from privstream.learning.randomness import RandomSource

__all__ = [
    "AUDIT_BOUNDS",
    "AUDIT_EPSILON",
    "AUDIT_PAIR",
    "AUDIT_RESOLUTION",
    "FITTED_PAIR",
    "PROBES",
    "exact_laws",
    "fitted_audit_spec",
    "halfspaces_audit_spec",
    "probe_key",
]

AUDIT_EPSILON = 1.0
AUDIT_RESOLUTION = 8
AUDIT_BOUNDS = np.array([[0.0, 1.0], [0.0, 1.0]])
#: Datasets are tuples of ``(x1, x2, label)`` rows (hashable); replace-one neighbours (one label flips).
AUDIT_PAIR: tuple[Any, Any] = (
    ((0.35, 0.5, 1),) * 5 + ((0.2, 0.5, 1),),
    ((0.35, 0.5, 1),) * 5 + ((0.2, 0.5, 0),),
)
#: The pair's two feature points: an output's bin is its predictions there.
PROBES = np.array([[0.2, 0.5], [0.35, 0.5]])


def _arrays(dataset: Any) -> tuple[np.ndarray, np.ndarray]:
    X = np.array([row[:2] for row in dataset], dtype=np.float64)
    y = np.array([row[2] for row in dataset], dtype=np.int64)
    return X, y


def probe_key(model: HalfspaceModel) -> Hashable:
    """The released model's predictions at :data:`PROBES` (a tuple of two 0/1 ints)."""
    return tuple(int(v) for v in model.predict(PROBES))


def exact_laws(
    epsilon: float, resolution: int = AUDIT_RESOLUTION, pair: tuple[Any, Any] = AUDIT_PAIR
) -> tuple[dict[Hashable, float], dict[Hashable, float]]:
    """The exact output laws (by :func:`probe_key`) of the learner on ``pair``, by brute force.

    Every member of the public net is materialised (``HalfspaceNet.member``), its errors counted
    with its ``predict``, and ``Pr[h] = exp(-ε·err(h)/2) / Σ exp(-ε·err/2)`` (floats, ``math.fsum``).
    """
    net = halfspace_net(2, resolution)
    members = [net.member(i, AUDIT_BOUNDS) for i in range(len(net))]
    keys = [probe_key(m) for m in members]
    laws = []
    for dataset in pair:
        X, y = _arrays(dataset)
        errors = [int(np.count_nonzero(m.predict(X) != y)) for m in members]
        best = min(errors)
        weights = [math.exp(-epsilon * (e - best) / 2) for e in errors]
        total = math.fsum(weights)
        parts: dict[Hashable, list[float]] = defaultdict(list)
        for key, w in zip(keys, weights, strict=True):
            parts[key].append(w / total)
        laws.append({key: math.fsum(ps) for key, ps in parts.items()})
    return laws[0], laws[1]


def _fit_at(epsilon: float) -> MechanismFactory:
    learner = HalfspaceLearner(resolution=AUDIT_RESOLUTION)

    def build(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> HalfspaceModel:
            X, y = _arrays(dataset)
            return learner.fit(X, y, epsilon=epsilon, bounds=AUDIT_BOUNDS, rng=rng).model  # type: ignore[return-value]

        return release

    return build


def _first_minimiser(rng: RandomSource) -> Callable[[Any], Any]:
    net = halfspace_net(2, AUDIT_RESOLUTION)

    def release(dataset: Any) -> HalfspaceModel:
        X, y = _arrays(dataset)
        errors = net_errors(net, X, y.astype(np.uint8))  # the unit box: u = x
        return net.member(int(np.argmin(errors)), AUDIT_BOUNDS)

    return release


def halfspaces_audit_spec(epsilon: float = AUDIT_EPSILON) -> AuditSpec:
    """The :class:`AuditSpec` of the halfspace learner at ``epsilon`` (see the module docstring)."""

    def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        return exact_laws(epsilon)

    loss = privacy_loss(*exact())
    return AuditSpec(
        name="halfspaces",
        description=(
            f"halfspaces (exponential mechanism over the public net, R={AUDIT_RESOLUTION}: "
            f"66 hypotheses) on [0,1]^2, eps={epsilon:g}; tight pair: 5 rows (0.35, 0.5) "
            f"labelled 1 and the row (0.2, 0.5) labelled 1 vs 0 (exact loss {loss:.3f})"
        ),
        claimed=PrivacyGuarantee(epsilon=epsilon, delta=0.0, mechanism=MECHANISM),
        build=_fit_at(epsilon),
        pair=AUDIT_PAIR,
        discretise=probe_key,
        broken={"epsilon_doubled": _fit_at(2 * epsilon), "no_noise": _first_minimiser},
        samples=6_000,
        exact=exact,
    )


#: Five labelled rows on [0, 1]^2 and their replace-one neighbour (the first row replaced).
FITTED_PAIR: tuple[Any, Any] = (
    ((0.9, 0.3, 0), (0.7, 0.5, 0), (0.9, 0.5, 1), (0.3, 0.5, 0), (0.3, 0.7, 1)),
    ((0.5, 0.1, 1), (0.7, 0.5, 0), (0.9, 0.5, 1), (0.3, 0.5, 0), (0.3, 0.7, 1)),
)
FITTED_EPSILON = 1.0


def _fit_output(features: np.ndarray, direction: np.ndarray) -> tuple[int, int]:
    return int(features[0]), int(np.sign(direction[0]))


def _split(epsilon: float) -> tuple[Fraction, Fraction]:
    total = Fraction(epsilon)
    share = SELECTION_SHARE + DIRECTION_SHARE
    return total * SELECTION_SHARE / share, total * DIRECTION_SHARE / share


def fitted_audit_spec(epsilon: float = FITTED_EPSILON) -> AuditSpec:
    """The private fit of the normals at ``epsilon`` (replace-one); see the module docstring."""
    eps_sel, eps_dir = _split(epsilon)

    def honest(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> tuple[int, int]:
            X, y = _arrays(dataset)
            return _fit_output(*private_fit(X, y, 1, eps_sel, eps_dir, "replace-one", rng))

        return release

    def selection_argmax(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> tuple[int, int]:
            X, y = _arrays(dataset)
            features = np.array([int(np.argmax(stump_scores(X, y)))])
            return _fit_output(features, private_direction(X[:, features], y, eps_dir, "replace-one", rng))

        return release

    def direction_exact(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> tuple[int, int]:
            X, y = _arrays(dataset)
            features, _ = private_fit(X, y, 1, eps_sel, eps_dir, "replace-one", rng)
            q = np.rint(QUANTUM * (X[:, features] - 0.5))
            exact = q[y == 1].mean(axis=0) - q[y == 0].mean(axis=0)
            return _fit_output(features, exact)

        return release

    return AuditSpec(
        name="halfspaces-fitted",
        description=(
            f"the private fit of the halfspaces' normals (1 of 2 features kept), eps={epsilon:g} "
            f"(selection {float(eps_sel):g}, direction {float(eps_dir):g}), replace-one; pair: five rows, "
            "one replaced (the best feature and both mean-difference signs change)"
        ),
        claimed=PrivacyGuarantee(epsilon=epsilon, delta=0.0, mechanism=MECHANISM),
        build=honest,
        pair=FITTED_PAIR,
        discretise=lambda o: o,
        broken={"selection_argmax": selection_argmax, "direction_exact": direction_exact},
        samples=4000,
    )
