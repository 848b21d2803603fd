"""What every online learner on feature vectors shares: the public feature map and the interface.

**The feature map.** A stream of feature vectors has *public* bounds ``[lo_t, hi_t]`` per feature
(configuration, never the data). An example ``x`` in ``R^d`` becomes

* ``u_t = 2 (x_t - lo_t) / (hi_t - lo_t) - 1``, clipped to ``[-1, 1]`` (each feature scaled to the
  unit interval around 0; a value outside its bounds is clipped to the nearest bound), then
* ``z = (u_1, ..., u_d, 1)``: a constant coordinate, so that a homogeneous halfspace in ``z`` is an
  arbitrary halfspace ``⟨w, u⟩ + c >= 0`` in ``u`` (``c`` the offset).

So every ``z`` lies in the ball of radius ``R = sqrt(d + 1)`` (:func:`radius`), the corner of the
box being the farthest point. Labels ``y`` in {0, 1} are read as ``s = 2y - 1`` in {-1, +1}.

**Margin.** A stream is *separable with margin* ``γ > 0`` when some unit vector ``v`` of
``R^{d+1}`` (a halfspace's normal and offset together, ``‖(w, c)‖ = 1``) has ``s·⟨v, z⟩ >= γ``
for every example. The Perceptron's theorem (:mod:`.perceptron`) bounds its mistakes by
``(R/γ)² = (d + 1)/γ²`` on such a stream, whatever its length.

>>> import numpy as np
>>> fmap = FeatureMap([[0, 10], [-1, 1]])
>>> fmap.transform(np.array([[5.0, 1.0], [20.0, -3.0]])).tolist()
[[0.0, 1.0, 1.0], [1.0, -1.0, 1.0]]
>>> radius(2), mistake_bound(2, 0.5)
(1.7320508075688772, 12)
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from privstream.learning.parameters import Range

__all__ = [
    "FeatureMap",
    "OnlineInputError",
    "OnlineLearner",
    "OnlineStateError",
    "check_labels",
    "check_margin",
    "margins",
    "mistake_bound",
    "radius",
]


class OnlineInputError(ValueError):
    """A malformed example, label or parameter (the caller's error, never a learner's)."""


class OnlineStateError(ValueError):
    """A saved state that cannot be restored (another learner, dimension or version, or malformed)."""


def radius(d: int) -> float:
    """``R = sqrt(d + 1)``: the largest norm of a mapped example ``z`` (a box corner, with the 1)."""
    return math.sqrt(d + 1)


def check_margin(margin: object) -> float:
    """A margin ``γ > 0`` (finite). Above ``R`` no stream has it (``|⟨v, z⟩| <= ‖z‖ <= R``), and the
    bound ``(R/γ)² < 1`` says so: any mistake proves it."""
    if isinstance(margin, bool) or not isinstance(margin, int | float) or not 0 < margin < math.inf:
        raise OnlineInputError(f"margin must be a positive number, got {margin!r}")
    return float(margin)


def mistake_bound(d: int, margin: float) -> int:
    """``⌊(R/γ)²⌋ = ⌊(d + 1)/γ²⌋`` in exact rational arithmetic, ``γ`` read as the decimal it is written
    as (``0.1`` is 1/10, not the binary float just above it): rounding must never cut the bound, or a
    separable stream could be reported as not separable.

    >>> mistake_bound(9, 0.1), mistake_bound(1, 1.0)
    (1000, 2)
    """
    return math.floor(Fraction(d + 1) / Fraction(repr(float(margin))) ** 2)


class FeatureMap:
    """The fixed public map ``x -> z`` of the module docstring (a function of the bounds only)."""

    def __init__(self, bounds: object) -> None:
        try:
            b = np.array(bounds, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise OnlineInputError(f"bounds must be [[lo, hi], ...] numbers: {exc}") from None
        if b.ndim != 2 or b.shape[1] != 2 or b.shape[0] < 1:
            raise OnlineInputError(f"bounds must be [[lo, hi], ...] per feature, got shape {b.shape}")
        if not np.all(np.isfinite(b)) or not np.all(b[:, 0] < b[:, 1]):
            raise OnlineInputError("every feature's bounds must be finite with lo < hi")
        self.bounds = b
        self._lo = b[:, 0]
        self._scale = 2.0 / (b[:, 1] - b[:, 0])

    @property
    def dimension(self) -> int:
        """``d``, the number of features (``z`` has ``d + 1`` coordinates)."""
        return int(self.bounds.shape[0])

    def transform(self, X: object) -> np.ndarray:
        """``z`` for each row of ``X`` (shape ``(n, d)``, or one row of length ``d``): ``(n, d + 1)``."""
        arr = np.asarray(X, dtype=np.float64)
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or arr.shape[1] != self.dimension:
            raise OnlineInputError(f"expected rows of {self.dimension} features, got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise OnlineInputError("feature values must be finite")
        z = np.empty((arr.shape[0], self.dimension + 1))
        np.multiply(arr - self._lo, self._scale, out=z[:, :-1])
        z[:, :-1] -= 1.0
        np.clip(z[:, :-1], -1.0, 1.0, out=z[:, :-1])
        z[:, -1] = 1.0
        return z

    def weights_on_features(self, v: np.ndarray) -> tuple[np.ndarray, float]:
        """A rule ``⟨v, z⟩ >= 0`` as ``⟨w, x⟩ + b >= 0`` on the raw features (inside the bounds).

        >>> w, b = FeatureMap([[0, 10]]).weights_on_features(np.array([1.0, -0.5]))
        >>> w.tolist(), b
        ([0.2], -1.5)
        """
        w = v[:-1] * self._scale
        return w, float(v[-1] - v[:-1].sum() - w @ self._lo)


def check_labels(y: object, n: int) -> np.ndarray:
    """0/1 labels as uint8 (booleans accepted), one per row."""
    arr = np.asarray(y)
    if arr.shape != (n,):
        raise OnlineInputError(f"expected {n} labels, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr.astype(np.uint8)
    if arr.dtype.kind not in "iuf" or not np.all((arr == 0) | (arr == 1)):
        raise OnlineInputError("labels must be 0 or 1")
    return arr.astype(np.uint8)


def margins(Z: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``⟨v, z⟩`` per row, computed row by row in one fixed order.

    A matrix-vector product would hand rows to BLAS kernels whose summation order depends on how
    many rows there are, so a tie could fall differently in a batch than one example at a time;
    an elementwise product reduced along each row gives every row the same float result however
    the stream is cut into batches (the learners are deterministic functions of the sequence).
    """
    out: np.ndarray = np.multiply(Z, v).sum(axis=1)
    return out


@runtime_checkable
class OnlineLearner(Protocol):
    """An online learner on feature vectors: predict each label, then learn it.

    * ``learn_one(x, y)`` predicts ``x`` with the current rule, counts a mistake if wrong, learns
      ``(x, y)`` and returns the prediction; ``learn_many(X, y)`` is the same as ``learn_one`` in a
      loop (same predictions, same final state) without the per-example Python overhead;
    * ``mistake_bound``: a bound on ``mistakes`` that holds whenever the stream is separable with
      the configured margin (``None``: the learner has no such bound);
    * ``margin_mistakes`` and ``margin_bound``: the Perceptron mistakes the margin test counts and
      ``⌊(R/γ)²⌋`` (``None``: the learner makes no such test);
    * ``realizable``: ``False`` once ``margin_mistakes > margin_bound``, which *proves* that no
      halfspace separates the stream with margin ``γ`` (``None``: no test);
    * ``state_dict()`` / ``from_state_dict(d)``: a JSON-able snapshot and its exact restoration.
    """

    name: str
    feature_map: FeatureMap
    examples_seen: int
    mistakes: int

    @property
    def mistake_bound(self) -> int | None: ...

    @property
    def margin_mistakes(self) -> int | None: ...

    @property
    def margin_bound(self) -> int | None: ...

    @property
    def realizable(self) -> bool | None: ...

    def predict_one(self, x: object) -> int: ...

    def predict_many(self, X: object) -> np.ndarray: ...

    def learn_one(self, x: object, y: int) -> int: ...

    def learn_many(self, X: object, y: object) -> np.ndarray: ...

    def weights(self) -> tuple[np.ndarray, float]: ...

    def state_dict(self) -> dict[str, Any]: ...


STATE_VERSION = 1


class LinearLearner:
    """The common part of the linear online learners: the feature map, counts, predictions from a
    score ``⟨v, z⟩`` (label 1 when it is ``>= 0``), one-at-a-time learning through the batch path,
    and the snapshot. A subclass names its float state arrays (``_arrays``), its parameters
    (``_params``) and its integer counters (``_counters``), and implements ``_scores``, ``_learn``
    and ``_rule``."""

    name = ""
    _arrays: tuple[str, ...] = ()
    _params: tuple[str, ...] = ()
    _counters: tuple[str, ...] = ()
    #: The ranges of the parameters the subclasses take (each applies where a signature names it).
    parameter_ranges: ClassVar[dict[str, Range]] = {
        "margin": Range(low=0, low_open=True),
        "learning_rate": Range(low=0, low_open=True),
        "regularizer": Range(low=0, low_open=True),
        "aggressiveness": Range(low=0, low_open=True),
    }

    def __init__(self, bounds: object) -> None:
        self.feature_map = FeatureMap(bounds)
        self.examples_seen = 0
        self.mistakes = 0

    # -- the subclass's part ---------------------------------------------------------------------
    def _scores(self, Z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _learn(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Predict each row before learning it, in order; return the predictions (uint8)."""
        raise NotImplementedError

    @property
    def mistake_bound(self) -> int | None:
        return None

    @property
    def margin_mistakes(self) -> int | None:
        return None

    @property
    def margin_bound(self) -> int | None:
        return None

    @property
    def realizable(self) -> bool | None:
        """``None`` without a margin test; else ``False`` once the test's mistakes pass its bound."""
        if self.margin_mistakes is None or self.margin_bound is None:
            return None
        return self.margin_mistakes <= self.margin_bound

    def _rule(self) -> np.ndarray:
        """The vector ``v`` of the current rule ``⟨v, z⟩ >= 0``."""
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------------
    @property
    def dimension(self) -> int:
        return self.feature_map.dimension

    def predict_many(self, X: object) -> np.ndarray:
        """The current rule's labels (uint8), without learning."""
        return (self._scores(self.feature_map.transform(X)) >= 0).astype(np.uint8)

    def predict_one(self, x: object) -> int:
        return int(self.predict_many(x)[0])

    def learn_many(self, X: object, y: object) -> np.ndarray:
        """Predict each example before learning it, in order; the predictions (uint8)."""
        Z = self.feature_map.transform(X)
        labels = check_labels(y, Z.shape[0])
        predictions = self._learn(Z, labels)
        self.mistakes += int(np.count_nonzero(predictions != labels))
        self.examples_seen += Z.shape[0]
        return predictions

    def learn_one(self, x: object, y: int) -> int:
        """Predict ``x``, count a mistake if wrong, learn ``(x, y)``; the prediction made."""
        if isinstance(y, bool) or y not in (0, 1):
            raise OnlineInputError(f"label must be 0 or 1, got {y!r}")
        return int(self.learn_many(x, np.array([y]))[0])

    def weights(self) -> tuple[np.ndarray, float]:
        """The current rule as ``⟨w, x⟩ + b >= 0`` on the raw features: ``(w, b)``."""
        return self.feature_map.weights_on_features(self._rule())

    def state_dict(self) -> dict[str, Any]:
        """A JSON-able snapshot (floats round-trip exactly through JSON); see :meth:`from_state_dict`."""
        return {
            "version": STATE_VERSION,
            "learner": self.name,
            "bounds": self.feature_map.bounds.tolist(),
            **{p: getattr(self, p) for p in self._params},
            "examples_seen": self.examples_seen,
            "mistakes": self.mistakes,
            **{c.lstrip("_"): getattr(self, c) for c in self._counters},
            **{a.lstrip("_"): getattr(self, a).tolist() for a in self._arrays},
        }

    @classmethod
    def from_state_dict(cls, d: dict[str, Any]) -> Any:
        """Rebuild the learner :meth:`state_dict` described, exactly."""
        try:
            if d.get("version") != STATE_VERSION:
                raise OnlineStateError(f"unsupported state version {d.get('version')!r}")
            if d.get("learner") != cls.name:
                raise OnlineStateError(f"the state is of learner {d.get('learner')!r}, not {cls.name!r}")
            learner = cls(d["bounds"], **{p: d[p] for p in cls._params})
            learner.examples_seen, learner.mistakes = int(d["examples_seen"]), int(d["mistakes"])
            if not 0 <= learner.mistakes <= learner.examples_seen:
                raise OnlineStateError("the state counts more mistakes than examples")
            for c in cls._counters:
                value = d[c.lstrip("_")]
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise OnlineStateError(f"{c.lstrip('_')} must be a non-negative int")
                setattr(learner, c, value)
            for a in cls._arrays:
                value = np.array(d[a.lstrip("_")], dtype=np.float64)
                if value.shape != getattr(learner, a).shape or not np.all(np.isfinite(value)):
                    raise OnlineStateError(f"{a.lstrip('_')}: expected {getattr(learner, a).shape} finite")
                setattr(learner, a, value)
            return learner
        except (KeyError, TypeError, OnlineInputError) as exc:
            raise OnlineStateError(f"malformed {cls.name} state: {exc!r}") from None
