"""The exponential mechanism over ``intervals:N``, exactly, in O(n log n): the generic learner's sampler.

**Target.** For a sample S, output ``h ∈ intervals:N`` (``1[a <= x < b]``, ``0 <= a < b <= N``,
and the empty function) with probability ``∝ ρ^errors_S(h)``, ``ρ = e^{-c}``, ``c = ε/(2Δ)``
(Δ = 1: the generic learner's score ``-errors`` has sensitivity 1); for every N up to ``2**1024``
and every sample, with no float in any sampling decision and no data-dependent failure. The
class is never enumerated, nor are the O(k²) blocks below (k distinct sample points).

**Blocks** (as in :mod:`~privstream.learning.private_learners.generic.error_levels`). ``v_0 < ... < v_{k-1}``
are the distinct sample points, ``W[j] = Σ_{i<j} (ones(v_i) - zeros(v_i))`` (``W[0] = 0``) and
``O`` the number of ones. ``[a, b)`` with ``α = #{v_j < a} < β = #{v_j < b}`` covers
``v_α .. v_{β-1}`` and errs ``O - (W[β] - W[α])`` times; these intervals form the block
``A_α × B_β``, ``A_α = [v_{α-1}+1, v_α]`` (``[0, v_0]`` for α = 0) and ``B_β = [v_{β-1}+1, v_β]``
(``v_k := N``), with ``|A_α| >= 1`` (α < k) and ``|B_β| >= 1`` (β >= 1). The empty function and
the ``g(g+1)/2`` intervals inside each gap of ``g`` unsampled points err ``O`` times: the *zero
block*, ``Z = 1 + Σ_gaps g(g+1)/2`` members.

**Factorisation.** Let ``M_β = min_{α<β} W[α]`` and ``G* = max(0, max_β (W[β] - M_β))``, the
largest gain. Relative to the best hypothesis, block ``(α, β)`` weighs
``t(α, β) = |A_α|·|B_β|·ρ^(G* - W[β] + W[α])`` and the zero block ``t_0 = Z·ρ^G*``: all exponents
are ``>= 0`` and the best block's is 0, so the total is ``T >= 1``. The weight factorises, and
row β's total is ``R_β = Σ_{α<β} t(α, β) = |B_β|·ρ^(g_β)·F_β`` with ``g_β = G* - W[β] + M_β >= 0``
and ``F_β = Σ_{α<β} |A_α|·ρ^(W[α] - M_β) >= 1`` (the arg-min term has exponent 0). The pairs
``(M_β, F_β)`` (standing for ``ρ^M_β·F_β``) are prefix sums in the monoid
``(M, F) ⊕ (M', F') = (m, F·ρ^(M-m) + F'·ρ^(M'-m))``, ``m = min(M, M')``: one O(k) scan.

**One round of the sampler** (rejection sampling with exact acceptance, as in
:mod:`~privstream.learning.mechanisms.exponential`):

1. propose row β (or the zero block, "row 0") with probability ``Q_β/ΣQ``, ``Q`` integers;
2. in row β propose ``α < β`` with probability ``U_α/ΣU``, integers computed for that row;
3. accept with probability ``a = t(α, β)·2**s·ΣU/(Λ·Q_β·U_α)`` (zero block:
   ``a_0 = t_0·2**s/(Λ·Q_0)``), decided exactly by :meth:`~RandomSource.bernoulli_below` on
   certified bounds of ``ρ^γ`` (:func:`~privstream.learning.randomness.exp_neg_bounds`), ``γ``
   the block's exponent; then output a uniform member of the block, else start a new round.

*Exactness.* ``Pr[propose (α, β)]·a = (Q_β/ΣQ)·(U_α/ΣU)·t(α, β)·2**s·ΣU/(Λ·Q_β·U_α) =
t(α, β)·2**s/(Λ·ΣQ)``, and ``Pr[propose 0]·a_0 = t_0·2**s/(Λ·ΣQ)``: whatever ``Q`` and ``U``
are, a round outputs each block with probability ∝ its weight, as long as every ``a <= 1``.
Rounds are independent, so the output block has law ``t/T``, and a uniform member ``h`` of it
has probability ``ρ^(errors(h) - min errors)/T``: exactly the exponential mechanism.

*Why a <= 1.* ``Q`` and ``U`` come from :mod:`~privstream.learning.private_learners.generic.extended_floats`
(floats with an unbounded exponent: each operation returns its exact result times a factor in
``[1/φ, φ]``, ``φ = 1/(1 - 2**-52)``), turned into integers by
:func:`~privstream.learning.private_learners.generic.extended_floats.to_integer_weights`. Powers
``ρ^d`` come from a table (:class:`_Powers`) within ``[φ^-m_T, φ^m_T]`` of ``ρ^d`` for
``d < cut``; beyond, ``ψ = 2**-L >= ρ^d`` exactly (``cut = ceil(L·ln 2/c)``,
``L = 2·bitlen(N) + bitlen(k+1) + 64``, so ``N·ψ <= 2**-64``). A chain of the scan has at most
``k - 1`` combines (each brings at least one more point before β), each at most ``m_T + 2``
operations, so ``F̂_β >= φ^-m_F·F_β``, ``m_F = 1 + (k-1)(m_T+2)``, and ``Q_β >= 2**s·φ^-m_H·R_β``,
``Q_0 >= 2**s·φ^-m_H·t_0``, ``m_H = m_F + m_T + 3``. In row β, ``x̂_α = |Â_α|·ρ̂^(W[α]-M_β)``
lies in ``[φ^-m_x, φ^m_x]`` times ``|A_α|ρ^(W[α]-M_β)`` (at most ``|A_α|ψ`` if clipped),
``m_x = m_T + 2``, so ``U_α >= 2**s'·φ^-m_x·|A_α|ρ^(W[α]-M_β)``, ``ΣU <= 2**s'·Σx̂ + β``,
``Σx̂ <= φ^m_x·(F_β + Nψ) <= φ^m_x(1 + Nψ)F_β`` and ``2**s'·Σx̂ >= 2**57``. Hence

    a·Λ = [|A_α|ρ^(W[α]-M_β)/U_α]·[|B_β|ρ^g_β·2**s/Q_β]·ΣU
        <= 2**-s'φ^m_x · φ^m_H/F_β · (2**s'φ^m_x(1 + Nψ)F_β + β)
        <= φ^(m_H + 2m_x)·(1 + Nψ)·(1 + k·2**-57) =: Λ,

and ``a_0·Λ <= φ^m_H <= Λ``. (``Λ`` is an exact rational: :func:`phi_power`.)

*Rounds.* A round accepts with probability ``T·2**s/(Λ·ΣQ)``. The same error model bounds
``Q`` from above (``Ĥ_β <= φ^m_H·(R_β + 2N²ψ)``, ``ΣQ <= 2**s·ΣĤ + k + 1`` with
``2**s·ΣĤ >= 2**57``, and ``T >= 1``), so a round accepts with probability at least
``1/(Λ·φ^m_H·(1 + 2**-60)(1 + (k+1)·2**-57))``: about ``1 - 400k·2**-52`` (``1 - 10**-6`` at
``k = 10**7``, above 0.9 for every ``k < 2**40``). The expected number of rounds depends on
the data only through k; the zero block's member is drawn by a second rejection (gap j
proposed ∝ ``4^bitlen(g_j)``, accepted with probability ``g_j(g_j+1)/2 / 4^bitlen(g_j) > 1/8``).

**Cost.** Sorting the sample, O(n log n); the table, O(√min(cut, n)) entries from O(log n)
certified powers; the scan and the row weights, O(k) vectorised (the scan in ``√k`` columns);
each round O(k) vectorised plus one exact comparison (O(1) refinements expected). A window of
10**7 examples on ``intervals:2^32`` takes 6 to 14 s on a loaded 2-core machine (about 2 s of it
the sort), one round in every run measured, and 0.4 to 1.6 s on ``intervals:65536``, 140 to 300
times less than the O(k²) level counts (``benchmarks/bench_interval_sampler.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import NamedTuple, overload

import numpy as np

from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import Intervals, interval_hypothesis
from privstream.learning.mechanisms._common import positive_real
from privstream.learning.private_learners.generic.error_levels import nth_pair, summarise
from privstream.learning.private_learners.generic.extended_floats import (
    XFloats,
    from_ints,
    mul,
    phi_power,
    to_integer_weights,
)
from privstream.learning.randomness import RandomSource, exp_neg_bounds

__all__ = ["IntervalSampler", "Proposal", "sample_interval"]

#: ``ρ̂^d`` is a product of at most 63 certified powers ``ρ^(2^j)`` (each within ``[φ^-1, φ^2]``)
#: by at most 62 multiplications: its factor is within ``[φ^-M_T, φ^M_T]``.
M_T = 3 * 64
#: An upper bound on ln 2 = 0.693147180559945309...
_LN2_UPPER = Fraction(6931471805599454, 10**16)
_TWO_LEVEL = 1 << 16  # tables longer than this are split into a high and a low table
_CHUNK = 1 << 16  # elementwise work on long arrays goes by slices of this length
#: weights with their extended floats ``(w, m, e)``: one array each
_Triple = tuple[np.ndarray, np.ndarray, np.ndarray]


def sample_interval(
    hclass: Intervals,
    xs: np.ndarray,
    ys: np.ndarray,
    epsilon: float,
    rng: RandomSource,
    *,
    sensitivity: float = 1,
) -> Hypothesis:
    """One exact draw of the exponential mechanism with score ``-errors`` over ``hclass``.

    ``xs``, ``ys`` are validated (:func:`~privstream.learning.private_learners.base.check_sample`).

    >>> from privstream.learning.randomness import seeded
    >>> xs, ys = np.array([10, 20, 30]), np.array([0, 1, 0], dtype=np.uint8)
    >>> h = sample_interval(Intervals(64), xs, ys, 20.0, seeded(1))
    >>> h.predict(xs).tolist()  # at ε = 20 (ρ = e^-10) a consistent interval is very likely
    [0, 1, 0]
    """
    return IntervalSampler(hclass, xs, ys, epsilon, sensitivity=sensitivity).draw(rng)


class Proposal(NamedTuple):
    """One proposed block: ``row`` β (0: the zero block) and ``alpha`` with its weight ``U_α`` of ``ΣU``."""

    row: int
    alpha: int
    weight: int
    row_total: int


class IntervalSampler:
    """The exponential mechanism over ``intervals:N`` for one sample (see the module docstring).

    Built in O(n log n); :meth:`draw` takes one exact sample. The other public methods expose the
    proposal and acceptance of a round, for the exact checks in the tests.
    """

    def __init__(
        self, hclass: Intervals, xs: np.ndarray, ys: np.ndarray, epsilon: float, *, sensitivity: float = 1
    ) -> None:
        self.domain_size = n_dom = hclass.domain_size
        self.coefficient = positive_real(epsilon, "epsilon") / (2 * positive_real(sensitivity, "sensitivity"))
        s = summarise(xs, ys, n_dom)
        self.k = k = s.k
        vals = s.vals  # uint64 (N < 2**64) or Python ints
        one = np.uint64(1) if vals.dtype == np.uint64 else 1
        self._starts = np.concatenate((np.array([0], dtype=vals.dtype), vals + one))  # of A_j, B_j, gap j
        self._size_a = self._starts[1:] - self._starts[:-1]  # |A_α|, α < k
        ends = np.concatenate((vals, np.array([n_dom], dtype=vals.dtype)))
        self._size_b = ends[1:] - vals  # |B_β|, β = 1..k
        self._gaps = ends - self._starts  # unsampled points in gap j = 0..k
        self._walk = s.walk
        self._prefix_min = np.minimum.accumulate(self._walk[:k])  # M_β, β = 1..k
        gain = int((self._walk[1:] - self._prefix_min).max()) if k else 0
        self.best_gain = max(gain, 0)  # G*
        self.zero_block = 1 + _in_gap_count(self._gaps, n_dom - k)  # Z
        self.clip_bits = 2 * n_dom.bit_length() + (k + 1).bit_length() + 64  # L
        spread = int(self._walk.max() - self._walk.min())
        self._powers = _Powers(self.coefficient, self.clip_bits, largest=2 * spread + self.best_gain)
        # The row weights Ĥ_β = |B_β|·ρ^g_β·F̂_β and the zero block's Ĥ_0 = Z·ρ^G*, as integers Q.
        self._am, self._ae = _by_chunks(k, lambda part: from_ints(self._size_a[part]))
        _, fm, fe = _prefix_sums(self._walk[:k], self._am, self._ae, self._powers)

        def row_weight(part: slice) -> tuple[np.ndarray, np.ndarray]:
            gap = self.best_gain - self._walk[1:][part] + self._prefix_min[part]  # g_β
            bm, be = mul(*from_ints(self._size_b[part]), *self._powers(gap))
            return mul(bm, be, fm[part], fe[part])

        hm, he = _by_chunks(k, row_weight)
        zm, ze = mul(*from_ints([self.zero_block]), *self._powers(np.array([self.best_gain])))
        self._row_weights, self._shift = to_integer_weights(
            np.concatenate((zm, hm)), np.concatenate((ze, he))
        )
        self._row_cumulative = np.cumsum(self._row_weights)
        m_x = M_T + 2
        m_h = 1 + 2 * k.bit_length() * (M_T + 2) + M_T + 3
        self.slack = (
            phi_power(m_h + 2 * m_x) * (1 + Fraction(n_dom, 1 << self.clip_bits)) * (1 + Fraction(k, 1 << 57))
        )  # Λ

    # -- one round -----------------------------------------------------------------------------

    def draw(self, rng: RandomSource) -> Hypothesis:
        """One exact draw: rounds of propose-and-accept, then a uniform member of the block."""
        while True:
            proposal = self.propose(rng)
            factor, gamma = self.acceptance(proposal)
            if _bernoulli_times_power(rng, factor, self.coefficient * gamma):
                return self._member(proposal, rng)

    def propose(self, rng: RandomSource) -> Proposal:
        """A row with probability ``Q_β/ΣQ``, then in it ``α`` with probability ``U_α/ΣU``."""
        row = _pick(self._row_cumulative, rng)
        if row == 0:
            return Proposal(0, -1, 1, 1)
        cumulative = np.cumsum(self.alpha_weights(row))
        alpha = _pick(cumulative, rng)
        return Proposal(
            row, alpha, int(cumulative[alpha] - (cumulative[alpha - 1] if alpha else 0)), int(cumulative[-1])
        )

    def alpha_weights(self, row: int) -> np.ndarray:
        """The integers ``U_α`` (``α < β = row``) bounding ``|A_α|·ρ^(W[α] - M_β)`` from above."""
        reference = self._prefix_min[row - 1]

        def weight(part: slice) -> tuple[np.ndarray, np.ndarray]:
            return mul(self._am[part], self._ae[part], *self._powers(self._walk[part] - reference))

        return to_integer_weights(*_by_chunks(row, weight))[0]

    def acceptance(self, proposal: Proposal) -> tuple[Fraction, int]:
        """The acceptance probability as ``(factor, γ)``: ``a = factor·ρ^γ``, ``γ >= 0`` an integer."""
        row = proposal.row
        scale = Fraction(2) ** self._shift / (self.slack * int(self._row_weights[row]))
        if row == 0:
            return self.zero_block * scale, self.best_gain
        alpha = proposal.alpha
        sizes = int(self._size_a[alpha]) * int(self._size_b[row - 1])
        gamma = self.best_gain - int(self._walk[row]) + int(self._walk[alpha])
        return sizes * proposal.row_total * scale / proposal.weight, gamma

    def proposal_probability(self, proposal: Proposal) -> Fraction:
        """The exact probability that :meth:`propose` returns this row and ``α``."""
        p = Fraction(int(self._row_weights[proposal.row]), int(self._row_cumulative[-1]))
        return p if proposal.row == 0 else p * Fraction(proposal.weight, proposal.row_total)

    def proposals(self) -> list[Proposal]:
        """Every possible proposal (O(k²): for the exact checks on small samples)."""
        out = [Proposal(0, -1, 1, 1)]
        for row in range(1, self.k + 1):
            weights = self.alpha_weights(row)
            total = int(weights.sum())
            out.extend(Proposal(row, alpha, int(w), total) for alpha, w in enumerate(weights))
        return out

    def block_size(self, proposal: Proposal) -> int:
        """The number of intervals in the proposed block."""
        if proposal.row == 0:
            return self.zero_block
        return int(self._size_a[proposal.alpha]) * int(self._size_b[proposal.row - 1])

    # -- members -------------------------------------------------------------------------------

    def _member(self, proposal: Proposal, rng: RandomSource) -> Hypothesis:
        n_dom = self.domain_size
        if proposal.row == 0:
            return self._zero_member(rng)
        alpha, row = proposal.alpha, proposal.row
        a = int(self._starts[alpha]) + rng.uniform_int(int(self._size_a[alpha]))
        b = int(self._starts[row]) + rng.uniform_int(int(self._size_b[row - 1]))
        return interval_hypothesis(n_dom, a, b)

    def _zero_member(self, rng: RandomSource) -> Hypothesis:
        """Uniform over the empty function and the intervals inside the gaps."""
        n_dom = self.domain_size
        if rng.uniform_int(self.zero_block) == 0:
            return interval_hypothesis(n_dom, 0, 0)
        lengths = _bit_lengths(self._gaps)
        counts = {b: int(c) for b, c in enumerate(np.bincount(lengths)) if b > 0 and c > 0}
        groups = sorted(counts)
        total = sum(counts[b] << (2 * b) for b in groups)
        while True:  # gap j proposed ∝ 4^bitlen(g_j), accepted with probability g(g+1)/2 / 4^bitlen(g)
            r = rng.uniform_int(total)
            for b in groups:
                r -= counts[b] << (2 * b)
                if r < 0:
                    break
            j = int(np.flatnonzero(lengths == b)[rng.uniform_int(counts[b])])
            g = int(self._gaps[j])
            inside = g * (g + 1) // 2
            if rng.uniform_int(1 << (2 * b)) < inside:
                i, i2 = nth_pair(g, rng.uniform_int(inside))
                start = int(self._starts[j])
                return interval_hypothesis(n_dom, start + i, start + i2)


# -- exact pieces ---------------------------------------------------------------------------------


def _pick(cumulative: np.ndarray, rng: RandomSource) -> int:
    """Index i with probability ``(cumulative[i] - cumulative[i-1]) / cumulative[-1]`` (exact ints)."""
    return int(np.searchsorted(cumulative, rng.uniform_int(int(cumulative[-1])), side="right"))


def _bernoulli_times_power(rng: RandomSource, factor: Fraction, gamma: Fraction) -> bool:
    """Exact Bernoulli(``factor·e^-γ``) for ``0 <= factor·e^-γ <= 1``, ``γ >= 0``."""
    bits = 72 + max(0, factor.numerator.bit_length() - factor.denominator.bit_length())

    def bounds(extra: int) -> tuple[Fraction, Fraction]:
        lo, hi = exp_neg_bounds(gamma, bits + extra)
        scale = factor / (1 << (bits + extra))
        return lo * scale, hi * scale

    return rng.bernoulli_below(bounds)


def _in_gap_count(gaps: np.ndarray, gap_total: int) -> int:
    """``Σ g(g+1)/2`` exactly; ``gap_total = Σ g``. ``uint64`` gaps: ``Σ g²`` by 16-bit limbs."""
    if gaps.dtype != np.uint64:
        return sum(int(g) * (int(g) + 1) // 2 for g in gaps)
    limbs = [
        (gaps >> np.uint64(16 * i)) & np.uint64(0xFFFF)
        for i in range(-(-int(gaps.max(initial=0)).bit_length() // 16))
    ]
    squares = 0
    for start in range(0, gaps.shape[0], 1 << 31):  # every limb product < 2**32: 2**31 of them fit
        chunk = [limb[start : start + (1 << 31)] for limb in limbs]
        for i, low in enumerate(chunk):
            for j in range(i, len(chunk)):
                part = int((low * chunk[j]).sum(dtype=np.uint64))
                squares += (part << (16 * (i + j))) * (1 if i == j else 2)
    return (squares + gap_total) // 2


def _bit_lengths(values: np.ndarray) -> np.ndarray:
    """``int(v).bit_length()`` for every entry, exactly (``uint64`` by halving, else Python ints)."""
    if values.dtype != np.uint64:
        return np.array([int(v).bit_length() for v in values], dtype=np.int64)
    rest = values.copy()
    lengths = np.zeros(values.shape, dtype=np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        big = (rest >> np.uint64(step)) > 0
        lengths += step * big
        rest = np.where(big, rest >> np.uint64(step), rest)
    return lengths + (rest > 0)


# -- ρ^d ------------------------------------------------------------------------------------------


class _Powers:
    """``ρ̂^d`` for integer arrays ``d >= 0``: extended floats within ``[φ^-M_T, φ^M_T]·ρ^d``,
    and ``ψ = 2**-clip_bits`` (exact) once ``d >= cut``, where ``ρ^cut <= ψ``.

    The table covers ``d < min(cut, largest + 1)``: products of the certified powers
    ``ρ^(2^j)`` (:func:`_certified_power`), built by doubling, split in a high and a low table
    (``ρ^d = ρ^(h·2^b)·ρ^l``) when it would be long; ``ψ`` is its last entry when ``cut`` is
    within reach.
    """

    def __init__(self, coefficient: Fraction, clip_bits: int, largest: int) -> None:
        self.cut = math.ceil(clip_bits * _LN2_UPPER / coefficient)  # c·cut >= L·ln 2: ρ^cut <= 2**-L
        self.clips = self.cut <= largest
        size = min(self.cut, largest + 1)
        bits = (size - 1).bit_length()
        self.low_bits = bits if size <= _TWO_LEVEL else (bits + 1) // 2
        bases = [_certified_power(coefficient, 1 << j) for j in range(bits)]
        low_m, low_e = _doubling_table(bases[: self.low_bits])
        self.high = _doubling_table(bases[self.low_bits :]) if bits > self.low_bits else None
        if self.clips and self.high is None:  # entry `cut` is ψ: clipping is one minimum
            low_m = np.concatenate((low_m[: self.cut], [0.5]))
            low_e = np.concatenate((low_e[: self.cut], [1 - clip_bits]))
        self.low = (low_m, low_e)
        self.clip_bits = clip_bits

    def __call__(self, d: object) -> tuple[np.ndarray, np.ndarray]:
        d = np.asarray(d, dtype=np.int64)
        low_m, low_e = self.low
        if self.high is None:
            if self.clips:
                d = np.minimum(d, self.cut)
            return np.take(low_m, d), np.take(low_e, d)
        if self.clips:
            clipped = d >= self.cut
            d = np.where(clipped, 0, d)
        low, high = d & ((1 << self.low_bits) - 1), d >> self.low_bits
        m, e = mul(
            np.take(low_m, low), np.take(low_e, low), np.take(self.high[0], high), np.take(self.high[1], high)
        )
        if self.clips:
            m, e = np.where(clipped, 0.5, m), np.where(clipped, 1 - self.clip_bits, e)
        return m, e


def _certified_power(coefficient: Fraction, exponent: int) -> tuple[float, int]:
    """``ρ^exponent`` as an extended float within ``[φ^-1, φ^2]·ρ^exponent``.

    :func:`exp_neg_bounds` gives integers ``lo <= e^-γ·2**bits <= hi``; more bits until
    ``hi/lo <= φ``. The float nearest to ``hi`` is within ``[φ^-1, φ]·hi``.
    """
    gamma = coefficient * exponent
    bits = 128 + math.ceil(gamma * 3 / 2)  # log2(e) < 3/2: e^-γ·2**bits >= 2**128
    while True:
        lo, hi = exp_neg_bounds(gamma, bits)
        if lo > 0 and hi * ((1 << 52) - 1) <= lo << 52:
            m, e = from_ints([hi])
            return float(m[0]), int(e[0]) - bits
        bits += 64


def _doubling_table(bases: list[tuple[float, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Entry ``i`` is the product of the bases at the set bits of ``i`` (entry 0 is 1)."""
    m, e = np.array([0.5]), np.array([1], dtype=np.int64)
    for bm, be in bases:
        pm, pe = mul(m, e, np.float64(bm), np.int64(be))
        m, e = np.concatenate((m, pm)), np.concatenate((e, pe))
    return m, e


# -- the prefix scan ------------------------------------------------------------------------------


def _combine(
    w1: np.ndarray,
    m1: np.ndarray,
    e1: np.ndarray,
    w2: np.ndarray,
    m2: np.ndarray,
    e2: np.ndarray,
    powers: _Powers,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(w1, F1) ⊕ (w2, F2) = (min, F·ρ^|w1 - w2| + F')``: the side with the larger reference scaled.

    Written out (a :func:`mul` whose product is added before being renormalised, and one
    :func:`add`) to save passes over the arrays; the roundings are those of ``mul`` then ``add``.
    """
    gap = w2 - w1
    first_low = gap >= 0
    tm, te = powers(np.abs(gap))
    scaled_m = np.where(first_low, m2, m1) * tm  # in [1/4, 1): a normal float
    scaled_e = np.where(first_low, e2, e1) + te
    kept_m, kept_e = np.where(first_low, m1, m2), np.where(first_low, e1, e2)
    top = np.maximum(kept_e, scaled_e)
    total_m, shift = np.frexp(np.ldexp(kept_m, kept_e - top) + np.ldexp(scaled_m, scaled_e - top))
    return np.minimum(w1, w2), total_m, top + shift


def _prefix_sums(
    w: np.ndarray, m: np.ndarray, e: np.ndarray, powers: _Powers
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inclusive ⊕-prefix sums of the elements ``(w_i, m_i·2**e_i)``, in O(k) vectorised work.

    The classic work-efficient scan: combine neighbours ``(0,1), (2,3), ...``, scan those
    ``k/2`` sums recursively (which gives the odd positions), then combine each even position
    with the prefix before it. Every element reaches an output through at most two combines per
    level: ``2·bitlen(k)`` in all.
    """
    k = w.shape[0]
    if k <= 1:
        return w.copy(), m.copy(), e.copy()
    half = k // 2

    def pairs(part: slice) -> _Triple:
        return _combine(
            w[0::2][part], m[0::2][part], e[0::2][part], w[1::2][part], m[1::2][part], e[1::2][part], powers
        )

    pw, pm, pe = _prefix_sums(*_by_chunks(half, pairs), powers)  # prefix up to 2i+1

    def evens(part: slice) -> _Triple:  # position 2i + 2 = prefix to 2i+1 ⊕ element 2i+2
        return _combine(pw[part], pm[part], pe[part], w[2::2][part], m[2::2][part], e[2::2][part], powers)

    ew, em, ee = _by_chunks((k - 1) // 2, evens)
    out = (np.empty_like(w), np.empty_like(m), np.empty_like(e))
    for full, first, odd, even in zip(out, (w, m, e), (pw, pm, pe), (ew, em, ee), strict=True):
        full[0], full[1::2], full[2::2] = first[0], odd, even
    return out


@overload
def _by_chunks(length: int, compute: Callable[[slice], XFloats]) -> XFloats: ...
@overload
def _by_chunks(length: int, compute: Callable[[slice], _Triple]) -> _Triple: ...
def _by_chunks(length: int, compute: Callable[[slice], tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    """``compute`` over slices of about 2**16 elements, concatenated: the temporaries stay in cache."""
    parts = [compute(slice(start, min(start + _CHUNK, length))) for start in range(0, length, _CHUNK)]
    if not parts:
        return tuple(np.zeros(0, dtype=a.dtype) for a in compute(slice(0, 0)))
    return tuple(np.concatenate(columns) for columns in zip(*parts, strict=True))
