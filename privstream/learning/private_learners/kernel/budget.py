"""The kernel learner's privacy budget: (ε, δ) as one zCDP budget ρ, split between its three steps.

The learner composes two Gaussian mechanisms and one exponential mechanism. All three are
stated in zero-concentrated DP (Bun-Steinke 2016), where composition adds the ρ's:

* a Gaussian mechanism with ℓ2-sensitivity Δ and noise variance σ² is ``Δ²/(2σ²)``-zCDP
  (Canonne-Kamath-Steinke 2020, Thm 4, also for the exact discrete Gaussian on a grid);
* the exponential mechanism at ε is ε-bounded-range, hence ``ε²/8``-zCDP (Cesar-Rogers 2021,
  Lemma 3.2).

ρ-zCDP bounds the Rényi divergence of every order α > 1 by αρ, and Rényi DP converts to (ε, δ)-DP
by ``ε = min_α αρ + ln(1 - 1/α) - (ln δ + ln α)/(α - 1)`` (Canonne-Kamath-Steinke 2020, Prop 12;
:func:`~privstream.learning.accounting.rdp_to_dp` over
:data:`~privstream.learning.accounting.DEFAULT_RDP_ORDERS`). :func:`zcdp_budget` inverts that
conversion: the largest ρ whose conversion at δ is at most ε. At (1, 1e-6) it is about 0.0244,
40% more than the classical ``ρ + 2√(ρ ln(1/δ)) <= ε`` allows (0.0175), so the noise is 15%
smaller for the same guarantee.

:func:`split_budget` shares ρ: 1/50 to the rows' mean and 1/25 to their spread (the bandwidth;
nothing when the bandwidth is public), 1/25 to the label counts, 1/20 to the offset's exponential
mechanism (its ε is ``√(8·ρ/20)``) and the rest, at least 17/20, to the class-weighted feature
sum, where the accuracy is decided. Every figure is a function of (ε, δ) and of whether the
bandwidth is public.

>>> budget = split_budget(1.0, 1e-6)
>>> round(budget.total, 5), round(budget.direction, 5), round(budget.offset_epsilon, 4)
(0.02436, 0.0207, 0.0987)
>>> composed_epsilon(budget.spent(), 1e-6) <= 1.0
True
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

from privstream.learning.accounting import DEFAULT_RDP_ORDERS, rdp_to_dp

__all__ = [
    "COUNTS_SHARE",
    "MEAN_SHARE",
    "OFFSET_SHARE",
    "SPREAD_SHARE",
    "KernelBudget",
    "composed_epsilon",
    "split_budget",
    "zcdp_budget",
]

#: Shares of the zCDP budget ρ (the class-weighted sum gets the rest).
MEAN_SHARE = Fraction(1, 50)
SPREAD_SHARE = Fraction(1, 25)
COUNTS_SHARE = Fraction(1, 25)
OFFSET_SHARE = Fraction(1, 20)
_BISECTION_STEPS = 200


def composed_epsilon(rho: float, delta: float) -> float:
    """The ε of ρ-zCDP at δ, by the Rényi conversion over :data:`DEFAULT_RDP_ORDERS`.

    >>> round(composed_epsilon(0.0244, 1e-6), 3)
    1.001
    """
    return rdp_to_dp(DEFAULT_RDP_ORDERS, [alpha * rho for alpha in DEFAULT_RDP_ORDERS], delta)


@functools.lru_cache(maxsize=64)
def zcdp_budget(epsilon: float, delta: float) -> float:
    """The largest ρ (to float precision, from below) whose (ε, δ) conversion is at most ``epsilon``.

    >>> rho = zcdp_budget(0.1, 1e-6); composed_epsilon(rho, 1e-6) <= 0.1 < composed_epsilon(rho * 1.001, 1e-6)
    True
    """
    if not (epsilon > 0 and math.isfinite(epsilon)) or not 0 < delta < 1:
        raise ValueError(f"need epsilon > 0 and 0 < delta < 1, got ({epsilon!r}, {delta!r})")
    low, high = 0.0, float(epsilon)  # the conversion is at least ρ, so ρ <= ε
    for _ in range(_BISECTION_STEPS):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        if composed_epsilon(middle, delta) <= epsilon:
            low = middle
        else:
            high = middle
    return low


@dataclass(frozen=True)
class KernelBudget:
    """The zCDP budget of one release: ``total`` and its parts (the offset's as its ε)."""

    total: float
    mean: float
    spread: float
    counts: float
    direction: float
    offset_epsilon: float

    @property
    def offset(self) -> float:
        """ρ of the offset's exponential mechanism: ``ε²/8``."""
        return self.offset_epsilon**2 / 8

    def spent(self) -> float:
        """The sum of the three parts' ρ (at most :attr:`total`)."""
        return self.mean + self.spread + self.counts + self.direction + self.offset


def split_budget(epsilon: float, delta: float, *, public_bandwidth: bool = False) -> KernelBudget:
    """The steps' budgets for an (ε, δ) release (module docstring).

    >>> split_budget(1.0, 1e-6, public_bandwidth=True).mean, split_budget(1.0, 1e-6).mean > 0
    (0.0, True)
    """
    total = zcdp_budget(epsilon, delta)
    mean = 0.0 if public_bandwidth else total * float(MEAN_SHARE)
    spread = 0.0 if public_bandwidth else total * float(SPREAD_SHARE)
    counts = total * float(COUNTS_SHARE)
    offset_epsilon = math.sqrt(8 * total * float(OFFSET_SHARE))
    while offset_epsilon**2 / 8 > total * float(OFFSET_SHARE):  # never a rounding above the share
        offset_epsilon = math.nextafter(offset_epsilon, 0.0)
    direction = max(total - mean - spread - counts - offset_epsilon**2 / 8, 0.0)
    while KernelBudget(total, mean, spread, counts, direction, offset_epsilon).spent() > total:
        direction = math.nextafter(direction, 0.0)  # float sums: the last ulps back
    return KernelBudget(total, mean, spread, counts, direction, offset_epsilon)
