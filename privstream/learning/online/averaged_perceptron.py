"""The averaged Perceptron (Freund & Schapire 1999): the Perceptron's rule averaged over time.

It runs the Perceptron of :mod:`.perceptron` inside (same map, same updates on the Perceptron's own
mistakes), but predicts with the **sum of every vector the Perceptron has held**, one per example
seen (this one's included): ``Σ_{s <= t} v_s``. On a noisy stream the plain Perceptron's last vector
jumps at every mistake; the average is stable and usually more accurate, which is what a stream
that no halfspace separates needs. On a separable one both converge to a separating rule.

**Bound and proof.** The averaged predictions have no mistake bound of their own
(``mistake_bound`` is ``None``), but the inner Perceptron is exactly the Perceptron, so its mistakes
(``perceptron_mistakes``) obey Novikoff's ``(R/γ)²`` on a stream separable with margin ``γ``: more
than that proves no halfspace has margin ``γ`` on the stream, and ``realizable`` turns ``False``.

**Batch path.** The sum is kept as ``anchor + k·v`` (``k`` examples since the last update), so
between two updates the scores of a block are ``⟨anchor, z⟩ + k_i·⟨v, z⟩``: two row products, and
the same floating-point operations whether the examples come one by one or in batches.

>>> import numpy as np
>>> gen = np.random.default_rng(0)
>>> X = gen.uniform(-1, 1, (2000, 2)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
>>> flip = gen.random(2000) < 0.1; y[flip] = 1 - y[flip]   # 10% label noise
>>> avg = AveragedPerceptron([[-1, 1], [-1, 1]], margin=0.1)
>>> _ = avg.learn_many(X, y)
>>> avg.mistake_bound is None, avg.perceptron_mistakes > avg.perceptron_bound, avg.realizable
(True, True, False)
>>> test = gen.uniform(-1, 1, (5000, 2))
>>> float(np.mean(avg.predict_many(test) == (test.sum(axis=1) > 0))) > 0.97
True
"""

from __future__ import annotations

import numpy as np

from privstream.learning.online.base import LinearLearner, check_margin, margins, mistake_bound
from privstream.learning.online.perceptron import FIRST_BLOCK, MAX_BLOCK


class AveragedPerceptron(LinearLearner):
    """The averaged Perceptron; ``realizable`` from its inner Perceptron's mistakes."""

    name = "averaged-perceptron"
    _arrays = ("_v", "_anchor")
    _params = ("margin",)
    _counters = ("_since", "perceptron_mistakes")

    def __init__(self, bounds: object, margin: float = 0.1) -> None:
        super().__init__(bounds)
        self.margin = check_margin(margin)
        self._v = np.zeros(self.dimension + 1)  # the inner Perceptron's vector
        self._anchor = np.zeros(self.dimension + 1)  # Σ of its vectors up to the last update
        self._since = 0  # examples since the last update: the sum is anchor + since·v
        self.perceptron_mistakes = 0
        self.perceptron_bound = mistake_bound(self.dimension, self.margin)

    @property
    def margin_mistakes(self) -> int:
        """The inner Perceptron's mistakes: the count ``(R/γ)²`` bounds on a separable stream."""
        return self.perceptron_mistakes

    @property
    def margin_bound(self) -> int:
        return self.perceptron_bound

    def _rule(self) -> np.ndarray:
        rule: np.ndarray = self._anchor + self._since * self._v
        return rule

    def _scores(self, Z: np.ndarray) -> np.ndarray:
        # The next example's prediction counts the current vector once more (it is "held" for it).
        scores: np.ndarray = margins(Z, self._anchor) + (self._since + 1) * margins(Z, self._v)
        return scores

    def _learn(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        n = Z.shape[0]
        predictions = np.empty(n, dtype=np.uint8)
        truth = y.astype(bool)
        pos, block = 0, FIRST_BLOCK
        while pos < n:
            end = min(n, pos + block)
            inner = margins(Z[pos:end], self._v)
            held = self._since + np.arange(1, end - pos + 1)
            said = margins(Z[pos:end], self._anchor) + held * inner >= 0
            wrong = np.flatnonzero((inner >= 0) != truth[pos:end])
            if wrong.size == 0:
                predictions[pos:end] = said
                self._since += end - pos
                pos, block = end, min(2 * block, MAX_BLOCK)
                continue
            k = int(wrong[0])
            predictions[pos : pos + k + 1] = said[: k + 1]
            self._anchor = self._anchor + int(held[k]) * self._v
            self._since = 0
            self._v = self._v + Z[pos + k] if truth[pos + k] else self._v - Z[pos + k]
            self.perceptron_mistakes += 1
            pos, block = pos + k + 1, max(FIRST_BLOCK, 2 * (k + 1))
        return predictions
