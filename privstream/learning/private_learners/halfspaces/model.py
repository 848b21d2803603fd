"""The released halfspace ``1[⟨w, u⟩ >= b]`` on the public box: :class:`HalfspaceModel`.

``u = (x - lo)/(hi - lo)`` are the features mapped to the unit box with the *public* bounds
(clipped to it); the model is the public release of the ``"halfspaces"`` learner, a function of
its mechanisms' outputs only.

>>> m = HalfspaceModel([[0, 10], [0, 1]], [0.6, 0.8], 0.5)
>>> m.predict(np.array([[10.0, 0.0], [0.0, 0.0]])).tolist()
[1, 0]
>>> HalfspaceModel.from_dict(m.to_dict()) == m
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from privstream.learning.errors import HypothesisFormatError, LearningInputError
from privstream.learning.private_learners.vector_base import check_bounds, check_features

__all__ = ["HalfspaceModel"]


class HalfspaceModel:
    """A released halfspace ``1[⟨w, u⟩ >= b]`` on the public box (``u`` the clipped unit-box features)."""

    kind = "halfspace"

    def __init__(self, bounds: object, normal: object, offset: float) -> None:
        try:
            self.bounds = check_bounds(bounds)
            w = np.array(normal, dtype=np.float64)
            b = float(offset)
        except (TypeError, ValueError, LearningInputError) as exc:
            raise HypothesisFormatError(f"malformed {self.kind} model: {exc}") from None
        if w.shape != (self.bounds.shape[0],) or not np.all(np.isfinite(w)) or not math.isfinite(b):
            raise HypothesisFormatError(
                f"a {self.kind} needs {self.bounds.shape[0]} finite weights and a finite offset"
            )
        self.normal, self.offset = w, b

    def predict(self, X: np.ndarray) -> np.ndarray:
        arr = check_features(X, self.bounds)
        lo, hi = self.bounds[:, 0], self.bounds[:, 1]
        labels: np.ndarray = ((arr - lo) / (hi - lo) @ self.normal >= self.offset).astype(np.uint8)
        return labels

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "bounds": self.bounds.tolist(),
            "normal": self.normal.tolist(),
            "offset": self.offset,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HalfspaceModel:
        try:
            if d["kind"] != cls.kind:
                raise HypothesisFormatError(f"not a {cls.kind} model")
            return cls(d["bounds"], d["normal"], d["offset"])
        except (KeyError, TypeError) as exc:
            raise HypothesisFormatError(f"malformed {cls.kind} model: {exc}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HalfspaceModel) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((tuple(self.normal.tolist()), self.offset))
