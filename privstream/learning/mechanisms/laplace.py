"""Laplace mechanisms: discrete (integer queries) and continuous outputs on a fine grid.

Privacy [B Def 2.2, Thm 2.3] / Dwork-Roth Thm 3.6: adding Lap(Δ/ε) to a query of ℓ1-sensitivity Δ is
ε-DP. The discrete Laplace Pr[z] ∝ exp(-|z|/t) has Pr[z]/Pr[z+k] <= e^{|k|/t} for integer shifts
k (Ghosh-Roughgarden-Sundararajan 2009; CKS20 §2), so the same argument holds for integer queries
with t = Δ/ε. Noise comes from the exact sampler :meth:`RandomSource.discrete_laplace`.

Continuous outputs (:class:`LaplaceMechanism`) never sample float Laplace noise (Mironov 2012's
attack). Instead (as OpenDP does for floats): the value is rounded to the grid g·Z, exact
discrete Laplace noise is added in grid units, and the result is scaled back. Rounding can
enlarge the ℓ1 distance of two neighbouring answers to at most D = ceil(Δ/g) + dim - 1 grid units
(Σ ceil(x_i) <= ceil(Σ x_i) + dim - 1), so the grid scale t = D/ε gives exactly ε-DP. The final
float conversion is post-processing of an integer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import ClassVar, overload

from privstream.learning.accounting import DEFAULT_RDP_ORDERS, PrivacyGuarantee, rdp_discrete_laplace
from privstream.learning.mechanisms._common import (
    ExactReal,
    GridNoise,
    positive_int,
    positive_real,
)
from privstream.learning.randomness import RandomSource

__all__ = ["DiscreteLaplaceMechanism", "LaplaceMechanism", "default_granularity"]

# Grid resolution relative to the noise scale: rounding moves the output by < 2^-40 of one scale.
_GRID_BITS_BELOW_SCALE = 40


def default_granularity(scale: Fraction) -> Fraction:
    """A power of two about 2^-40 times ``scale`` (the noise scale the caller asked for)."""
    k = math.floor(math.log2(scale)) - _GRID_BITS_BELOW_SCALE
    return Fraction(2) ** k


class _IntegerLaplace(GridNoise):
    """Shared core: integer vector + discrete Laplace of rational scale t per coordinate."""

    def __init__(self, epsilon: Fraction, shift: int, dimension: int, rng: RandomSource | None) -> None:
        super().__init__(rng)
        self.epsilon = epsilon
        self.dimension = dimension
        self._shift = shift  # worst-case integer ℓ1 distance of neighbouring (rounded) answers
        self.grid_scale: Fraction = Fraction(shift) / epsilon

    def guarantee(self) -> PrivacyGuarantee:
        eps = float(self.epsilon)
        rdp: tuple[tuple[float, float], ...] = ()
        if self.dimension == 1:  # exact 1-D Rényi curve of the discrete Laplace (accounting.py)
            t = float(self.grid_scale)
            rdp = tuple((a, rdp_discrete_laplace(self._shift, t, a)) for a in DEFAULT_RDP_ORDERS)
        return PrivacyGuarantee(epsilon=eps, delta=0.0, rho=eps * eps / 2, rdp=rdp, mechanism=self.name)

    def _noisy(self, ints: list[int]) -> list[int]:
        return [v + self.rng.discrete_laplace(self.grid_scale) for v in ints]


class DiscreteLaplaceMechanism(_IntegerLaplace):
    """ε-DP release of an integer query (or vector) with integer ℓ1-sensitivity Δ.

    >>> from privstream.learning.randomness import seeded
    >>> m = DiscreteLaplaceMechanism(epsilon=1.0, sensitivity=1, rng=seeded(0))
    >>> m.guarantee().epsilon, m.scale
    (1.0, Fraction(1, 1))
    >>> isinstance(m.release(10), int)
    True
    """

    name: ClassVar[str] = "discrete_laplace"

    def __init__(
        self,
        epsilon: ExactReal,
        sensitivity: int = 1,
        *,
        dimension: int = 1,
        rng: RandomSource | None = None,
    ) -> None:
        eps = positive_real(epsilon, "epsilon")
        self.sensitivity = positive_int(sensitivity, "sensitivity")
        super().__init__(eps, self.sensitivity, positive_int(dimension, "dimension"), rng)

    @property
    def scale(self) -> Fraction:
        """Noise scale t = Δ/ε (Pr[z] ∝ exp(-|z|/t))."""
        return self.grid_scale

    @overload
    def release(self, value: int) -> int: ...
    @overload
    def release(self, value: Sequence[int]) -> list[int]: ...
    def release(self, value: int | Sequence[int]) -> int | list[int]:
        """The noisy value: an int for an int, a list for a vector (``dimension`` values)."""
        return self._release_integers(value, "discrete Laplace")


class LaplaceMechanism(_IntegerLaplace):
    """ε-DP release of a real query with ℓ1-sensitivity Δ, via discrete noise on the grid g·Z.

    The effective noise scale is g·D/ε >= Δ/ε (equal up to ~2^-40 relative with the default g).
    """

    name: ClassVar[str] = "laplace"

    def __init__(
        self,
        epsilon: ExactReal,
        sensitivity: ExactReal = 1.0,
        *,
        dimension: int = 1,
        granularity: float | None = None,
        rng: RandomSource | None = None,
    ) -> None:
        eps = positive_real(epsilon, "epsilon")
        delta_f = positive_real(sensitivity, "sensitivity")
        dim = positive_int(dimension, "dimension")
        if granularity is None:
            g = default_granularity(delta_f / eps)
        else:
            g = positive_real(granularity, "granularity")
        self.sensitivity = float(delta_f)
        self.granularity = g
        shift = math.ceil(delta_f / g) + dim - 1
        super().__init__(eps, shift, dim, rng)

    @property
    def scale(self) -> float:
        """Effective Laplace scale in output units (>= sensitivity/epsilon)."""
        return float(self.grid_scale * self.granularity)

    @overload
    def release(self, value: float) -> float: ...
    @overload
    def release(self, value: Sequence[float]) -> list[float]: ...
    def release(self, value: float | Sequence[float]) -> float | list[float]:
        """The noisy value: a float for a number, a list for a vector (``dimension`` values)."""
        return self._release_on_grid(value, self.granularity)
