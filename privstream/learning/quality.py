"""A private measure of a release's quality: its error on labelled examples it never saw, with a
confidence interval.

A release is scored on fresh examples (in the service: the next window's). The **error count**
``e = #{i : h(x_i) != y_i}`` moves by at most 1 when one example is added, removed or replaced, and
the **size** ``n`` by at most 1 when one is added or removed (not at all when one is replaced).

* **Size public** (a count window, whose size is configured): only the count is released,
  ``ẽ = e + Z`` with ``Z ~ DLap(1/ε)``: ε-DP (the discrete Laplace mechanism, Ghosh, Roughgarden and
  Sundararajan 2009; Dwork and Roth 2014, Thm 3.6), for either neighbouring relation.
* **Size private** (a time window): the pair ``(e, n)`` has ℓ1-sensitivity 2 under add/remove-one
  (both move by 1), so ``(e + Z₁, n + Z₂)`` with ``Z₁, Z₂ ~ DLap(2/ε)`` independent is ε-DP; under
  replace-one only ``e`` moves, and the same release is (ε/2)-DP. The estimate and its interval are
  post-processing of the noisy pair.

**The interval.** For ``Z ~ DLap(t)``, ``Pr[|Z| >= k] = 2 q^k / (1 + q)`` with ``q = e^{-1/t}``; the
least ``k`` with that at most ``β`` bounds the noise with probability ``>= 1 - β``. Over the noise
(``β/2``, split over the released coordinates) the window's error rate ``e/n`` lies in
``[(ẽ - k)/(ñ + k), (ẽ + k)/(ñ - k)]`` (clipped to [0, 1]); if the examples are i.i.d. draws from the
distribution the release will be used on, Hoeffding's inequality (``β/2``) widens it by
``sqrt(ln(4/β) / (2 n_low))`` to an interval for the release's **true** error, where ``n_low`` is
the size's lower bound. Both statements hold together with probability ``>= 1 - β`` (a union bound).

>>> from privstream.learning.randomness import seeded
>>> predictions, labels = [0] * 900 + [1] * 100, [0] * 1000        # 100 mistakes in 1,000
>>> q = estimate_error(predictions, labels, epsilon=1.0, size_public=True, rng=seeded(1))
>>> q.size, q.epsilon, 0.09 <= q.error <= 0.11, q.low <= 0.1 <= q.high, q.confidence
(1000, 1.0, True, True, 0.95)
>>> p = estimate_error(predictions, labels, epsilon=1.0, size_public=False, rng=seeded(1))
>>> p.size is None and p.noisy_size is not None, p.high - p.low > q.high - q.low   # n noisy too
(True, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from privstream.learning.errors import LearningInputError, PrivacyParameterError
from privstream.learning.guarantees import Guarantee
from privstream.learning.mechanisms import DiscreteLaplaceMechanism
from privstream.learning.randomness import RandomSource

__all__ = ["QualityEstimate", "estimate_error", "noise_bound", "quality_guarantee"]

#: The interval's default confidence, 1 - β.
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class QualityEstimate:
    """A release's private error estimate: ``error`` (clipped to [0, 1]) and the interval
    ``[low, high]`` holding its true error with probability ``confidence`` (i.i.d. examples)."""

    error: float
    low: float
    high: float
    confidence: float
    epsilon: float
    noisy_errors: int
    size: int | None  # the public size, or None where it is private
    noisy_size: int | None  # the released noisy size where the size is private

    def to_dict(self) -> dict[str, float | int | None]:
        """The JSON form published with a release."""
        return {
            "error": self.error,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "epsilon": self.epsilon,
            "noisy_errors": self.noisy_errors,
            "size": self.size,
            "noisy_size": self.noisy_size,
        }


def quality_guarantee(epsilon: float) -> Guarantee:
    """What one estimate costs the rows it is computed on: ε-DP under add/remove-one (pure: no δ),
    whether the size is public or private; with the size public it is ε-DP under replace-one too.

    >>> quality_guarantee(0.5)
    Guarantee(epsilon=0.5, delta=0.0, relation='add-remove-one', unit='row', derivation=())
    """
    claim = _mechanism(epsilon, size_public=False, rng=None).guarantee()  # checks ε
    return Guarantee(epsilon=claim.epsilon, delta=claim.delta, relation="add-remove-one")


def noise_bound(scale: Fraction, beta: float) -> int:
    """The least ``k >= 0`` with ``Pr[|Z| >= k] <= beta`` for ``Z ~ DLap(scale)``.

    >>> noise_bound(Fraction(1), 0.05), noise_bound(Fraction(2), 0.05), noise_bound(Fraction(1), 1.0)
    (4, 7, 0)
    """
    if not 0 < beta <= 1:
        raise PrivacyParameterError(f"beta must be in (0, 1], got {beta}")
    q = math.exp(-1 / float(scale))
    k, tail = 0, 1.0  # Pr[|Z| >= 0] = 1
    while tail > beta:
        k += 1
        tail = 2 * q**k / (1 + q)
    return k


def estimate_error(
    predictions: Sequence[int] | np.ndarray,
    labels: Sequence[int] | np.ndarray,
    *,
    epsilon: float,
    size_public: bool,
    confidence: float = DEFAULT_CONFIDENCE,
    rng: RandomSource | None = None,
) -> QualityEstimate:
    """The ε-DP error estimate of the predictions against the labels (see the module's text).

    ``size_public``: whether ``len(labels)`` is public (a count window); if not it is released
    noisily too, at no extra ε (the pair's sensitivity is accounted for).
    """
    preds, ys = np.asarray(predictions), np.asarray(labels)
    if preds.shape != ys.shape or preds.ndim != 1:
        raise LearningInputError(
            f"predictions {preds.shape} and labels {ys.shape} must be two equal 1-D arrays"
        )
    if not 0 < confidence < 1:
        raise PrivacyParameterError(f"confidence must be in (0, 1), got {confidence}")
    mechanism = _mechanism(epsilon, size_public=size_public, rng=rng)
    errors, n = int(np.count_nonzero(preds != ys)), int(ys.size)
    beta = 1 - confidence
    if size_public:
        noisy_errors, noisy_size = int(mechanism.release(errors)), None
        k = noise_bound(mechanism.scale, beta / 2)
        n_low = n_high = n
    else:
        noisy_errors, noisy_size = (int(v) for v in mechanism.release([errors, n]))
        k = noise_bound(mechanism.scale, beta / 4)  # β/2 over the noise, split over two coordinates
        n_low, n_high = noisy_size - k, noisy_size + k
    low = _rate(noisy_errors - k, n_high)
    high = _rate(noisy_errors + k, n_low) if n_low > 0 else 1.0
    sampling = math.sqrt(math.log(4 / beta) / (2 * n_low)) if n_low > 0 else 1.0
    point_size = n if size_public else noisy_size
    return QualityEstimate(
        error=_rate(noisy_errors, point_size) if point_size and point_size > 0 else 1.0,
        low=max(0.0, low - sampling),
        high=min(1.0, high + sampling),
        confidence=confidence,
        epsilon=float(epsilon),
        noisy_errors=noisy_errors,
        size=n if size_public else None,
        noisy_size=noisy_size,
    )


def _mechanism(epsilon: float, *, size_public: bool, rng: RandomSource | None) -> DiscreteLaplaceMechanism:
    # Size public: the count alone, sensitivity 1. Size private: (count, size), ℓ1-sensitivity 2.
    if size_public:
        return DiscreteLaplaceMechanism(epsilon, 1, rng=rng)
    return DiscreteLaplaceMechanism(epsilon, 2, dimension=2, rng=rng)


def _rate(count: int, size: int | None) -> float:
    return 1.0 if not size or size <= 0 else min(1.0, max(0.0, count / size))
