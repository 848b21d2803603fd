"""The multi-class Perceptron: labels ``0..K-1`` on feature vectors, and its mistake bound.

**Rule.** On the mapped examples ``z`` (:mod:`.base`: features scaled to ``[-1, 1]`` by the public
bounds, clipped, a constant 1 appended; ``‖z‖ <= R = sqrt(d + 1)``) keep one vector ``w_k`` per class
(first 0) and predict ``ŷ = argmax_k ⟨w_k, z⟩`` (a tie goes to the smallest ``k``). On a mistake
``ŷ ≠ y``: ``w_y <- w_y + z`` and ``w_ŷ <- w_ŷ - z``; a correct prediction changes nothing
(Crammer & Singer, *Ultraconservative online algorithms for multiclass problems*, JMLR 3, 2003;
Kesler's construction, Duda & Hart 1973).

**Theorem.** If some ``W* = (w*_1, ..., w*_K)`` with ``Σ_k ‖w*_k‖² = 1`` has
``⟨w*_y, z⟩ - ⟨w*_k, z⟩ >= γ`` for every example and every ``k ≠ y`` (the stream is separable with
margin ``γ``), the multi-class Perceptron makes at most ``2R²/γ² = 2(d + 1)/γ²`` mistakes.
*Proof.* Read ``W`` as one vector of ``R^{K(d+1)}``. A mistake adds ``Φ = (… +z at y, -z at ŷ …)``,
with ``⟨W*, Φ⟩ = ⟨w*_y - w*_ŷ, z⟩ >= γ`` and ``‖Φ‖² = 2‖z‖² <= 2R²``, while
``⟨W, Φ⟩ = ⟨w_y - w_ŷ, z⟩ <= 0`` (``ŷ`` scored highest). After ``M`` mistakes ``⟨W, W*⟩ >= Mγ`` and
``‖W‖² <= 2MR²``, so ``Mγ <= sqrt(2M)·R``: ``M <= 2R²/γ²``. ∎ With ``K = 2`` this is the
Perceptron's bound on the rule ``w_1 - w_0`` (whose norm is at most ``sqrt(2)``).

So ``mistake_bound = ⌊2(d + 1)/γ²⌋``, and a mistake beyond it proves that no set of ``K`` linear
scores separates the stream with margin ``γ``: ``realizable`` turns ``False`` for good.

**Batch path.** Between two mistakes ``W`` does not change, so a block of examples is scored at
once, up to its first mistake (as the Perceptron's): the same predictions and state whether the
examples come one by one or in batches (each score is a row's own product).

>>> import numpy as np
>>> gen = np.random.default_rng(0)
>>> X = gen.uniform(0, 1, (3000, 2)); y = np.digitize(X[:, 0] - X[:, 1], [-0.3, 0.3])  # 3 classes
>>> mc = MulticlassPerceptron([[0, 1], [0, 1]], classes=3, margin=0.1)
>>> p = mc.learn_many(X, y)
>>> mc.mistake_bound, float(np.mean(p[2000:] == y[2000:])) > 0.9
(600, True)
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from privstream.learning.online.base import (
    STATE_VERSION,
    FeatureMap,
    OnlineInputError,
    OnlineStateError,
    check_margin,
)
from privstream.learning.online.perceptron import FIRST_BLOCK, MAX_BLOCK
from privstream.learning.parameters import Range

__all__ = ["MAX_CLASSES", "MulticlassPerceptron", "check_classes"]

#: The most classes a stream may declare (its labels fit a byte, as the service carries them).
MAX_CLASSES = 256


def check_classes(classes: object) -> int:
    """``K``: an int, 2 to :data:`MAX_CLASSES`."""
    if isinstance(classes, bool) or not isinstance(classes, int) or not 2 <= classes <= MAX_CLASSES:
        raise OnlineInputError(f"classes must be an int from 2 to {MAX_CLASSES}, got {classes!r}")
    return classes


def check_class_labels(y: object, n: int, classes: int) -> np.ndarray:
    """Labels in ``0..classes-1`` as int64, one per row."""
    arr = np.asarray(y)
    if arr.shape != (n,):
        raise OnlineInputError(f"expected {n} labels, got shape {arr.shape}")
    if arr.dtype == bool or arr.dtype.kind not in "iuf" or not np.all(np.mod(arr, 1) == 0):
        raise OnlineInputError(f"labels must be integers from 0 to {classes - 1}")
    if arr.size and (arr.min() < 0 or arr.max() >= classes):
        raise OnlineInputError(f"labels must be integers from 0 to {classes - 1}")
    return arr.astype(np.int64)


def _scores(Z: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``⟨w_k, z⟩`` per row and class, each a row's own reduction (the same floats in any batch)."""
    out: np.ndarray = np.multiply(Z[:, None, :], W[None, :, :]).sum(axis=2)
    return out


class MulticlassPerceptron:
    """The multi-class Perceptron on the public feature map, with its mistake bound at ``margin``."""

    name = "multiclass-perceptron"
    _params = ("classes", "margin")  # what a saved state must share with the configured learner
    parameter_ranges: ClassVar[dict[str, Range]] = {"margin": Range(low=0, low_open=True)}

    def __init__(self, bounds: object, classes: int, margin: float = 0.1) -> None:
        self.feature_map = FeatureMap(bounds)
        self.classes = check_classes(classes)
        self.margin = check_margin(margin)
        self.examples_seen = 0
        self.mistakes = 0
        self._W = np.zeros((self.classes, self.feature_map.dimension + 1))
        d = self.feature_map.dimension
        self._bound = int(Fraction(2 * (d + 1)) / Fraction(repr(float(self.margin))) ** 2)

    @property
    def mistake_bound(self) -> int:
        """``⌊2(d + 1)/γ²⌋``: the most mistakes on a stream separable with margin ``γ``."""
        return self._bound

    @property
    def margin_mistakes(self) -> int:
        """The mistakes the margin test counts: every mistake (the bound is on all of them)."""
        return self.mistakes

    @property
    def margin_bound(self) -> int:
        """The margin test's bound: :attr:`mistake_bound`."""
        return self._bound

    @property
    def realizable(self) -> bool:
        """``False`` once the mistakes pass the bound: no ``K`` linear scores have margin ``γ``."""
        return self.mistakes <= self._bound

    def predict_many(self, X: object) -> np.ndarray:
        """The current rule's classes (int64), without learning."""
        out: np.ndarray = np.argmax(_scores(self.feature_map.transform(X), self._W), axis=1)
        return out

    def predict_one(self, x: object) -> int:
        return int(self.predict_many(x)[0])

    def learn_many(self, X: object, y: object) -> np.ndarray:
        """Predict each example before learning it, in order; the predictions (int64)."""
        Z = self.feature_map.transform(X)
        labels = check_class_labels(y, Z.shape[0], self.classes)
        n = Z.shape[0]
        predictions = np.empty(n, dtype=np.int64)
        W, pos, block = self._W, 0, FIRST_BLOCK
        while pos < n:
            end = min(n, pos + block)
            said = np.argmax(_scores(Z[pos:end], W), axis=1)
            wrong = np.flatnonzero(said != labels[pos:end])
            if wrong.size == 0:
                predictions[pos:end] = said
                pos, block = end, min(2 * block, MAX_BLOCK)
                continue
            k = int(wrong[0])
            predictions[pos : pos + k + 1] = said[: k + 1]
            W[labels[pos + k]] += Z[pos + k]
            W[said[k]] -= Z[pos + k]
            self.mistakes += 1
            pos, block = pos + k + 1, max(FIRST_BLOCK, 2 * (k + 1))
        self.examples_seen += n
        return predictions

    def learn_one(self, x: object, y: int) -> int:
        """Predict ``x``, count a mistake if wrong, learn ``(x, y)``; the prediction made."""
        return int(self.learn_many(x, np.array([y]))[0])

    def weights(self) -> list[tuple[np.ndarray, float]]:
        """Each class's score as ``⟨w, x⟩ + b`` on the raw features (inside the bounds)."""
        return [self.feature_map.weights_on_features(w) for w in self._W]

    def state_dict(self) -> dict[str, Any]:
        """A JSON-able snapshot (floats round-trip exactly through JSON)."""
        return {
            "version": STATE_VERSION,
            "learner": self.name,
            "bounds": self.feature_map.bounds.tolist(),
            "classes": self.classes,
            "margin": self.margin,
            "examples_seen": self.examples_seen,
            "mistakes": self.mistakes,
            "weights": self._W.tolist(),
        }

    @classmethod
    def from_state_dict(cls, d: dict[str, Any]) -> MulticlassPerceptron:
        """Rebuild the learner :meth:`state_dict` described, exactly."""
        try:
            if d.get("version") != STATE_VERSION or d.get("learner") != cls.name:
                raise OnlineStateError(f"not a {cls.name} state of version {STATE_VERSION}")
            learner = cls(d["bounds"], classes=d["classes"], margin=d["margin"])
            seen, mistakes = d["examples_seen"], d["mistakes"]
            if not all(type(v) is int for v in (seen, mistakes)) or not 0 <= mistakes <= seen:
                raise OnlineStateError("the state's counts must be ints with 0 <= mistakes <= examples")
            W = np.array(d["weights"], dtype=np.float64)
            if W.shape != learner._W.shape or not np.all(np.isfinite(W)):
                raise OnlineStateError(f"weights: expected {learner._W.shape} finite")
            learner.examples_seen, learner.mistakes, learner._W = seen, mistakes, W
            return learner
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, OnlineStateError):
                raise
            raise OnlineStateError(f"malformed {cls.name} state: {exc!r}") from None
