"""A private multi-class release from binary ones: one-vs-rest under a split budget.

For labels ``0..K-1``, :func:`fit_one_vs_rest` releases ``K`` halfspaces (the ``halfspaces``
learner, :mod:`privstream.learning.private_learners.halfspaces`): halfspace ``k`` separates class
``k`` from the others, learned on every row with the labels ``1[y = k]``, at ``ε/K`` (and ``δ/K``).
Every row is in all ``K`` fits, so the release is ``(ε, δ)``-DP by basic composition (Dwork &
Roth 2014, Thm 3.16): the sum of the ``K`` budgets, as :attr:`OneVsRestModel.composition` states.
The released model predicts the class whose halfspace scores highest, ``⟨w_k, u⟩ - b_k`` (each
normal of unit norm, so the scores are signed distances on the same scale): post-processing.

>>> import numpy as np
>>> from privstream.learning.randomness import seeded
>>> gen = np.random.default_rng(0)
>>> y = gen.integers(0, 3, 3000)                                   # 3 clusters in corners
>>> X = np.clip(np.array([[0.1, 0.1], [0.9, 0.1], [0.1, 0.9]])[y] + gen.normal(0, 0.15, (3000, 2)), 0, 1)
>>> model = fit_one_vs_rest(X, y, classes=3, epsilon=3.0, bounds=[[0, 1], [0, 1]], rng=seeded(1))
>>> model.epsilon_per_class, model.composition
(1.0, 'basic: 3 one-vs-rest halfspaces at ε/3 each')
>>> float(np.mean(model.predict(X) == y)) > 0.8
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privstream.learning.errors import LearningInputError
from privstream.learning.private_learners.halfspaces.model import HalfspaceModel
from privstream.learning.private_learners.vector_base import (
    VectorLearner,
    check_bounds,
    check_features,
    make_vector_learner,
)
from privstream.learning.randomness import RandomSource

__all__ = ["OneVsRestModel", "fit_one_vs_rest"]


@dataclass(frozen=True)
class OneVsRestModel:
    """``K`` released halfspaces; predicts the class of the highest score."""

    halfspaces: Sequence[HalfspaceModel]
    epsilon: float
    delta: float

    @property
    def classes(self) -> int:
        return len(self.halfspaces)

    @property
    def epsilon_per_class(self) -> float:
        return self.epsilon / self.classes

    @property
    def composition(self) -> str:
        k = self.classes
        return f"basic: {k} one-vs-rest halfspaces at ε/{k} each"

    def scores(self, X: np.ndarray) -> np.ndarray:
        """``⟨w_k, u⟩ - b_k`` per row and class (``u`` the clipped unit-box features)."""
        bounds = self.halfspaces[0].bounds
        arr = check_features(X, bounds)
        U = (arr - bounds[:, 0]) / (bounds[:, 1] - bounds[:, 0])
        out: np.ndarray = np.column_stack([U @ h.normal - h.offset for h in self.halfspaces])
        return out

    def predict(self, X: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.argmax(self.scores(X), axis=1)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "one-vs-rest",
            "halfspaces": [h.to_dict() for h in self.halfspaces],
            "epsilon": self.epsilon,
            "delta": self.delta,
            "composition": self.composition,
        }


def fit_one_vs_rest(
    X: np.ndarray,
    y: np.ndarray,
    *,
    classes: int,
    epsilon: float,
    bounds: object,
    delta: float = 0.0,
    rng: RandomSource | None = None,
    learner: VectorLearner | None = None,
) -> OneVsRestModel:
    """``classes`` halfspaces at ``epsilon/classes`` each (module docstring); ``learner``: the
    halfspace learner to use (default the registered ``halfspaces`` with its defaults)."""
    if isinstance(classes, bool) or not isinstance(classes, int) or classes < 2:
        raise LearningInputError(f"classes must be an int >= 2, got {classes!r}")
    box = check_bounds(bounds)
    labels = np.asarray(y)
    if (
        labels.ndim != 1
        or labels.dtype.kind not in "iu"
        or (labels.size and (labels.min() < 0 or labels.max() >= classes))
    ):
        raise LearningInputError(f"labels must be integers from 0 to {classes - 1}")
    learner = learner if learner is not None else make_vector_learner("halfspaces")
    models = []
    for k in range(classes):
        released = learner.fit(
            X,
            (labels == k).astype(np.uint8),
            epsilon=epsilon / classes,
            delta=delta / classes,
            bounds=box,
            rng=rng,
        )
        model = released.model
        if not isinstance(model, HalfspaceModel):  # the halfspaces learner releases halfspaces
            raise LearningInputError(f"one-vs-rest needs halfspaces, got {type(model).__name__}")
        models.append(model)
    return OneVsRestModel(tuple(models), float(epsilon), float(delta))
