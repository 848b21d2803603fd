"""Gaussian mechanisms: discrete (integer queries) and continuous outputs on a fine grid.

Privacy (Canonne-Kamath-Steinke 2020, Thm 4 and §2.3): adding independent discrete Gaussians
N_Z(0, σ²) to an integer vector query whose neighbouring answers differ by at most Δ in ℓ2 is
ρ-zCDP with ρ = Δ²/(2σ²), exactly as for the continuous Gaussian. ρ-zCDP implies
(ρ + 2√(ρ ln(1/δ)), δ)-DP (Bun-Steinke 2016, Prop 1.3); the constructors take the target
(ε, δ), pick the largest ρ whose conversion is <= ε, and set σ² = Δ²/(2ρ) as an exact rational.
The guarantee carries ρ too, so the RDP accountant composes Gaussians tightly.

Continuous outputs (:class:`GaussianMechanism`) round to the grid g·Z and add exact discrete
Gaussian noise in grid units (no float inverse-CDF or Box-Muller). Rounding enlarges the ℓ2
distance of neighbouring answers to at most ceil(Δ/g) in one dimension and Δ/g + ceil(√dim) in
general (triangle inequality; each coordinate's rounding difference is < 1), which is the Δ used
in grid units.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import ClassVar, overload

from privstream.learning.accounting import PrivacyGuarantee, zcdp_for_dp, zcdp_to_dp
from privstream.learning.mechanisms._common import (
    GridNoise,
    positive_int,
    positive_real,
    probability,
)
from privstream.learning.mechanisms.laplace import default_granularity
from privstream.learning.randomness import RandomSource

__all__ = ["DiscreteGaussianMechanism", "GaussianMechanism", "rho_for"]


def rho_for(epsilon: float, delta: float) -> float:
    """Largest float rho with zcdp_to_dp(rho, delta) <= epsilon (validated)."""
    rho = zcdp_for_dp(epsilon, delta)
    while zcdp_to_dp(rho, delta) > epsilon:  # undo a 1-ulp float overshoot
        rho = math.nextafter(rho, 0.0)
    return rho


def _grid_l2_shift(sensitivity: Fraction, g: Fraction, dim: int) -> Fraction:
    """Bound on the ℓ2 distance, in grid units, of two rounded answers within ``sensitivity``."""
    if dim == 1:
        return Fraction(math.ceil(sensitivity / g))
    return sensitivity / g + (math.isqrt(dim - 1) + 1)  # + ceil(sqrt(dim))


class _IntegerGaussian(GridNoise):
    """Shared core: integer vector + discrete Gaussian of rational variance per coordinate."""

    def __init__(
        self, epsilon: float, delta: float, l2_shift: Fraction, dimension: int, rng: RandomSource | None
    ) -> None:
        super().__init__(rng)
        self.epsilon = float(positive_real(epsilon, "epsilon"))
        self.delta = probability(delta, "delta")
        self.dimension = dimension
        self.rho = rho_for(self.epsilon, self.delta)
        #: variance in grid units, exact: Δ²/(2ρ) with ρ's exact binary value
        self.grid_variance: Fraction = l2_shift * l2_shift / (2 * Fraction(self.rho))

    def guarantee(self) -> PrivacyGuarantee:
        return PrivacyGuarantee(epsilon=self.epsilon, delta=self.delta, rho=self.rho, mechanism=self.name)

    def _noisy(self, ints: list[int]) -> list[int]:
        return [v + self.rng.discrete_gaussian(self.grid_variance) for v in ints]


class DiscreteGaussianMechanism(_IntegerGaussian):
    """ρ-zCDP (hence (ε, δ)-DP) release of an integer query with ℓ2-sensitivity Δ.

    >>> from privstream.learning.randomness import seeded
    >>> m = DiscreteGaussianMechanism(epsilon=1.0, delta=1e-5, rng=seeded(0))
    >>> g = m.guarantee()
    >>> (g.epsilon, g.delta, g.rho == m.rho)
    (1.0, 1e-05, True)
    """

    name: ClassVar[str] = "discrete_gaussian"

    def __init__(
        self,
        epsilon: float,
        delta: float,
        sensitivity: float = 1,
        *,
        dimension: int = 1,
        rng: RandomSource | None = None,
    ) -> None:
        self.sensitivity = positive_real(sensitivity, "sensitivity")
        super().__init__(epsilon, delta, self.sensitivity, positive_int(dimension, "dimension"), rng)

    @property
    def variance(self) -> Fraction:
        """σ² of the integer noise."""
        return self.grid_variance

    @overload
    def release(self, value: int) -> int: ...
    @overload
    def release(self, value: Sequence[int]) -> list[int]: ...
    def release(self, value: int | Sequence[int]) -> int | list[int]:
        """The noisy value: an int for an int, a list for a vector (``dimension`` values)."""
        return self._release_integers(value, "discrete Gaussian")


class GaussianMechanism(_IntegerGaussian):
    """ρ-zCDP (hence (ε, δ)-DP) release of a real query with ℓ2-sensitivity Δ, via the grid g·Z."""

    name: ClassVar[str] = "gaussian"

    def __init__(
        self,
        epsilon: float,
        delta: float,
        sensitivity: float = 1.0,
        *,
        dimension: int = 1,
        granularity: float | None = None,
        rng: RandomSource | None = None,
    ) -> None:
        delta_f = positive_real(sensitivity, "sensitivity")
        dim = positive_int(dimension, "dimension")
        rho = rho_for(float(positive_real(epsilon, "epsilon")), probability(delta, "delta"))
        if granularity is None:
            g = default_granularity(delta_f / Fraction(math.sqrt(2 * rho)))
        else:
            g = positive_real(granularity, "granularity")
        self.sensitivity = float(delta_f)
        self.granularity = g
        super().__init__(epsilon, delta, _grid_l2_shift(delta_f, g, dim), dim, rng)

    @property
    def sigma(self) -> float:
        """Effective noise standard deviation in output units (>= Δ/sqrt(2ρ))."""
        return math.sqrt(self.grid_variance) * float(self.granularity)

    @overload
    def release(self, value: float) -> float: ...
    @overload
    def release(self, value: Sequence[float]) -> list[float]: ...
    def release(self, value: float | Sequence[float]) -> float | list[float]:
        """The noisy value: a float for a number, a list for a vector (``dimension`` values)."""
        return self._release_on_grid(value, self.granularity)
