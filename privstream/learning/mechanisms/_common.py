"""Shared parameter validation and the mechanism base class."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from fractions import Fraction
from numbers import Rational, Real
from typing import ClassVar, TypeAlias

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.errors import PrivacyParameterError
from privstream.learning.randomness import RandomSource, resolve

__all__ = [
    "ExactReal",
    "GridNoise",
    "Mechanism",
    "exact_real",
    "positive_int",
    "positive_real",
    "probability",
]

#: A real parameter or score as callers give it: an int, a float or an exact Fraction (numpy
#: numbers are accepted at run time as well: :func:`exact_real` checks against ``numbers.Real``).
ExactReal: TypeAlias = float | Fraction


def exact_real(x: object, name: str) -> Fraction:
    """The exact rational value of a finite real (int, Fraction or float; floats are dyadic)."""
    if isinstance(x, bool) or not isinstance(x, Real):
        raise PrivacyParameterError(f"{name} must be a real number, got {x!r}")
    if isinstance(x, Rational):
        return Fraction(int(x.numerator), int(x.denominator))
    f = float(x)
    if not math.isfinite(f):
        raise PrivacyParameterError(f"{name} must be finite, got {x!r}")
    return Fraction(f)


def positive_real(x: object, name: str) -> Fraction:
    """Exact value of a finite real > 0."""
    f = exact_real(x, name)
    if f <= 0:
        raise PrivacyParameterError(f"{name} must be > 0, got {x!r}")
    return f


def positive_int(x: object, name: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < 1:
        raise PrivacyParameterError(f"{name} must be an int >= 1, got {x!r}")
    return x


def probability(x: object, name: str) -> float:
    """A delta-like parameter in the open interval (0, 1)."""
    f = exact_real(x, name)
    if not 0 < f < 1:
        raise PrivacyParameterError(f"{name} must be in (0, 1), got {x!r}")
    return float(f)


def values_of(value: object, dimension: int, mechanism: str) -> tuple[list[object], bool]:
    """``value`` as a list of ``dimension`` items, and whether it was a scalar (one item, unwrapped)."""
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        items, scalar = list(value), False
    else:
        items, scalar = [value], True
    if len(items) != dimension:
        raise PrivacyParameterError(f"{mechanism} expects {dimension} value(s), got {len(items)}")
    return items, scalar


def integers_of(items: list[object], mechanism: str) -> list[int]:
    """``items`` (from :func:`values_of`) as ints; bools and non-integers are refused."""
    ints = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int):
            raise PrivacyParameterError(f"{mechanism} needs integer values, got {v!r}")
        ints.append(v)
    return ints


class Mechanism(ABC):
    """A randomized release with a privacy map.

    Every mechanism draws only from its :class:`RandomSource` (default: the OS CSPRNG) and states
    its guarantee per release through :meth:`guarantee`.
    """

    name: ClassVar[str]

    def __init__(self, rng: RandomSource | None) -> None:
        self.rng = resolve(rng)

    @abstractmethod
    def guarantee(self) -> PrivacyGuarantee:
        """The privacy guarantee of one release (replace-one neighbours)."""


class GridNoise(Mechanism):
    """A mechanism adding integer noise (:meth:`_noisy`) coordinate by coordinate: to integers
    as given, or to reals rounded to the grid ``g·Z`` (the discrete Laplace and Gaussian ones).

    Both releases take a scalar or a vector of ``dimension`` values and return the same shape.
    """

    dimension: int

    @abstractmethod
    def _noisy(self, ints: list[int]) -> list[int]:
        """``ints`` with independent noise added to each."""

    def _release_integers(self, value: object, what: str) -> int | list[int]:
        items, scalar = values_of(value, self.dimension, self.name)
        out = self._noisy(integers_of(items, what))
        return out[0] if scalar else out

    def _release_on_grid(self, value: object, granularity: Fraction) -> float | list[float]:
        items, scalar = values_of(value, self.dimension, self.name)
        # round half up to the grid: floor(x/g + 1/2); exact on rationals
        ints = [math.floor(exact_real(v, "value") / granularity + Fraction(1, 2)) for v in items]
        out = [float(k * granularity) for k in self._noisy(ints)]
        return out[0] if scalar else out
