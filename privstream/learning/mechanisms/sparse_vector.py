"""Sparse vector technique: AboveThreshold with exact discrete Laplace noise.

Dwork-Roth 2014, Alg 1 and Thm 3.23: with a noisy threshold T + ρ, ρ ~ Lap(2Δ/ε), and fresh
ν_i ~ Lap(4Δ/ε) per query, reporting the index of the first query with q_i(D) + ν_i >= T + ρ (and
halting) is ε-DP for queries of sensitivity Δ, however many queries are asked. The proof only
shifts ρ by at most Δ and ν_k by at most 2Δ; with integer-valued queries, an integer threshold
and integer Δ these shifts are integers, for which the discrete Laplace has the same density-ratio
bound e^{|shift|/scale} -- so the discrete version keeps the guarantee exactly.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import ClassVar

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.errors import PrivacyParameterError
from privstream.learning.mechanisms._common import Mechanism, positive_int, positive_real
from privstream.learning.randomness import RandomSource

__all__ = ["AboveThreshold"]


class AboveThreshold(Mechanism):
    """ε-DP index of the first integer query answer above a noisy integer threshold.

    >>> from privstream.learning.randomness import seeded
    >>> svt = AboveThreshold(threshold=50, epsilon=1.0, rng=seeded(0))
    >>> svt.run([0, 3, 1, 500, 2])
    3
    """

    name: ClassVar[str] = "above_threshold"

    def __init__(
        self, threshold: int, epsilon: float, sensitivity: int = 1, *, rng: RandomSource | None = None
    ) -> None:
        super().__init__(rng)
        if isinstance(threshold, bool) or not isinstance(threshold, int):
            raise PrivacyParameterError(f"threshold must be an int, got {threshold!r}")
        eps = positive_real(epsilon, "epsilon")
        self.threshold = threshold
        self.epsilon = float(eps)
        self.sensitivity = positive_int(sensitivity, "sensitivity")
        self.threshold_scale: Fraction = 2 * self.sensitivity / eps
        self.query_scale: Fraction = 4 * self.sensitivity / eps

    def guarantee(self) -> PrivacyGuarantee:
        eps = self.epsilon
        return PrivacyGuarantee(epsilon=eps, delta=0.0, rho=eps * eps / 2, mechanism=self.name)

    def run(self, answers: Iterable[int]) -> int | None:
        """Index of the first answer whose noisy value reaches the noisy threshold, else None.

        ``answers`` is consumed lazily, so queries after the reported one are never evaluated.
        Each call is one release (fresh threshold noise).
        """
        noisy_threshold = self.threshold + self.rng.discrete_laplace(self.threshold_scale)
        for i, answer in enumerate(answers):
            if isinstance(answer, bool) or not isinstance(answer, int):
                raise PrivacyParameterError(f"query answers must be ints, got {answer!r}")
            if answer + self.rng.discrete_laplace(self.query_scale) >= noisy_threshold:
                return i
        return None
