"""The second-order Perceptron (Cesa-Bianchi, Conconi & Gentile 2005), averaged over time.

**Rule.** On the mapped examples ``z`` (:mod:`.base`), keep ``v = Σ s_k z_k`` and
``A = a·I + Σ z_k z_kᵀ`` over the examples it erred on (``a`` = ``regularizer``). The second-order
Perceptron predicts 1 when ``⟨(A + z zᵀ)⁻¹ v, z⟩ >= 0``; since ``(A + z zᵀ)⁻¹ v`` and ``A⁻¹ v`` have
scores of the same sign on ``z`` (Sherman-Morrison: they differ by the factor
``1/(1 + zᵀ A⁻¹ z) > 0``), that is ``⟨w, z⟩ >= 0`` with ``w = A⁻¹ v``. On a mistake it adds ``s·z`` to
``v`` and ``z zᵀ`` to ``A`` (a rank-one update of ``A⁻¹``, O(d²)). This learner publishes the
**sum of every rule w it has held**, one per example seen (this one's included), like the averaged
Perceptron (:mod:`.averaged_perceptron`): ``Σ_{s <= t} w_s``.

**Why.** ``A⁻¹`` whitens the examples by the correlation of the ones it erred on, so the rule does
not depend on where the public bounds put the origin or on how each feature is scaled (exactly
so as ``a -> 0``: ``z -> Mz`` for an invertible ``M`` leaves the predictions unchanged). The plain
Perceptron does depend on it: on features squeezed near one end of their bounds it needs many
more mistakes. Its own mistake bound (CCG05, Thm 1) adapts to the data's spectrum instead of the
worst case ``(R/γ)²``.

**Bound and proof.** The averaged predictions have no mistake bound of their own
(``mistake_bound`` is ``None``). The margin test is the Perceptron's: a plain Perceptron
(:mod:`.perceptron`) runs beside it on the same examples, and more than ``(R/γ)²`` mistakes of it
prove that no halfspace has margin ``γ`` on the stream (``realizable`` turns ``False``).

**Batch path and cost.** Between two updates (of the second-order rule or of the Perceptron)
nothing changes, so a block of examples is scored with three row products, and the same
floating-point operations run whether the examples come one by one or in batches. The state
holds the ``(d + 1)²`` matrix ``A⁻¹``, so the learner takes at most :data:`MAX_FEATURES` features.

>>> import numpy as np
>>> from privstream.learning.online.perceptron import Perceptron
>>> gen = np.random.default_rng(0)
>>> X = gen.uniform(0, 1, (3000, 3)) ** 4         # features crowded near their lower bound
>>> y = (X @ [1.0, -2.0, 0.5] > 0.02).astype(int)
>>> sop = SecondOrderPerceptron([[0, 1]] * 3, margin=0.01)
>>> plain = Perceptron([[0, 1]] * 3, margin=0.01)
>>> bool(np.mean(sop.learn_many(X, y) == y) > np.mean(plain.learn_many(X, y) == y) + 0.02)
True
>>> sop.mistake_bound, sop.margin_mistakes == plain.mistakes, sop.realizable
(None, True, True)
"""

from __future__ import annotations

import math

import numpy as np

from privstream.learning.online.base import (
    LinearLearner,
    OnlineInputError,
    check_margin,
    margins,
    mistake_bound,
)
from privstream.learning.online.perceptron import FIRST_BLOCK, MAX_BLOCK

__all__ = ["MAX_FEATURES", "SecondOrderPerceptron"]

#: The most features: the state holds a (d + 1)² matrix, saved with every batch.
MAX_FEATURES = 256


class SecondOrderPerceptron(LinearLearner):
    """The averaged second-order Perceptron; ``realizable`` from a plain Perceptron beside it."""

    name = "second-order-perceptron"
    _arrays = ("_inverse", "_v", "_w", "_anchor", "_perceptron")
    _params = ("margin", "regularizer")
    _counters = ("_since", "updates", "perceptron_mistakes")

    def __init__(self, bounds: object, margin: float = 0.1, regularizer: float = 1.0) -> None:
        super().__init__(bounds)
        if self.dimension > MAX_FEATURES:
            raise OnlineInputError(
                f"{self.name} keeps a (d+1)x(d+1) matrix: at most {MAX_FEATURES} features, got "
                f"{self.dimension}; use averaged-perceptron or perceptron"
            )
        if isinstance(regularizer, bool) or not isinstance(regularizer, int | float):
            raise OnlineInputError(f"regularizer must be a positive number, got {regularizer!r}")
        if not 0 < regularizer < math.inf:
            raise OnlineInputError(f"regularizer must be a positive number, got {regularizer!r}")
        self.margin = check_margin(margin)
        self.regularizer = float(regularizer)
        p = self.dimension + 1
        self._inverse = np.eye(p) / self.regularizer  # A⁻¹
        self._v = np.zeros(p)
        self._w = np.zeros(p)  # A⁻¹ v: the current second-order rule
        self._anchor = np.zeros(p)  # Σ of its rules up to its last update
        self._since = 0  # examples since then: the sum is anchor + since·w
        self._perceptron = np.zeros(p)  # the plain Perceptron of the margin test
        self.updates = 0
        self.perceptron_mistakes = 0
        self.perceptron_bound = mistake_bound(self.dimension, self.margin)

    @property
    def margin_mistakes(self) -> int:
        """The plain Perceptron's mistakes: the count ``(R/γ)²`` bounds on a separable stream."""
        return self.perceptron_mistakes

    @property
    def margin_bound(self) -> int:
        return self.perceptron_bound

    def _rule(self) -> np.ndarray:
        return self._anchor + self._since * self._w

    def _scores(self, Z: np.ndarray) -> np.ndarray:
        # The next example's prediction counts the current rule once more (it is "held" for it).
        scores: np.ndarray = margins(Z, self._anchor) + (self._since + 1) * margins(Z, self._w)
        return scores

    def _update(self, z: np.ndarray, sign: float) -> None:
        """Add ``z zᵀ`` to ``A`` (Sherman-Morrison on ``A⁻¹``) and ``sign·z`` to ``v``."""
        inverse_z = self._inverse @ z
        self._inverse = self._inverse - np.outer(inverse_z, inverse_z) / (1.0 + float(z @ inverse_z))
        self._v = self._v + sign * z
        self._w = self._inverse @ self._v
        self.updates += 1

    def _learn(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        n = Z.shape[0]
        predictions = np.empty(n, dtype=np.uint8)
        truth = y.astype(bool)
        pos, block = 0, FIRST_BLOCK
        while pos < n:
            end = min(n, pos + block)
            rows = Z[pos:end]
            own = margins(rows, self._w)
            held = self._since + np.arange(1, end - pos + 1)
            said = margins(rows, self._anchor) + held * own >= 0
            own_wrong = (own >= 0) != truth[pos:end]
            perceptron_wrong = (margins(rows, self._perceptron) >= 0) != truth[pos:end]
            events = np.flatnonzero(own_wrong | perceptron_wrong)
            if events.size == 0:
                predictions[pos:end] = said
                self._since += end - pos
                pos, block = end, min(2 * block, MAX_BLOCK)
                continue
            k = int(events[0])
            predictions[pos : pos + k + 1] = said[: k + 1]
            z, sign = Z[pos + k], 1.0 if truth[pos + k] else -1.0
            if perceptron_wrong[k]:
                self._perceptron = self._perceptron + sign * z
                self.perceptron_mistakes += 1
            if own_wrong[k]:
                self._anchor = self._anchor + int(held[k]) * self._w
                self._since = 0
                self._update(z, sign)
            else:
                self._since += k + 1
            pos, block = pos + k + 1, max(FIRST_BLOCK, 2 * (k + 1))
        return predictions
