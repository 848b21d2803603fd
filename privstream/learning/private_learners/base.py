"""The interface of private learners: :class:`LearnerResult`, :class:`PrivateLearner`, :func:`make_learner`.

A private learner maps a labelled sample to a hypothesis with a differential-privacy guarantee
under *replace-one* neighbours (two samples of the same size that differ in one example; n is
public). The result states that guarantee and, separately, whether the accuracy theorem of the
learner holds at the given sample size (DESIGN.md §4 "theory mode vs practical mode"): privacy
never depends on the sample size, accuracy does.

>>> learner = make_learner("generic")
>>> learner.name
'generic'
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from privstream.learning.domain import as_labels, as_points
from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import HypothesisClass
from privstream.learning.privacy_errors import PrivacyParameterError
from privstream.learning.randomness import RandomSource

__all__ = [
    "LEARNERS",
    "LearnerResult",
    "PrivateLearner",
    "check_accuracy_parameter",
    "check_expected_size",
    "check_privacy_parameters",
    "check_sample",
    "make_learner",
]


@dataclass(frozen=True)
class LearnerResult:
    """One private release of a learner, with its guarantees.

    ``epsilon``/``delta`` are the guarantee of this run (replace-one neighbours), which may be
    stronger than what the caller allowed (a pure-DP learner reports ``delta = 0``).
    ``accuracy_guarantee_holds`` is ``sample_size >= theorem_sample_size``; it speaks about the
    theorem's assumptions (e.g. realizable data), which a private learner cannot check.
    """

    hypothesis: Hypothesis
    mechanism: str
    epsilon: float
    delta: float
    proper: bool
    sample_size: int
    parameters: dict[str, Any]
    theorem_sample_size: int | None
    accuracy_guarantee_holds: bool


@runtime_checkable
class PrivateLearner(Protocol):
    """A differentially-private learner; ``fit`` draws all its randomness from ``rng``.

    ``rng=None`` means a fresh cryptographically secure source (production); pass a seeded
    :class:`RandomSource` only for tests and experiments (reproducible, hence not private).
    """

    name: str

    def fit(self, hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray, *, epsilon: float,
            delta: float = 0.0, alpha: float = 0.25, beta: float = 0.25,
            rng: RandomSource | None = None) -> LearnerResult: ...


#: Learners by name -> ``"module:attribute"`` of their factory (imported on first use, so this
#: module imports no learner and later learners add one line here).
LEARNERS: dict[str, str] = {
    "generic": "privstream.learning.private_learners.generic:GenericLearner",
    "proper": "privstream.learning.private_learners.proper:ProperLearner",
    "global-stability": "privstream.learning.private_learners.global_stability:GlobalStabilityLearner",
}


def make_learner(name: str, **params: Any) -> PrivateLearner:
    """The learner registered as ``name``, built with ``params``.

    >>> make_learner("svm")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown private learner 'svm'; known learners: generic...
    """
    target = LEARNERS.get(name) if isinstance(name, str) else None
    if target is None:
        raise ValueError(f"unknown private learner {name!r}; known learners: {', '.join(sorted(LEARNERS))}")
    module, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module), attr)
    return factory(**params)  # type: ignore[no-any-return]


# -- shared input validation ------------------------------------------------------------------


def _finite_real(x: object, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float | np.integer | np.floating):
        raise PrivacyParameterError(f"{name} must be a real number, got {x!r}")
    f = float(x)
    if not math.isfinite(f):
        raise PrivacyParameterError(f"{name} must be finite, got {x!r}")
    return f


def check_privacy_parameters(epsilon: object, delta: object) -> tuple[float, float]:
    """``(epsilon, delta)`` as floats, or :class:`PrivacyParameterError` unless ε > 0 and 0 <= δ < 1."""
    eps = _finite_real(epsilon, "epsilon")
    if eps <= 0:
        raise PrivacyParameterError(f"epsilon must be > 0, got {epsilon!r}")
    dlt = _finite_real(delta, "delta")
    if not 0 <= dlt < 1:
        raise PrivacyParameterError(f"delta must be in [0, 1), got {delta!r}")
    return eps, dlt


def check_accuracy_parameter(value: object, name: str) -> float:
    """An accuracy (alpha) or confidence (beta) parameter in the open interval (0, 1)."""
    f = _finite_real(value, name)
    if not 0 < f < 1:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return f


def check_sample(hclass: HypothesisClass, xs: object, ys: object) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``(xs, ys)``: points in the class's domain, labels 0/1, equal lengths.

    Raises :class:`~privstream.learning.errors.DomainError` / ``LabelError`` (``ValueError``s).
    """
    if not isinstance(hclass, HypothesisClass):
        raise TypeError(f"hclass must be a HypothesisClass, got {type(hclass).__name__}")
    points = as_points(xs, hclass.domain_size)
    labels = as_labels(ys, points.shape[0])
    return points, labels


def check_expected_size(expected_size: object) -> int | None:
    """``None`` (n public) or an int >= 1 (n private: the operator's expected window size).

    >>> check_expected_size(None), check_expected_size(5000)
    (None, 5000)
    """
    if expected_size is None:
        return None
    if (isinstance(expected_size, bool) or not isinstance(expected_size, int | np.integer)
            or expected_size < 1):
        raise ValueError(f"expected_size must be None or an int >= 1, got {expected_size!r}")
    return int(expected_size)
