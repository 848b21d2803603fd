"""Stability-based (thresholded) histogram with exact discrete noise.

[B Alg 1, Thm 2.4] / ABLMM22 Lem 28 (Bun-Nissim-Stemmer; Korolova et al. 2009). For each item
value v that *occurs* (never the domain), noisy count ĉ_v = c_v + Z_v with Z_v ~ discrete Laplace of
scale 2/ε; v is released, with ĉ_v, iff ĉ_v >= T. Absent values are never touched, so the domain
may be infinite; the released key set is a subset of the occurring values.

Privacy under replace-one neighbours (our proof; tighter than the usual δ/4 + e^ε argument).
A replacement a -> b changes two counts by one. (i) Bins occurring in both datasets: ℓ1 shift
<= 2 at scale 2/ε, so that part of the output is ε-DP (ε/2 per moved bin). (ii) A bin occurring in
one dataset only has count 1 there and is released with probability p = Pr[1 + Z >= T] =
q^{T-1}/(1+q), q = e^{-ε/2}. Write x for the probability that the common part lands in an event
E' (outputs without that bin). From the dataset with the extra bin: Pr[E] <= p + e^{ε/2}·x' with
x' the other side's probability, so δ = p. Towards it: Pr[E] <= e^{ε/2}·x while the other side
has at least (1-p)·x, and e^{ε/2}·x - e^ε(1-p)·x <= p whenever p <= 1/(1+q), which holds for
every T >= 2. Hence (ε, p)-DP, and T is the least integer >= 2 with p <= δ, verified with
certified bounds on exp; :attr:`StableHistogram.tight_delta` is that p (rounded up). The
exhaustive exact check in tests/learning/test_mechanisms.py confirms the bound is attained.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable
from fractions import Fraction
from typing import ClassVar, TypeVar

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.errors import PrivacyParameterError
from privstream.learning.mechanisms._common import Mechanism, positive_real, probability
from privstream.learning.ordering import natural_order
from privstream.learning.randomness import RandomSource, exp_neg_bounds

__all__ = ["StableHistogram"]

_BITS = 128  # precision of the certified threshold check

H = TypeVar("H", bound=Hashable)


def _float_up(x: Fraction) -> float:
    """The least float >= x."""
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


class StableHistogram(Mechanism):
    """(ε, δ)-DP release of the frequent values of a dataset, with noisy counts.

    >>> from privstream.learning.randomness import seeded
    >>> h = StableHistogram(epsilon=1.0, delta=1e-6, rng=seeded(3))
    >>> h.threshold
    28
    >>> list(h.release(["a"] * 100 + ["b"]))  # "b" (count 1): released with probability <= 1e-6
    ['a']
    """

    name: ClassVar[str] = "stable_histogram"

    def __init__(
        self,
        epsilon: float,
        delta: float,
        *,
        rng: RandomSource | None = None,
        threshold: int | None = None,
    ) -> None:
        super().__init__(rng)
        eps = positive_real(epsilon, "epsilon")
        self.epsilon = float(eps)
        self.delta = probability(delta, "delta")
        self.scale: Fraction = 2 / eps  # discrete Laplace scale: two bins move by one each
        self._q_gamma = 1 / self.scale  # q = exp(-ε/2)
        least = self._least_threshold(Fraction(self.delta))
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int)):
            raise PrivacyParameterError(f"threshold must be an int, got {threshold!r}")
        if threshold is not None and threshold < least:
            raise PrivacyParameterError(
                f"threshold {threshold} is below {least}, the least one that is ({epsilon}, {delta})-DP"
            )
        #: release iff noisy count >= threshold; a higher threshold than the least is allowed (safer)
        self.threshold: int = least if threshold is None else threshold
        self.tight_delta = _float_up(self._p_upper(self.threshold))

    def guarantee(self) -> PrivacyGuarantee:
        return PrivacyGuarantee(epsilon=self.epsilon, delta=self.delta, mechanism=self.name)

    def release(self, items: Iterable[H]) -> dict[H, int]:
        """Noisy counts of released values, in a data-independent (sorted) key order."""
        counts = Counter(items)
        out: dict[H, int] = {}
        for key, c in counts.items():
            noisy = c + self.rng.discrete_laplace(self.scale)
            if noisy >= self.threshold:
                out[key] = noisy
        # insertion order would reveal the order of first occurrence
        keys = natural_order(out)
        if keys is None:
            keys = sorted(out, key=lambda k: (type(k).__name__, repr(k)))
        return {k: out[k] for k in keys}

    def release_probability(self, count: int) -> float:
        """Exact Pr[count + Z >= T] (float evaluation of the closed form)."""
        q = math.exp(-float(self._q_gamma))
        if count >= self.threshold:
            return 1.0 - q ** (count - self.threshold + 1) / (1 + q)
        return q ** (self.threshold - count) / (1 + q)

    def _p_upper(self, threshold: int) -> Fraction:
        """Certified upper bound on Pr[1 + Z >= T] = q^{T-1}/(1+q), T >= 2."""
        num_hi = exp_neg_bounds(self._q_gamma * (threshold - 1), _BITS)[1]
        q_lo = exp_neg_bounds(self._q_gamma, _BITS)[0]
        return Fraction(num_hi, (1 << _BITS) + q_lo)

    def _least_threshold(self, delta: Fraction) -> int:
        # float estimate of the solution of q^{T-1}/(1+q) = δ, then a certified search upwards
        t = float(self.scale)
        guess = 1 + t * math.log(1 / (float(delta) * (1 + math.exp(-1 / t))))
        threshold = max(2, math.floor(guess) - 2)
        while self._p_upper(threshold) > delta:
            threshold += 1
        return threshold
