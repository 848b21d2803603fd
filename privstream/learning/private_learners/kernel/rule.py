"""The released kernel rule ``1[⟨w, φ(u)⟩ >= b]`` on the public box: :class:`KernelModel`.

``u`` are the features mapped to the unit box with the *public* bounds (clipped to it) and ``φ``
the random Fourier features of :mod:`.features`, defined by ``(seed, frequencies, bandwidth)``.
``w`` (``2·frequencies`` weights) and ``b`` come from the ``"kernel"`` learner's DP
outputs; the model is their post-processing.

>>> m = KernelModel([[0, 10], [0, 1]], bandwidth=0.5, frequencies=2, weights=[0.5, 0.5, 0.5, 0.5], offset=0.0)
>>> m.predict(np.array([[0.0, 0.0], [10.0, 1.0]])).tolist()
[1, 0]
>>> KernelModel.from_dict(m.to_dict()) == m
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from privstream.learning.errors import HypothesisFormatError, LearningInputError
from privstream.learning.private_learners.kernel.features import FEATURE_SEED, RandomFeatures
from privstream.learning.private_learners.vector_base import check_bounds, check_features

__all__ = ["KernelModel"]


class KernelModel:
    """A released rule ``1[⟨w, φ(u)⟩ >= b]`` (``u``: clipped unit-box features; ``φ``: random features)."""

    kind = "random-features"

    def __init__(
        self,
        bounds: object,
        *,
        bandwidth: float,
        frequencies: int,
        weights: object,
        offset: float,
        seed: int = FEATURE_SEED,
    ) -> None:
        try:
            self.bounds = check_bounds(bounds)
            self.features = RandomFeatures(self.bounds.shape[0], frequencies, bandwidth, seed)
            w = np.array(weights, dtype=np.float64)
            b = float(offset)
        except (TypeError, ValueError, LearningInputError) as exc:
            raise HypothesisFormatError(f"malformed {self.kind} model: {exc}") from None
        if w.shape != (self.features.size,) or not np.all(np.isfinite(w)) or not math.isfinite(b):
            raise HypothesisFormatError(
                f"a {self.kind} model needs {self.features.size} finite weights and a finite offset"
            )
        self.weights, self.offset = w, b

    def scores(self, X: np.ndarray) -> np.ndarray:
        """``⟨w, φ(u)⟩`` per row of raw features ``X`` (clipped to the bounds)."""
        arr = check_features(X, self.bounds)
        lo, hi = self.bounds[:, 0], self.bounds[:, 1]
        U = (arr - lo) / (hi - lo)
        return self.features.scores(U, self.weights)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return (self.scores(X) >= self.offset).astype(np.uint8)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "bounds": self.bounds.tolist(),
            "seed": self.features.seed,
            "frequencies": self.features.frequencies,
            "bandwidth": self.features.bandwidth,
            "weights": self.weights.tolist(),
            "offset": self.offset,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KernelModel:
        try:
            if d["kind"] != cls.kind:
                raise HypothesisFormatError(f"not a {cls.kind} model")
            return cls(
                d["bounds"],
                bandwidth=d["bandwidth"],
                frequencies=d["frequencies"],
                weights=d["weights"],
                offset=d["offset"],
                seed=d["seed"],
            )
        except (KeyError, TypeError) as exc:
            raise HypothesisFormatError(f"malformed {cls.kind} model: {exc}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KernelModel) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.features.seed, self.features.bandwidth, self.offset, tuple(self.weights.tolist())))
