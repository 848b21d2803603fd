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

:class:`OneVsRestLearner` is the same release as a vector learner (``fit(X, y, epsilon=..., ...)``
giving a :class:`~privstream.learning.private_learners.vector_base.VectorLearnerResult`), which a
stream of K classes releases with: its certificate states the composition and each class's budget.
Each class's ε is ``ε/K`` rounded *down* to a float, so that the K budgets never sum past ε.

>>> result = OneVsRestLearner(3).fit(X, y, epsilon=1.0, bounds=np.array([[0, 1], [0, 1]]), rng=seeded(1))
>>> result.epsilon, result.parameters["classes"], result.parameters["composition"]
(1.0, 3, 'basic: 3 one-vs-rest halfspaces at ε/3 each')
>>> from privstream.learning.private_learners.vector_base import vector_model_from_dict
>>> vector_model_from_dict(result.model.to_dict()) == result.model
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from privstream.learning.errors import HypothesisFormatError, LearningInputError
from privstream.learning.private_learners.halfspaces.model import HalfspaceModel
from privstream.learning.private_learners.vector_base import (
    VectorLearner,
    VectorLearnerResult,
    check_bounds,
    check_features,
    finite_epsilon,
    make_vector_learner,
)
from privstream.learning.randomness import RandomSource

__all__ = ["BASE_LEARNER", "MAX_CLASSES", "OneVsRestLearner", "OneVsRestModel", "fit_one_vs_rest", "share"]

#: The most classes a release covers (labels fit a byte, as the service carries them).
MAX_CLASSES = 256
#: The vector learner whose releases have class scores: the one a stream of K classes names.
BASE_LEARNER = "halfspaces"


@dataclass(frozen=True)
class OneVsRestModel:
    """``K`` released halfspaces; predicts the class of the highest score."""

    halfspaces: Sequence[HalfspaceModel]
    epsilon: float
    delta: float

    kind = "one-vs-rest"

    @property
    def classes(self) -> int:
        return len(self.halfspaces)

    @property
    def epsilon_per_class(self) -> float:
        return share(self.epsilon, self.classes)

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
        """The class of the highest score per row (a tie goes to the smallest class)."""
        out: np.ndarray = np.argmax(self.scores(X), axis=1).astype(np.uint8)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "halfspaces": [h.to_dict() for h in self.halfspaces],
            "epsilon": self.epsilon,
            "delta": self.delta,
            "composition": self.composition,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OneVsRestModel:
        """Read back :meth:`to_dict`; ``HypothesisFormatError`` if malformed."""
        try:
            if d["kind"] != cls.kind:
                raise HypothesisFormatError(f"not a {cls.kind} model")
            halfspaces = tuple(HalfspaceModel.from_dict(h) for h in d["halfspaces"])
            epsilon, delta = float(d["epsilon"]), float(d["delta"])
        except (KeyError, TypeError, ValueError) as exc:
            raise HypothesisFormatError(f"malformed {cls.kind} model: {exc!r}") from None
        if not 2 <= len(halfspaces) <= MAX_CLASSES or len({h.bounds.tobytes() for h in halfspaces}) != 1:
            raise HypothesisFormatError(f"a {cls.kind} model needs 2 to {MAX_CLASSES} halfspaces of one box")
        if not (math.isfinite(epsilon) and epsilon > 0 and 0 <= delta < 1):
            raise HypothesisFormatError(f"a {cls.kind} model needs epsilon > 0 and delta in [0, 1)")
        return cls(halfspaces, epsilon, delta)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OneVsRestModel) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.classes, self.epsilon, self.delta))


def share(budget: float, classes: int) -> float:
    """``budget / classes`` rounded down to a float: ``classes`` shares never sum past ``budget``.

    >>> share(1.0, 3), Fraction(share(1.0, 3)) * 3 <= 1, share(2.0, 4)
    (0.3333333333333333, True, 0.5)
    """
    part = budget / classes
    while part > 0 and Fraction(part) * classes > Fraction(budget):
        part = math.nextafter(part, 0.0)
    return part


def check_classes(classes: object) -> int:
    """``K``: an int from 2 to :data:`MAX_CLASSES`."""
    if isinstance(classes, bool) or not isinstance(classes, int) or not 2 <= classes <= MAX_CLASSES:
        raise LearningInputError(f"classes must be an int from 2 to {MAX_CLASSES}, got {classes!r}")
    return classes


def check_class_labels(y: object, classes: int) -> np.ndarray:
    """The labels as integers ``0..classes-1`` (a 1-D integer array)."""
    labels = np.asarray(y)
    if (
        labels.ndim != 1
        or labels.dtype.kind not in "iu"
        or (labels.size and (labels.min() < 0 or labels.max() >= classes))
    ):
        raise LearningInputError(f"labels must be integers from 0 to {classes - 1}")
    return labels


def _fits(
    learner: VectorLearner,
    X: np.ndarray,
    labels: np.ndarray,
    classes: int,
    epsilon: float,
    delta: float,
    box: np.ndarray,
    rng: RandomSource | None,
    expected_size: int | None,
) -> list[tuple[VectorLearnerResult, HalfspaceModel]]:
    """Class ``k`` against the rest on every row, ``k = 0..K-1``, each at its share of the budget:
    each release with its halfspace."""
    options: dict[str, Any] = {"expected_size": expected_size} if expected_size is not None else {}
    eps, dlt = share(epsilon, classes), share(delta, classes) if delta else 0.0
    results = []
    for k in range(classes):
        released = learner.fit(
            X, (labels == k).astype(np.uint8), epsilon=eps, delta=dlt, bounds=box, rng=rng, **options
        )
        model = released.model
        if not isinstance(model, HalfspaceModel):  # the halfspaces learner releases halfspaces
            raise LearningInputError(f"one-vs-rest needs halfspaces, got {type(model).__name__}")
        results.append((released, model))
    return results


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
    labels = check_class_labels(y, classes)
    learner = learner if learner is not None else make_vector_learner(BASE_LEARNER)
    fits = _fits(learner, X, labels, classes, float(epsilon), float(delta), box, rng, None)
    return OneVsRestModel(tuple(model for _, model in fits), float(epsilon), float(delta))


class OneVsRestLearner:
    """A vector learner of the labels ``0..classes-1``: ``classes`` one-vs-rest fits of ``base`` (a
    halfspace learner, by default the registered ``halfspaces``) at ``ε/K`` and ``δ/K`` each."""

    name = "one-vs-rest"

    def __init__(self, classes: int, base: VectorLearner | None = None) -> None:
        self.classes = check_classes(classes)
        self.base = base if base is not None else make_vector_learner(BASE_LEARNER)

    def configuration_error(self, *, features: int, sizes: list[int], delta: float) -> str | None:
        """The base learner's refusal at each class's share of δ (``None``: it can run)."""
        check = getattr(self.base, "configuration_error", None)
        if check is None:
            return None
        reason: str | None = check(features=features, sizes=sizes, delta=share(delta, self.classes))
        return reason

    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        *,
        epsilon: float,
        delta: float = 0.0,
        bounds: np.ndarray,
        rng: RandomSource | None = None,
        expected_size: int | None = None,
    ) -> VectorLearnerResult:
        eps, K = finite_epsilon(epsilon), self.classes
        box = check_bounds(bounds)
        labels = check_class_labels(y, K)
        fits = _fits(self.base, X, labels, K, eps, float(delta), box, rng, expected_size)
        results = [r for r, _ in fits]
        first = results[0]
        model = OneVsRestModel(tuple(m for _, m in fits), eps, float(delta))
        spent_eps = sum((Fraction(r.epsilon) for r in results), Fraction(0))
        spent_delta = sum((Fraction(r.delta) for r in results), Fraction(0))
        if spent_eps > Fraction(eps) or spent_delta > Fraction(float(delta)):  # pragma: no cover
            raise LearningInputError("one-vs-rest: the classes' budgets sum past the release's")
        parameters: dict[str, Any] = {
            "hypothesis_class": "one-vs-rest",
            "classes": K,
            "class_learner": getattr(self.base, "name", type(self.base).__name__),
            "composition": model.composition,
            "epsilon_per_class": first.epsilon,
            "delta_per_class": first.delta,
            "class_parameters": first.parameters,  # functions of public figures: the same for every class
            "bounds": box.tolist(),
            "out_of_bounds": "clip",
            "prediction": "the class of the highest signed distance <w_k, u> - b_k (ties: the smallest k)",
        }
        dp_outputs = {f"class_{k}": r.dp_outputs for k, r in enumerate(results) if r.dp_outputs}
        return VectorLearnerResult(  # (ε, δ): the charge, which the K shares never pass
            model=model,
            mechanism=f"one-vs-rest({first.mechanism})",
            epsilon=eps,
            delta=float(delta),
            proper=False,
            sample_size=first.sample_size,
            parameters=parameters,
            theorem=f"basic composition (Dwork & Roth 2014, Thm 3.16) of {K} fits of {first.mechanism}, "
            "each on every row with the labels 1[y = k]",
            guarantee=(
                f"({eps:g}, {float(delta):g})-DP ({first.neighbouring_relation}): "
                f"{K} fits at ({first.epsilon:g}, {first.delta:g}) each; no accuracy theorem for the "
                "class of the highest score"
            ),
            theorem_sample_size=None,
            accuracy_guarantee_holds=None,
            neighbouring_relation=first.neighbouring_relation,
            privacy=first.privacy,
            dp_outputs=dp_outputs,
        )
