"""Exact private selection: the exponential mechanism (dense and over blocks) and permute-and-flip.

Exponential mechanism [S Lemma 3.2] (McSherry-Talwar 2007; ABLMM22 Lem 29): output
candidate h with probability ∝ exp(ε·score(h)/(2Δ)) where each score has sensitivity Δ; this is
ε-DP, and ε-bounded-range, hence (ε²/8)-zCDP (Cesar-Rogers 2021, Lemma 3.2).

**Blocks.** Huge structured candidate sets (thresholds, intervals, points over domains of 2^63)
are given as blocks ``(size, score)``: ``size`` members (any Python int) sharing one score.
:meth:`ExponentialMechanism.select_block` picks block i with probability exactly
size_i·exp(-γ_i) / Σ_j size_j·exp(-γ_j), γ_i = ε(s_max - s_i)/(2Δ) (rational); the caller then
draws a member uniformly (:meth:`ExponentialMechanism.select_member` does both). That is the
exponential mechanism over the members.

**Why it is exact** (no float softmax, no float CDF inversion, both attackable):
rejection sampling with an exactly-sampled proposal and an exactly-decided acceptance.

1. Proposal: integer weights Q_i >= size_i·exp(-γ_i)·2^S with S = precision + log2(#blocks),
   from certified upper bounds on exp(-γ_i) (:func:`~privstream.learning.randomness.exp_neg_bounds`,
   integer arithmetic with directed rounding). Block i is proposed with probability Q_i/ΣQ by an
   exact uniform integer draw.
2. Acceptance with probability size_i·exp(-γ_i)·2^S / Q_i <= 1, decided by comparing a lazily
   revealed uniform with certified bounds refined until the comparison is certain
   (:meth:`~privstream.learning.randomness.RandomSource.bernoulli_below`).

The output law is therefore proportional to Q_i·(size_i exp(-γ_i) 2^S/Q_i) = 2^S·size_i·exp(-γ_i):
exactly the target. Each Q_i overestimates by at most ~1 unit out of 2^S·w_i (plus 1 unit for
negligible blocks), so the expected number of rounds is 1 + O(#blocks·2^-S) and a draw costs
O(#blocks) big-int operations (one exp bound per distinct score).

Permute-and-flip (McKenna-Sheldon 2020, Thm 1): visit candidates in a uniformly random order and
stop at the first success of Bernoulli(exp(ε(s - s_max)/(2Δ))) -- sampled exactly
(:meth:`~privstream.learning.randomness.RandomSource.bernoulli_exp`); ε-DP, never worse in
utility than the exponential mechanism.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import ClassVar

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.errors import PrivacyParameterError
from privstream.learning.mechanisms._common import (
    ExactReal,
    Mechanism,
    exact_real,
    positive_int,
    positive_real,
)
from privstream.learning.randomness import RandomSource, exp_neg_bounds

__all__ = ["Block", "ExponentialMechanism", "PermuteAndFlip"]

#: (number of members, common score); sizes may be arbitrarily large Python ints.
Block = tuple[int, ExactReal]

_GUARD_BITS = 8


class _Selection(Mechanism):
    """Shared parameters: ε and the score sensitivity Δ; coefficient ε/(2Δ) kept exact."""

    def __init__(
        self, epsilon: ExactReal, sensitivity: ExactReal = 1, *, rng: RandomSource | None = None
    ) -> None:
        super().__init__(rng)
        eps = positive_real(epsilon, "epsilon")
        delta_score = positive_real(sensitivity, "sensitivity")
        self.epsilon = float(eps)
        self.sensitivity = float(delta_score)
        self._coefficient: Fraction = eps / (2 * delta_score)

        self._gamma_cache: dict[int | Fraction, Fraction] = {}

    def _gaps(self, scores: Sequence[ExactReal], sizes: Sequence[int] | None = None) -> list[int | Fraction]:
        """Exact score gaps s_max - s_i >= 0; s_max over candidates that can be chosen."""
        # ints (the usual "minus error count" scores) skip the Fraction conversion
        exact = [s if type(s) is int else exact_real(s, "score") for s in scores]
        live = exact if sizes is None else [s for s, n in zip(exact, sizes, strict=True) if n > 0]
        if not live:
            raise PrivacyParameterError("selection needs at least one candidate")
        top = max(live)
        return [top - s for s in exact]

    def _gamma(self, gap: int | Fraction) -> Fraction:
        """γ = ε·gap/(2Δ), cached per distinct gap."""
        gamma = self._gamma_cache.get(gap)
        if gamma is None:
            if len(self._gamma_cache) > 4096:
                self._gamma_cache.clear()
            gamma = self._gamma_cache[gap] = self._coefficient * gap
        return gamma


class ExponentialMechanism(_Selection):
    """ε-DP exponential mechanism with exact sampling, over a dense list or over blocks.

    >>> from privstream.learning.randomness import seeded
    >>> em = ExponentialMechanism(epsilon=1.0, rng=seeded(7))
    >>> em.guarantee().epsilon, em.guarantee().rho
    (1.0, 0.125)
    >>> block, member = em.select_member([(2**64, -3), (1, 0), (10**6, -1)])
    >>> block in (0, 1, 2)
    True
    """

    name: ClassVar[str] = "exponential"

    def __init__(
        self,
        epsilon: ExactReal,
        sensitivity: ExactReal = 1,
        *,
        rng: RandomSource | None = None,
        precision: int = 64,
    ) -> None:
        super().__init__(epsilon, sensitivity, rng=rng)
        #: bits of the proposal weights; affects speed only, never the output law
        self.precision = positive_int(precision, "precision")

    def guarantee(self) -> PrivacyGuarantee:
        eps = self.epsilon
        return PrivacyGuarantee(epsilon=eps, delta=0.0, rho=eps * eps / 8, mechanism=self.name)

    # -- sampling -------------------------------------------------------------------------------

    def select(self, scores: Sequence[ExactReal]) -> int:
        """Index i with probability ∝ exp(ε·scores[i]/(2Δ))."""
        return self.select_block([(1, s) for s in scores])

    def select_block(self, blocks: Sequence[Block]) -> int:
        """Block index i with probability ∝ size_i·exp(ε·score_i/(2Δ)), exactly."""
        sizes, gaps = self._validate_blocks(blocks)
        return self._sample(sizes, gaps)

    def select_member(self, blocks: Sequence[Block]) -> tuple[int, int]:
        """(block index, member offset uniform in [0, size)): one exponential-mechanism draw."""
        i = self.select_block(blocks)
        return i, self.rng.uniform_int(int(blocks[i][0]))

    # -- exact law (for tests, audits and accuracy calculations; floats, never used to sample) --

    def probabilities(self, scores: Sequence[ExactReal]) -> list[float]:
        return self.block_probabilities([(1, s) for s in scores])

    def block_probabilities(self, blocks: Sequence[Block]) -> list[float]:
        """Pr[block i] = size_i e^{-γ_i} / Σ size_j e^{-γ_j}, computed in log space."""
        sizes, gaps = self._validate_blocks(blocks)
        logs = [
            math.log(n) - float(self._gamma(g)) if n else -math.inf for n, g in zip(sizes, gaps, strict=True)
        ]
        top = max(logs)
        weights = [math.exp(v - top) for v in logs]
        total = math.fsum(weights)
        return [w / total for w in weights]

    # -- internals ------------------------------------------------------------------------------

    def _validate_blocks(self, blocks: Sequence[Block]) -> tuple[list[int], list[int | Fraction]]:
        sizes: list[int] = []
        scores: list[ExactReal] = []
        for block in blocks:
            try:
                size, score = block
            except (TypeError, ValueError) as exc:
                raise PrivacyParameterError(f"a block is a (size, score) pair, got {block!r}") from exc
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise PrivacyParameterError(f"block size must be an int >= 0, got {size!r}")
            sizes.append(size)
            scores.append(score)
        return sizes, self._gaps(scores, sizes)

    def _sample(self, sizes: list[int], gaps: list[int | Fraction]) -> int:
        scale_bits = self.precision + len(sizes).bit_length()
        width = max(sizes).bit_length() + _GUARD_BITS
        bits = scale_bits + width
        upper: dict[int | Fraction, int] = {}  # one certified exp bound per distinct gap
        proposal = []
        for n, g in zip(sizes, gaps, strict=True):
            if n == 0:
                proposal.append(0)
                continue
            if g not in upper:
                upper[g] = exp_neg_bounds(self._gamma(g), bits)[1]
            # ceil(n · hi / 2^width) >= n · exp(-g) · 2^S
            proposal.append(-((-n * upper[g]) >> width))
        cumulative = list(itertools.accumulate(proposal))
        total = cumulative[-1]
        while True:
            i = bisect.bisect_right(cumulative, self.rng.uniform_int(total))
            if self._accept(sizes[i], self._gamma(gaps[i]), proposal[i], scale_bits):
                return i

    def _accept(self, size: int, gap: Fraction, weight: int, scale_bits: int) -> bool:
        """Bernoulli(size·exp(-gap)·2^S / weight), decided exactly."""
        base = scale_bits + size.bit_length() + _GUARD_BITS

        def bounds(extra: int) -> tuple[Fraction, Fraction]:
            bits = base + extra
            lo, hi = exp_neg_bounds(gap, bits)
            den = weight << (bits - scale_bits)
            return Fraction(size * lo, den), Fraction(size * hi, den)

        return self.rng.bernoulli_below(bounds)


class PermuteAndFlip(_Selection):
    """ε-DP permute-and-flip selection (McKenna-Sheldon 2020), exact coins."""

    name: ClassVar[str] = "permute_and_flip"

    def guarantee(self) -> PrivacyGuarantee:
        eps = self.epsilon
        return PrivacyGuarantee(epsilon=eps, delta=0.0, rho=eps * eps / 2, mechanism=self.name)

    def select(self, scores: Sequence[ExactReal]) -> int:
        """Index of the first candidate, in uniformly random order, whose exact coin succeeds."""
        gaps = self._gaps(scores)
        order = list(range(len(gaps)))
        for j in range(len(order)):  # lazy Fisher-Yates: stop at the first success
            k = j + self.rng.uniform_int(len(order) - j)
            order[j], order[k] = order[k], order[j]
            if self.rng.bernoulli_exp(self._gamma(gaps[order[j]])):
                return order[j]
        raise AssertionError("unreachable: the top candidate succeeds with probability 1")
