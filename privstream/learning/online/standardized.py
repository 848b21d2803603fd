"""Online linear learners on standardized features: running means and variances, then a step.

On the mapped examples ``z`` (:mod:`.base`), each example first updates the running mean ``μ``
and (population) variance ``σ²`` of every feature (from running sums of ``z`` and ``z²``), is standardized,
``s_t = (z_t - μ_t)/σ_t`` (``0`` where ``σ_t = 0``), and predicted 1 when ``⟨w, s⟩ + b >= 0``;
then the learner takes its step on ``(s, y)`` (``t = 2y - 1``, ``m = ⟨w, s⟩ + b``):

* ``scaled-logistic`` (River's ``StandardScaler() | LogisticRegression()``): one SGD step on the
  log loss, ``w <- w - η (σ(m) - y) s``, ``b <- b - η (σ(m) - y)``, constant ``η``
  (``learning_rate``, 0.01);
* ``scaled-passive-aggressive`` (River's ``StandardScaler() | PAClassifier()``; PA-I of Crammer,
  Dekel, Keshet, Shalev-Shwartz & Singer, JMLR 2006): on a hinge loss ``ℓ = max(0, 1 - t m)``,
  ``τ = min(C, ℓ/‖s‖²)``, ``w <- w + τ t s``, ``b <- b + τ t`` (``aggressiveness`` ``C``, 1).

**Why.** The public bounds fix where a feature lies in ``[-1, 1]``, not how it spreads: a feature
whose values crowd into a corner of its bounds (a skewed count, a rare flag) gets tiny steps
under the plain map. Standardizing by the stream's own running moments gives every feature unit
spread whatever the bounds, which makes these learners steady across orders of a noisy stream.
The moments are statistics of the raw examples: they live in the online learner's state, in the
trusted zone, like everything else of it.

**Order.** An example's prediction uses the moments *before* it (predict, then learn); its step
uses the moments *after* it, as River's pipeline does.

They learn from every example: no mistake bound, no margin test (``mistake_bound`` and
``realizable`` are ``None``). The batch path is a loop.

>>> import numpy as np
>>> gen = np.random.default_rng(0)
>>> X = gen.uniform(0, 1, (3000, 3)) ** 6 * 100    # crowded near the lower bound of [0, 100]
>>> y = (X @ [1.0, -1.0, 0.5] > 0.3).astype(int)
>>> flip = gen.random(3000) < 0.1; y[flip] = 1 - y[flip]
>>> from privstream.learning.online.perceptron import Perceptron
>>> lr, pa = ScaledLogistic([[0, 100]] * 3), ScaledPassiveAggressive([[0, 100]] * 3)
>>> plain = Perceptron([[0, 100]] * 3)
>>> _ = lr.learn_many(X, y), pa.learn_many(X, y), plain.learn_many(X, y)
>>> lr.mistake_bound, lr.realizable, lr.mistakes < 0.8 * plain.mistakes, pa.mistakes < plain.mistakes
(None, None, True, True)
"""

from __future__ import annotations

import math

import numpy as np

from privstream.learning.online.base import LinearLearner, OnlineInputError, margins

__all__ = ["ScaledLogistic", "ScaledPassiveAggressive"]


def _positive(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise OnlineInputError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _sigmoid(m: float) -> float:
    """``σ(m)``, computed without overflow for large ``|m|``."""
    if m >= 0:
        return 1.0 / (1.0 + math.exp(-m))
    e = math.exp(m)
    return e / (1.0 + e)


#: A variance at most this is a constant feature (``z`` lies in ``[-1, 1]``: no real spread is smaller).
TINY_VARIANCE = 1e-12


class Standardized(LinearLearner):
    """The running moments, the standardized rule and the loop; a subclass gives the step.

    The moments are kept as running sums of ``z`` and ``z²`` (and their count), accumulated in
    arrival order (``numpy.cumsum`` over the saved sums and the block: the same additions whether
    the examples come one by one or in batches), so a block's standardized rows are computed at
    once and the loop is the steps alone."""

    _arrays = ("_w", "_sum", "_sumsq")
    _counters = ("_count",)

    def __init__(self, bounds: object) -> None:
        super().__init__(bounds)
        p = self.dimension + 1
        self._w = np.zeros(p)  # the weights on s; the last coordinate is the intercept b
        self._sum = np.zeros(p)  # Σ z over the examples learned
        self._sumsq = np.zeros(p)  # Σ z² over them
        self._count = 0

    @staticmethod
    def standardize(Z: np.ndarray, sums: np.ndarray, sumsq: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Row ``i`` of ``Z`` standardized by the moments ``sums[i]/counts[i]`` (and ``sumsq``): ``s``
        with the constant 1 last (a feature of no spread, or no moments yet, standardizes to 0)."""
        c = np.maximum(counts, 1).astype(np.float64)[:, None]
        mean = sums / c
        variance = sumsq / c - mean * mean
        spread = (variance > TINY_VARIANCE) & (counts[:, None] > 0)
        S = np.where(spread, (Z - mean) / np.sqrt(np.where(spread, variance, 1.0)), 0.0)
        S[:, -1] = 1.0
        return S

    def _scores(self, Z: np.ndarray) -> np.ndarray:
        n = Z.shape[0]
        counts = np.full(n, self._count)
        S = self.standardize(Z, np.tile(self._sum, (n, 1)), np.tile(self._sumsq, (n, 1)), counts)
        return margins(S, self._w)

    def _rule(self) -> np.ndarray:
        """``⟨w, (z - μ)/σ⟩ + b`` as one vector on ``z`` (its last coordinate multiplies the 1)."""
        c = max(self._count, 1)
        mean = self._sum / c
        variance = self._sumsq / c - mean * mean
        spread = (variance > TINY_VARIANCE) & (self._count > 0)
        inverse = np.where(spread, 1.0 / np.sqrt(np.where(spread, variance, 1.0)), 0.0)
        v: np.ndarray = self._w * inverse
        v[-1] = self._w[-1] - float(np.multiply(v[:-1], mean[:-1]).sum())
        return v

    def _step(self, s: np.ndarray, m: float, y: int) -> None:
        raise NotImplementedError

    def _learn(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        n = Z.shape[0]
        # Running sums before and after each row, in arrival order from the saved ones.
        sums = np.cumsum(np.vstack([self._sum, Z]), axis=0)
        sumsq = np.cumsum(np.vstack([self._sumsq, Z * Z]), axis=0)
        counts = self._count + np.arange(n + 1)
        before = self.standardize(Z, sums[:-1], sumsq[:-1], counts[:-1])  # what predicts row i
        after = self.standardize(Z, sums[1:], sumsq[1:], counts[1:])  # what row i's step sees
        predictions = np.empty(n, dtype=np.uint8)
        for i in range(n):
            predictions[i] = margins(before[i : i + 1], self._w)[0] >= 0
            s = after[i]
            self._step(s, float(margins(after[i : i + 1], self._w)[0]), int(y[i]))
        self._sum, self._sumsq, self._count = sums[-1].copy(), sumsq[-1].copy(), self._count + n
        return predictions


class ScaledLogistic(Standardized):
    """Logistic regression on standardized features, SGD steps of constant size ``learning_rate``."""

    name = "scaled-logistic"
    _params = ("learning_rate",)

    def __init__(self, bounds: object, learning_rate: float = 0.01) -> None:
        super().__init__(bounds)
        self.learning_rate = _positive("learning_rate", learning_rate)

    def _step(self, s: np.ndarray, m: float, y: int) -> None:
        self._w -= (self.learning_rate * (_sigmoid(m) - y)) * s


class ScaledPassiveAggressive(Standardized):
    """PA-I on standardized features, steps capped at ``aggressiveness`` (``C``)."""

    name = "scaled-passive-aggressive"
    _params = ("aggressiveness",)

    def __init__(self, bounds: object, aggressiveness: float = 1.0) -> None:
        super().__init__(bounds)
        self.aggressiveness = _positive("aggressiveness", aggressiveness)

    def _step(self, s: np.ndarray, m: float, y: int) -> None:
        t = 1.0 if y else -1.0
        loss = max(0.0, 1.0 - t * m)
        norm = float(np.multiply(s[:-1], s[:-1]).sum())  # the intercept's 1 is not in the norm
        if loss > 0 and norm > 0:
            self._w += (min(self.aggressiveness, loss / norm) * t) * s
