"""Online logistic regression: one gradient step on the log loss per example, AdaGrad step sizes.

For streams that no halfspace separates (noisy labels, overlapping classes), where the
Perceptron keeps jumping at every mistake. On the mapped examples ``z`` (:mod:`.base`), predict 1
when ``⟨v, z⟩ >= 0`` (the modelled probability ``σ(⟨v, z⟩)`` is at least ½), then take the step
``v <- v - η·g / sqrt(G)`` on the gradient ``g = (σ(⟨v, z⟩) - y)·z`` of the log loss, with ``G`` the
per-coordinate sum of squared gradients so far (AdaGrad: Duchi, Hazan & Singer, JMLR 2011; its
regret against any fixed ``v*`` grows as ``O(sqrt(T))`` on bounded examples).

It learns from every example, right or wrong, so it makes no mistake bound and no test of the
margin: ``mistake_bound`` and ``realizable`` are ``None``. Each example is one step after the last,
so the batch path is a loop (about ten numpy calls per example).

>>> import numpy as np
>>> gen = np.random.default_rng(0)
>>> X = gen.uniform(0, 1, (3000, 3)); y = (X @ [1.0, -1.0, 0.5] > 0.25).astype(int)
>>> flip = gen.random(3000) < 0.1; y[flip] = 1 - y[flip]
>>> lr = LogisticRegression([[0, 1]] * 3)
>>> _ = lr.learn_many(X, y)
>>> lr.mistake_bound, lr.realizable, lr.mistakes < 450
(None, None, True)
"""

from __future__ import annotations

import math

import numpy as np

from privstream.learning.online.base import LinearLearner, OnlineInputError, margins


class LogisticRegression(LinearLearner):
    """Online logistic regression with AdaGrad steps of base size ``learning_rate``."""

    name = "logistic"
    _arrays = ("_v", "_g2")
    _params = ("learning_rate",)

    def __init__(self, bounds: object, learning_rate: float = 0.5) -> None:
        super().__init__(bounds)
        if isinstance(learning_rate, bool) or not isinstance(learning_rate, int | float):
            raise OnlineInputError(f"learning_rate must be a positive number, got {learning_rate!r}")
        if not 0 < learning_rate < math.inf:
            raise OnlineInputError(f"learning_rate must be a positive number, got {learning_rate!r}")
        self.learning_rate = float(learning_rate)
        self._v = np.zeros(self.dimension + 1)
        self._g2 = np.zeros(self.dimension + 1)

    def _rule(self) -> np.ndarray:
        return self._v

    def _scores(self, Z: np.ndarray) -> np.ndarray:
        return margins(Z, self._v)

    def _learn(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        n = Z.shape[0]
        predictions = np.empty(n, dtype=np.uint8)
        v, g2, rate = self._v, self._g2, self.learning_rate
        for i in range(n):
            z = Z[i : i + 1]
            m = float(margins(z, v)[0])
            predictions[i] = m >= 0
            # σ(m) - y, computed without overflow for large |m|
            p = 1.0 / (1.0 + math.exp(-m)) if m >= 0 else math.exp(m) / (1.0 + math.exp(m))
            g = (p - float(y[i])) * z[0]
            g2 += g * g
            v -= rate * g / (np.sqrt(g2) + 1e-12)
        return predictions
