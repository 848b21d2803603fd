"""The interface of private learners on feature VECTORS: :class:`VectorLearner`, :func:`make_vector_learner`.

The finite-class learners of :mod:`~privstream.learning.private_learners.base` take integer domain
points; the learners here take rows of real features ``X`` (shape ``(n, d)``) inside *public*
feature bounds (shape ``(d, 2)``), never derived from the data.

Privacy is stated under *replace-one* neighbours over rows when n is public (``expected_size=None``;
a replaced row may also change from labelled to unlabelled, so the number of labelled rows is
private), and under *add/remove-one* neighbours when n is private (``expected_size=m``: every
reported field then depends on the configuration and m only), exactly as for the finite-class
learners (:mod:`~privstream.learning.private_learners.base`). Every learner takes zero rows.

Feature values outside the public bounds are **clipped** to them (a fixed per-row map, so privacy
is unaffected); there is no "reject" policy inside a learner, because a refusal that depends on
the data would leak it. Finite values and the row length are validated before windowing.

* ``fit(X, y, *, epsilon, delta, bounds, rng=None, expected_size=None) -> VectorLearnerResult``;
  ``y`` is 0/1 with ``-1`` (integer arrays) or ``NaN`` (float arrays) marking unlabelled rows.
* ``result.model`` is the *public* predictor: ``predict(X) -> uint8``, ``to_dict()`` (canonical
  JSON: equal models give equal dicts) and :func:`vector_model_from_dict` to read it back. It is
  a function of the mechanism's DP output only.
* :data:`VECTOR_LEARNERS`: ``"bayes-consistent"``, ``"semi-supervised"``, ``"halfspaces"`` and ``"kernel"``.

>>> sorted(VECTOR_LEARNERS)
['bayes-consistent', 'halfspaces', 'kernel', 'semi-supervised']
>>> make_vector_learner("bayes-consistent").name
'bayes-consistent'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from privstream.learning import algorithms as registry
from privstream.learning.errors import LabelError, LearningInputError
from privstream.learning.private_learners.base import PrivateRelease
from privstream.learning.randomness import RandomSource

__all__ = [
    "VECTOR_LEARNERS",
    "VECTOR_MODELS",
    "BoundsError",
    "VectorLearner",
    "VectorLearnerResult",
    "VectorModel",
    "check_bounds",
    "check_features",
    "is_vector_model_dict",
    "make_vector_learner",
    "row_products",
    "split_labels",
    "vector_model_from_dict",
]


class BoundsError(LearningInputError):
    """Missing or malformed public feature bounds (a configuration error, never a data one)."""


@runtime_checkable
class VectorModel(Protocol):
    """A released predictor on feature vectors (a function of DP outputs only)."""

    kind: str

    def predict(self, X: np.ndarray) -> np.ndarray: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True, kw_only=True)
class VectorLearnerResult(PrivateRelease):
    """One private release of a vector learner: its ``model`` and guarantees (:class:`PrivateRelease`).

    ``accuracy_guarantee_holds`` is ``None`` when deciding it would need a private quantity
    (the number of labelled rows) or when the theorem gives no finite sample size (universal
    consistency has no rate: [B Def 1.4]). ``theorem`` cites the theorem and ``guarantee`` states
    it in words; the certificate carries both among its parameters.
    """

    model: VectorModel
    proper: bool
    theorem: str
    guarantee: str

    @property
    def hypothesis_class(self) -> str:
        """Class label for a release: ``"<class>:<d>"`` (``any`` for improper universal learners)."""
        d = len(self.parameters.get("bounds", ()))
        return f"{self.parameters.get('hypothesis_class', 'any')}:{d}"

    def certificate_fields(self) -> dict[str, Any]:
        fields = super().certificate_fields()
        fields["parameters"].update(theorem=self.theorem, guarantee=self.guarantee)
        return {**fields, "proper": self.proper}

    def published_fields(self) -> dict[str, Any]:
        return {"hypothesis": self.model.to_dict()}


@runtime_checkable
class VectorLearner(Protocol):
    """A differentially-private learner on feature vectors; all randomness from ``rng``.

    ``rng=None`` means a fresh cryptographically secure source (production). ``expected_size``:
    None when n is public (replace-one), the operator's m when n is private (add/remove-one).
    """

    name: str

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
    ) -> VectorLearnerResult: ...


#: Learners by name -> ``"module:Factory"``: the registry's ``vector-learner`` entry points.
VECTOR_LEARNERS: MutableMapping[str, str] = registry.names("vector-learner")

#: Released model kinds -> ``"module:Class"`` with a ``from_dict`` classmethod (``vector-model``).
VECTOR_MODELS: MutableMapping[str, str] = registry.names("vector-model")


def configuration_error(
    name: str, params: dict[str, Any], *, features: int, sizes: Sequence[int], delta: float
) -> str | None:
    """Why the vector learner ``name`` (built with ``params``) cannot run on a stream of
    ``features`` features whose nodes hold the public sizes ``sizes`` (n, or the expected size where
    n is private) at ``delta``: one line naming what to change, or ``None`` if it can. A function
    of public configuration only, asked before any example arrives; a learner without the check
    (no ``configuration_error`` method) runs on every configuration.

    >>> configuration_error("bayes-consistent", {}, features=49, sizes=[2000], delta=0.0)[:54]
    'bayes-consistent on 49 features needs K^d = 2^49 cubes'
    >>> configuration_error("halfspaces", {}, features=49, sizes=[2000], delta=0.0) is None
    True
    """
    learner = make_vector_learner(name, **params)
    check = getattr(learner, "configuration_error", None)
    if check is None:
        return None
    reason: str | None = check(features=features, sizes=list(sizes), delta=float(delta))
    return reason


def make_vector_learner(name: str, **params: Any) -> VectorLearner:
    """The vector learner registered as ``name``, built with ``params``.

    >>> make_vector_learner("svm")
    Traceback (most recent call last):
    ...
    ValueError: unknown vector learner 'svm'; known: bayes-consistent, halfspaces, kernel, semi-supervised
    """
    if not isinstance(name, str) or name not in VECTOR_LEARNERS:
        raise ValueError(f"unknown vector learner {name!r}; known: {', '.join(sorted(VECTOR_LEARNERS))}")
    learner: VectorLearner = registry.load("vector-learner", name)(**params)  # the registry's promise
    return learner


def is_vector_model_dict(d: object) -> bool:
    """Whether ``d`` claims to be a serialised vector model (by its ``kind``)."""
    return isinstance(d, Mapping) and d.get("kind") in VECTOR_MODELS


def vector_model_from_dict(d: Mapping[str, Any]) -> VectorModel:
    """Read back a model written by ``model.to_dict()``; raises ``HypothesisFormatError`` if malformed."""
    from privstream.learning.errors import HypothesisFormatError

    kind = d.get("kind") if isinstance(d, Mapping) else None
    if not isinstance(kind, str) or kind not in VECTOR_MODELS:
        raise HypothesisFormatError(f"unknown vector model kind {kind!r}")
    model: VectorModel = registry.load("vector-model", kind).from_dict(d)  # the registry's promise
    return model


# -- shared input validation ------------------------------------------------------------------


def check_bounds(bounds: object, d: int | None = None) -> np.ndarray:
    """Public bounds as a float ``(d, 2)`` array with finite ``lo < hi`` per feature.

    >>> check_bounds([[0, 1], [-2, 2]]).tolist()
    [[0.0, 1.0], [-2.0, 2.0]]
    """
    if bounds is None:
        raise BoundsError("public feature bounds are required (never derived from the data)")
    try:
        b = np.array(bounds, dtype=np.float64)
    except (TypeError, ValueError):
        raise BoundsError(f"bounds must be numbers [[lo, hi], ...], got {bounds!r}") from None
    if b.ndim != 2 or b.shape[1] != 2 or b.shape[0] < 1:
        raise BoundsError(f"bounds must have shape (d, 2), got {b.shape}")
    if d is not None and b.shape[0] != d:
        raise BoundsError(f"{b.shape[0]} bounds for {d} features")
    if not np.all(np.isfinite(b)) or not np.all(b[:, 0] < b[:, 1]):
        raise BoundsError("every bound must be finite with lo < hi")
    return b


def check_features(X: object, bounds: np.ndarray) -> np.ndarray:
    """``X`` as a float ``(n, d)`` array, each value clipped into ``bounds``; zero rows are fine.

    >>> check_features([], np.array([[0.0, 1.0], [0.0, 1.0]])).shape
    (0, 2)
    >>> check_features([[2.0, -1.0]], np.array([[0.0, 1.0], [0.0, 1.0]])).tolist()
    [[1.0, 0.0]]
    """
    try:
        arr = np.array(X, dtype=np.float64)
    except (TypeError, ValueError):
        raise LearningInputError("features must be real numbers") from None
    if arr.size == 0:  # an empty window: whatever its shape, zero rows of the public dimension
        return np.zeros((0, bounds.shape[0]), dtype=np.float64)
    if arr.ndim != 2:
        raise LearningInputError(f"features must have shape (n, d), got {arr.shape}")
    if arr.shape[1] != bounds.shape[0]:
        raise BoundsError(f"{bounds.shape[0]} bounds for {arr.shape[1]} features")
    if not np.all(np.isfinite(arr)):
        raise LearningInputError("features must be finite (no NaN or infinity)")
    return np.clip(arr, bounds[:, 0], bounds[:, 1])


def split_labels(y: object, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(labels uint8, labelled mask)``: 0/1 labels, with -1 or NaN marking unlabelled rows."""
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise LabelError(f"expected {n} labels in a 1-D array, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr.astype(np.uint8), np.ones(n, dtype=bool)
    if arr.dtype.kind == "f":
        labelled = ~np.isnan(arr)
        vals = arr[labelled]
        if vals.size and not np.all((vals == 0) | (vals == 1)):
            raise LabelError("labels must be 0, 1 or NaN (unlabelled)")
        out = np.zeros(n, dtype=np.uint8)
        out[labelled] = vals.astype(np.uint8)
        return out, labelled
    if arr.dtype.kind in "iu":
        if arr.size and not np.all((arr == 0) | (arr == 1) | (arr == -1)):
            raise LabelError("labels must be 0, 1 or -1 (unlabelled)")
        labelled = arr != -1
        return np.where(labelled, arr, 0).astype(np.uint8), labelled
    raise LabelError(f"labels must be an integer or float array, got dtype {arr.dtype}")


def row_products(rows: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``rows @ right`` (a matrix or a vector), each row's result summed in one fixed order.

    A learner that counts errors row by row (each row moving each count by at most one) must get
    the same floating-point result for a row whatever other rows share the product: BLAS may sum
    in another order for a block of another size (a single row goes through another kernel), and
    a neighbouring dataset could then move *another* row across a threshold. ``einsum`` without
    BLAS sums each row in the order of its entries.

    >>> rows = np.random.default_rng(0).random((50, 8)); m = np.random.default_rng(1).random((8, 3))
    >>> bool(np.array_equal(row_products(rows, m)[7:], row_products(rows[7:], m)))
    True
    >>> bool(np.array_equal(row_products(rows, m)[3], row_products(rows[3:4], m)[0]))
    True
    """
    products: np.ndarray = np.einsum("ij,j...->i...", rows, right, optimize=False)
    return products


def finite_epsilon(epsilon: object) -> float:
    """ε as a finite float > 0."""
    from privstream.learning.private_learners.base import check_privacy_parameters

    eps, _ = check_privacy_parameters(epsilon, 0.0)
    if not math.isfinite(eps):  # pragma: no cover - check_privacy_parameters rejects it
        raise ValueError("epsilon must be finite")
    return eps
