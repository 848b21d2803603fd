"""The sanitizer interface (private query release): :class:`SanitizerResult`, :class:`Sanitizer`, registry.

A sanitizer maps a sample ``xs`` (and optionally labels ``ys``) to a :class:`SyntheticDistribution`
from which every query of the class is answered by post-processing (a sanitizer in the sense of
Ghazi, Golowich, Kumar, Manurangsi, Definition 2.3):
``q_h = fraction of x with h(x) = 1``, or for a labelled release ``fraction of (x, y) with h(x) = y``.
The guarantee is (ε, δ)-DP for the whole release: the user's ε is the total, never a
per-iteration knob (as some MWEM implementations take it). As for the learners
(:mod:`privstream.learning.private_learners.base`), ``expected_size=None`` means n is public and
the guarantee holds under *replace-one* neighbours; ``expected_size=m`` means n is private: the
guarantee holds under *add/remove-one* neighbours for every n (0 included) and every reported
field is a function of the configuration and m. Every sanitizer releases something valid on an
empty sample, and nothing that depends on the data makes ``fit`` raise.

>>> make_sanitizer("mwem").name
'mwem'
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from privstream.learning import algorithms as registry
from privstream.learning.domain import MAX_DOMAIN_SIZE, as_labels, as_points
from privstream.learning.errors import LearningInputError
from privstream.learning.hypothesis_classes import HypothesisClass
from privstream.learning.private_learners.base import PrivateRelease, check_fit_parameters
from privstream.learning.randomness import RandomSource
from privstream.learning.sanitizers.distribution import SyntheticDistribution

__all__ = [
    "MAX_DOMAIN",
    "SANITIZERS",
    "Sanitizer",
    "SanitizerInputError",
    "SanitizerInputs",
    "SanitizerResult",
    "check_data",
    "check_sanitizer_fit",
    "make_sanitizer",
]

#: Largest class domain the sanitizers take (their block edges and prefix sums are int64): the
#: domain limit of every class named by a spec (:data:`privstream.learning.domain.MAX_DOMAIN_SIZE`).
MAX_DOMAIN = MAX_DOMAIN_SIZE


class SanitizerInputError(LearningInputError):
    """Input a sanitizer cannot work with (empty data, unsupported class/variant, too few points)."""


@dataclass(frozen=True, kw_only=True)
class SanitizerResult(PrivateRelease):
    """One private release of a sanitizer: its ``distribution`` and guarantees (:class:`PrivateRelease`).

    ``distribution`` lives on the class's public domain (block edges are change points of released
    queries, never raw data). ``theorem_sample_size`` is the n at which the cited accuracy theorem
    holds for (α, β).
    """

    distribution: SyntheticDistribution

    def certificate_fields(self) -> dict[str, Any]:
        return {**super().certificate_fields(), "proper": False}  # a distribution is no hypothesis

    def published_fields(self) -> dict[str, Any]:
        return {"distribution": self.distribution.to_dict(), "labelled": self.distribution.labelled}


@runtime_checkable
class Sanitizer(Protocol):
    """A differentially-private sanitizer; ``fit`` draws all its randomness from ``rng``.

    ``rng=None`` means a fresh cryptographically secure source; pass a seeded source only in tests.
    ``expected_size``: None when n is public (replace-one), m when n is private (add/remove-one).
    """

    name: str

    def fit(
        self,
        hclass: HypothesisClass,
        xs: np.ndarray,
        ys: np.ndarray | None = None,
        *,
        epsilon: float,
        delta: float = 0.0,
        alpha: float = 0.1,
        beta: float = 0.1,
        rng: RandomSource | None = None,
        expected_size: int | None = None,
    ) -> SanitizerResult: ...


#: Sanitizers by name -> ``"module:attribute"`` of their factory: the registry's ``sanitizer``
#: entry points (:mod:`privstream.learning.algorithms`), imported on first use.
SANITIZERS: MutableMapping[str, str] = registry.names("sanitizer")


def make_sanitizer(name: str, **params: Any) -> Sanitizer:
    """The sanitizer registered as ``name``, built with ``params``.

    >>> make_sanitizer("pgm")
    Traceback (most recent call last):
    ...
    ValueError: unknown sanitizer 'pgm'; known sanitizers: fooling, hierarchical, mwem
    """
    if not isinstance(name, str) or name not in SANITIZERS:
        raise ValueError(f"unknown sanitizer {name!r}; known sanitizers: {', '.join(sorted(SANITIZERS))}")
    # the registry names the factory by text: its result is what the registry promises
    sanitizer: Sanitizer = registry.load("sanitizer", name)(**params)
    return sanitizer


def check_data(
    hclass: HypothesisClass, xs: object, ys: object | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Validated points (in the class's domain) and optional 0/1 labels; an empty sample is fine.

    The only refusal that is not a precondition of the service's validation (points in the
    domain, 0/1 labels) depends on the class alone: a domain beyond :data:`MAX_DOMAIN`.
    """
    if not isinstance(hclass, HypothesisClass):
        raise TypeError(f"hclass must be a HypothesisClass, got {type(hclass).__name__}")
    if hclass.domain_size > MAX_DOMAIN:
        raise SanitizerInputError(
            f"domain {hclass.domain_size} is too large for the sanitizers (at most "
            f"2^{MAX_DOMAIN.bit_length() - 1} points)"
        )
    points = as_points(xs, hclass.domain_size)
    labels = None if ys is None else as_labels(ys, points.shape[0])
    return points, labels


class SanitizerInputs(NamedTuple):
    """A sanitizer's validated ``fit`` arguments: its parameters, then the sample (labels optional)."""

    epsilon: float
    delta: float
    alpha: float
    beta: float
    expected_size: int | None
    points: np.ndarray
    labels: np.ndarray | None


def check_sanitizer_fit(
    hclass: HypothesisClass,
    xs: object,
    ys: object | None,
    *,
    epsilon: object,
    delta: object,
    alpha: object,
    beta: object,
    expected_size: object,
) -> SanitizerInputs:
    """The opening of every sanitizer's ``fit``: the parameters
    (:func:`~privstream.learning.private_learners.base.check_fit_parameters`), then :func:`check_data`."""
    parameters = check_fit_parameters(epsilon, delta, alpha, beta, expected_size)
    return SanitizerInputs(*parameters, *check_data(hclass, xs, ys))
