"""The Perceptron (Rosenblatt 1958) with a configured margin γ, and its mistake bound (Novikoff 1962).

**Rule.** On the mapped examples ``z`` (:mod:`.base`: features scaled to ``[-1, 1]`` with the
public bounds, clipped, and a constant 1 appended; ``‖z‖ <= R = sqrt(d + 1)``), keep a vector ``v``
(first 0). Predict 1 when ``⟨v, z⟩ >= 0``, else 0. On a mistake, ``v <- v + s·z`` with
``s = 2y - 1``; a correct prediction changes nothing.

**Theorem** (Novikoff 1962; see also Shalev-Shwartz, *Online Learning and Online Convex
Optimization*, 2012, Thm 3.9). If some unit ``u`` has ``s·⟨u, z⟩ >= γ`` on every example (the
stream is separable with margin ``γ``), the Perceptron makes at most ``(R/γ)²`` mistakes, however
long the stream. *Proof.* Each mistake has ``s·⟨v, z⟩ <= 0`` (a label 1 predicted 0 had
``⟨v, z⟩ < 0``; a label 0 predicted 1 had ``⟨v, z⟩ >= 0``). After ``M`` mistakes, ``⟨v, u⟩ >= Mγ``
(each update adds ``s·⟨z, u⟩ >= γ``) and ``‖v‖² <= M R²`` (each adds ``2s⟨v, z⟩ + ‖z‖² <= R²``),
so ``Mγ <= ⟨v, u⟩ <= ‖v‖ <= sqrt(M)·R``, i.e. ``M <= (R/γ)²``. ∎

So ``mistake_bound = ⌊(d + 1)/γ²⌋``, and a mistake beyond it **proves** that no halfspace labels
the stream (as mapped: clipped to the bounds) with margin ``γ``: ``realizable`` turns ``False``
for good, the analogue of the SOA's proof that no hypothesis of its class agrees with the stream.
The Perceptron keeps predicting (it is still a sensible learner on a noisy stream). The margin is a
hypothesis about the stream, used by the bound only: the predictions do not depend on it.

**Batch path.** Between two mistakes ``v`` does not change, so :meth:`learn_many` scores a block of
examples at once, stops at the first mistake, updates, and goes on after it; the block length
follows the distance between mistakes, so the work is O(n·d) plus a few numpy calls per mistake.

>>> import numpy as np
>>> p = Perceptron([[0, 1], [0, 1]], margin=0.2)
>>> X = np.array([[0.9, 0.8], [0.1, 0.2], [0.8, 0.9], [0.2, 0.1]]); y = np.array([1, 0, 1, 0])
>>> p.learn_many(X, y).tolist(), p.mistakes, p.mistake_bound, p.realizable
([1, 1, 0, 0], 2, 75, True)
>>> p.predict_many(np.array([[0.95, 0.9], [0.05, 0.0]])).tolist()
[1, 0]
"""

from __future__ import annotations

import numpy as np

from privstream.learning.online.base import LinearLearner, check_margin, margins, mistake_bound

#: Rows scored at once at first; then twice the distance to the last mistake (at least this).
FIRST_BLOCK = 64
MAX_BLOCK = 65_536


class Perceptron(LinearLearner):
    """The Perceptron on the public feature map, with the mistake bound of margin ``margin``."""

    name = "perceptron"
    _arrays = ("_v",)
    _params = ("margin",)

    def __init__(self, bounds: object, margin: float = 0.1) -> None:
        super().__init__(bounds)
        self.margin = check_margin(margin)
        self._v = np.zeros(self.dimension + 1)
        self._bound = mistake_bound(self.dimension, self.margin)

    @property
    def mistake_bound(self) -> int:
        """``⌊(R/γ)²⌋``: the most mistakes on a stream separable with margin ``γ``."""
        return self._bound

    @property
    def realizable(self) -> bool:
        """``False`` once the mistakes exceed the bound: no halfspace has margin ``γ`` on the stream."""
        return self.mistakes <= self._bound

    def _rule(self) -> np.ndarray:
        return self._v

    def _scores(self, Z: np.ndarray) -> np.ndarray:
        return margins(Z, self._v)

    def _learn(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        n = Z.shape[0]
        predictions = np.empty(n, dtype=np.uint8)
        truth = y.astype(bool)
        v, pos, block = self._v, 0, FIRST_BLOCK
        while pos < n:
            end = min(n, pos + block)
            said = margins(Z[pos:end], v) >= 0
            wrong = np.flatnonzero(said != truth[pos:end])
            if wrong.size == 0:
                predictions[pos:end] = said
                pos, block = end, min(2 * block, MAX_BLOCK)
                continue
            k = int(wrong[0])
            predictions[pos : pos + k + 1] = said[: k + 1]
            if truth[pos + k]:
                v += Z[pos + k]
            else:
                v -= Z[pos + k]
            pos, block = pos + k + 1, max(FIRST_BLOCK, 2 * (k + 1))
        return predictions
