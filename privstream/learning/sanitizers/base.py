"""The sanitizer interface (private query release): :class:`SanitizerResult`, :class:`Sanitizer`, registry.

A sanitizer maps a sample ``xs`` (and optionally labels ``ys``) to a :class:`SyntheticDistribution`
from which every query of the class is answered by post-processing (ggkm.md §1.3, Definition 2.3):
``q_h = fraction of x with h(x) = 1``, or for a labelled release ``fraction of (x, y) with h(x) = y``.
The guarantee is (ε, δ)-DP under *replace-one* neighbours (n is public), for the whole release:
the user's ε is the total, never a per-iteration knob (dp_landscape.md §A3, MWEM pitfalls).

>>> make_sanitizer("mwem").name
'mwem'
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from privstream.learning.domain import as_labels, as_points
from privstream.learning.errors import LearningInputError
from privstream.learning.hypothesis_classes import HypothesisClass
from privstream.learning.randomness import RandomSource
from privstream.learning.sanitizers.distribution import SyntheticDistribution

__all__ = [
    "SANITIZERS", "Sanitizer", "SanitizerInputError", "SanitizerResult", "check_data", "make_sanitizer",
]


class SanitizerInputError(LearningInputError):
    """Input a sanitizer cannot work with (empty data, unsupported class/variant, too few points)."""


@dataclass(frozen=True)
class SanitizerResult:
    """One private release of a sanitizer, with its guarantees.

    ``distribution`` lives on the class's public domain (block edges are change points of released
    queries, never raw data). ``theorem_sample_size`` is the n at which the cited accuracy theorem
    holds for (α, β); ``accuracy_guarantee_holds`` says whether it does at this run's parameters.
    """

    distribution: SyntheticDistribution
    mechanism: str
    epsilon: float
    delta: float
    sample_size: int
    parameters: dict[str, Any]
    theorem_sample_size: int | None
    accuracy_guarantee_holds: bool


@runtime_checkable
class Sanitizer(Protocol):
    """A differentially-private sanitizer; ``fit`` draws all its randomness from ``rng``.

    ``rng=None`` means a fresh cryptographically secure source; pass a seeded source only in tests.
    """

    name: str

    def fit(self, hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray | None = None, *,
            epsilon: float, delta: float = 0.0, alpha: float = 0.1, beta: float = 0.1,
            rng: RandomSource | None = None) -> SanitizerResult: ...


#: Sanitizers by name -> ``"module:attribute"`` of their factory (imported on first use).
SANITIZERS: dict[str, str] = {
    "mwem": "privstream.learning.sanitizers.mwem:MWEMSanitizer",
    "fooling": "privstream.learning.sanitizers.fooling:FoolingSanitizer",
    "hierarchical": "privstream.learning.sanitizers.hierarchical:HierarchicalSanitizer",
}


def make_sanitizer(name: str, **params: Any) -> Sanitizer:
    """The sanitizer registered as ``name``, built with ``params``.

    >>> make_sanitizer("pgm")
    Traceback (most recent call last):
    ...
    ValueError: unknown sanitizer 'pgm'; known sanitizers: fooling, hierarchical, mwem
    """
    target = SANITIZERS.get(name) if isinstance(name, str) else None
    if target is None:
        raise ValueError(f"unknown sanitizer {name!r}; known sanitizers: {', '.join(sorted(SANITIZERS))}")
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)(**params)  # type: ignore[no-any-return]


def check_data(hclass: HypothesisClass, xs: object,
               ys: object | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Validated points (in the class's domain) and optional 0/1 labels, for MWEM and fooling.

    Refuses an empty sample and domains above 2^61 (their selection and blocks use int64).
    """
    if not isinstance(hclass, HypothesisClass):
        raise TypeError(f"hclass must be a HypothesisClass, got {type(hclass).__name__}")
    if hclass.domain_size > SyntheticDistribution.INT64_LIMIT:  # block arithmetic in int64
        raise SanitizerInputError(f"domain {hclass.domain_size} is too large for this sanitizer (limit 2^61; "
                                  "the hierarchical sanitizer takes domains up to 2^63)")
    points = as_points(xs, hclass.domain_size)
    if points.shape[0] == 0:
        raise SanitizerInputError("empty data: a sanitizer needs at least one point")
    labels = None if ys is None else as_labels(ys, points.shape[0])
    return points, labels
