"""Exact private query selection over structured query classes, without enumerating the domain.

MWEM's selection step (Hardt–Ligett–McSherry 2012, step 2) is the exponential mechanism over all
queries with score = signed error ``σ·(q(D) - n·q(A))`` (counts; sensitivity 1 under replace-one
neighbours, because ``q(A)`` depends only on earlier *released* outputs). Using both signs instead
of ``|error|`` keeps the score linear (the candidate set doubles, a ``ln 2`` in the utility bound).

**Structure.** For thresholds/intervals the error is ``G(t) = Σ_{x_i < t} a_i - n·F(t)`` (``a_i``
integer weights of the points, ``F`` the synthetic cumulative mass), and ``G`` is *linear* in t
between consecutive breakpoints (sorted data points + 1 and block edges): :class:`PrefixScore`
builds these O(n + blocks) pieces in O(n log n + blocks), never touching the ``2^32`` cells.

**Exact sampling over linear pieces** (:func:`select_piecewise`). The exact block exponential
mechanism (:meth:`~privstream.learning.mechanisms.ExponentialMechanism.select_member`) needs one
score per block. We cut each piece into sub-pieces on which the score varies by at most
``1/(2κ)`` (``κ = ε/(2Δ)``), give every sub-piece an upper envelope ``U`` (its larger endpoint value
plus a float-safety margin, rounded *up* to the grid ``(2κ)^-1·Z``), draw (sub-piece, member)
from the block mechanism with weights ``size·exp(κ·U)``, and accept member t with probability
``exp(-κ·(U - s(t)))`` -- an exact Bernoulli (:meth:`RandomSource.bernoulli_exp`) on the *exact*
rational score ``s(t)``. One attempt outputs t with probability ``exp(κ·s(t))/Z_U``, so the accepted
output has law ``∝ exp(κ·s(t))``: exactly the exponential mechanism over every candidate. Each
attempt succeeds with probability ``>= e^{-1}`` (range ``<= 1/(2κ)``, rounding ``<= 1/(2κ)``).
The number of sub-pieces is at most ``#pieces + 2κ·TV(G) <= #pieces + 4κn``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.randomness import RandomSource

__all__ = ["Pieces", "PointScore", "PrefixScore", "select_piecewise"]

# Relative float-safety margin of the envelope (float error of the endpoint values is ~1e-13 relative).
_MARGIN = 1e-7


@dataclass(frozen=True)
class Pieces:
    """Candidates ``t`` in ``[s_i, s_i + len_i)`` with score ``values[i] + slopes[i]·(t - s_i)``.

    ``exact(t)`` is the exact rational score (the float arrays only place the envelope);
    ``scale`` bounds the magnitude of the scores (for the float-safety margin).
    """

    starts: np.ndarray
    lengths: np.ndarray
    values: np.ndarray
    slopes: np.ndarray
    exact: Callable[[int], Fraction]
    scale: float


def _envelope_blocks(p: Pieces, kappa: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sub-piece starts, sizes and integer envelopes ``ceil(2κ·(max score + margin))``."""
    span = np.abs(p.slopes) * (p.lengths - 1).astype(np.float64)
    parts = np.minimum(np.maximum(np.ceil(2 * kappa * span), 1), p.lengths).astype(np.int64)
    owner = np.repeat(np.arange(p.starts.shape[0]), parts)
    first = np.cumsum(parts) - parts
    k = np.arange(owner.shape[0]) - first[owner]  # index of the sub-piece inside its piece
    lens = p.lengths[owner]
    lo = (k * lens) // parts[owner]
    hi = ((k + 1) * lens) // parts[owner]  # exclusive
    v_lo = p.values[owner] + p.slopes[owner] * lo
    v_hi = p.values[owner] + p.slopes[owner] * (hi - 1)
    top = np.maximum(v_lo, v_hi)
    top += _MARGIN * (1.0 + p.scale + np.abs(top))
    env = np.ceil(2 * kappa * top).astype(np.int64)
    return p.starts[owner] + lo, hi - lo, env


def select_piecewise(
    families: Sequence[Pieces], epsilon: float, rng: RandomSource, sensitivity: float = 1.0
) -> tuple[int, int]:
    """``(family index, t)`` with probability ``∝ exp(ε·score(t)/(2Δ))`` over all families' candidates.

    Exact (see the module docstring); ε-DP when every score has sensitivity ``Δ``.
    """
    kappa = epsilon / (2 * sensitivity)
    kappa_exact = Fraction(epsilon) / (2 * Fraction(sensitivity))
    starts, sizes, envs, fams = [], [], [], []
    for f, p in enumerate(families):
        s, z, e = _envelope_blocks(p, kappa)
        starts.append(s)
        sizes.append(z)
        envs.append(e)
        fams.append(np.full(s.shape[0], f, dtype=np.int64))
    start = np.concatenate(starts)
    size = np.concatenate(sizes)
    env = np.concatenate(envs)
    fam = np.concatenate(fams)
    # Integer envelopes j have weight exp(j/2): the scaled score 2κ·s has sensitivity 2κΔ = ε,
    # so this is the block mechanism with (ε, Δ' = ε), coefficient exactly 1/2. Sub-pieces with the
    # same envelope are merged into one block (same score: same law), so the mechanism sees only
    # the distinct envelope values (<= 2κ·range + 1), and a member offset is mapped back by bisection.
    order = np.argsort(env, kind="stable")
    env, start, size, fam = env[order], start[order], size[order], fam[order]
    cut = np.flatnonzero(np.diff(env)) + 1
    group_first = np.concatenate([[0], cut])
    # Member offsets across the sorted sub-pieces, in Python ints: two families of 2^62 + 1 candidates
    # (the thresholds of the largest domain, up and down) count past the int64 range.
    size = size.astype(object)
    cum = np.cumsum(size)
    group_sizes = np.add.reduceat(size, group_first)
    mechanism = ExponentialMechanism(epsilon, epsilon, rng=rng)
    blocks = list(zip(group_sizes.tolist(), env[group_first].tolist(), strict=True))
    while True:
        g, offset = mechanism.select_member(blocks)
        before = int(cum[group_first[g]] - size[group_first[g]])
        i = int(np.searchsorted(cum, before + offset, side="right"))
        f, t = int(fam[i]), int(start[i]) + (before + offset - int(cum[i] - size[i]))
        gamma = Fraction(int(env[i]), 2) - kappa_exact * families[f].exact(t)
        if gamma < 0:  # the envelope must bound the exact score; a failure here is a bug
            raise AssertionError(f"envelope below the exact score at t={t} (gap {float(gamma)})")
        if rng.bernoulli_exp(gamma):
            return f, t


class _BlockMass:
    """Exact and float views of a synthetic (signed) mass per block, uniform inside blocks."""

    def __init__(self, edges: np.ndarray, weights: np.ndarray, base: float = 0.0) -> None:
        self.edges = edges  # int64, 0 = e_0 < ... < e_k = N
        self.weights = weights  # float64 per block (may be signed)
        self.lengths = np.diff(edges)
        # base + mass below each block start: one fixed float array, so the exact view is exact
        self.cum = np.cumsum(np.concatenate([[base], weights]))[:-1]
        self.base = base
        self.k = weights.shape[0]

    def block_of(self, t: np.ndarray) -> np.ndarray:
        return np.clip(np.searchsorted(self.edges, t, side="right") - 1, 0, self.k - 1)

    def exact_cdf(self, t: int) -> Fraction:
        j = int(self.block_of(np.array([t]))[0])
        return Fraction(float(self.cum[j])) + Fraction(float(self.weights[j])) * (
            t - int(self.edges[j])
        ) / int(self.lengths[j])

    def exact_density(self, t: int) -> Fraction:
        j = int(self.block_of(np.array([t]))[0])
        return Fraction(float(self.weights[j])) / int(self.lengths[j]) + Fraction(self.base)


class PrefixScore:
    """``G(t) = Σ_{x_i < t} a_i - n·(base + F(t))`` for ``t = 0..N`` as linear pieces.

    ``xs_sorted``/``a_sorted``: the data points (sorted) and their integer weights; ``edges``,
    ``weights``: the synthetic blocks and their (signed) masses; ``n`` the sample size.
    """

    def __init__(
        self,
        xs_sorted: np.ndarray,
        a_sorted: np.ndarray,
        edges: np.ndarray,
        weights: np.ndarray,
        n: int,
        base: float = 0.0,
    ) -> None:
        self.mass = _BlockMass(edges, weights, base)
        self.n = n
        self.xs = xs_sorted
        self.cum_a = np.concatenate([[0], np.cumsum(a_sorted, dtype=np.int64)])
        domain = int(edges[-1])
        # two sorted runs (edges[0] = 0 included): a stable sort merges them in linear time
        breaks = np.concatenate([edges[:-1], xs_sorted + 1])
        breaks.sort(kind="stable")
        keep = np.ones(breaks.shape[0], dtype=bool)
        keep[1:] = breaks[1:] != breaks[:-1]
        breaks = breaks[keep]
        self.starts = breaks[breaks <= domain]
        self.lengths = np.diff(np.append(self.starts, domain + 1))
        j = self.mass.block_of(self.starts)
        density = weights[j] / self.mass.lengths[j]
        f_start = self.mass.cum[j] + density * (self.starts - edges[j])
        counts = self.cum_a[np.searchsorted(xs_sorted, self.starts, side="left")]
        self.g_start = counts - n * f_start
        self.g_slope = -n * density
        self.scale = float(n) * (1.0 + float(np.abs(weights).sum())) + float(np.abs(a_sorted).sum())

    def exact(self, t: int) -> Fraction:
        count = int(self.cum_a[int(np.searchsorted(self.xs, t, side="left"))])
        return count - self.n * self.mass.exact_cdf(t)

    def pieces(self, sign: int, offset: int = 0) -> Pieces:
        """Score ``sign·(offset + G(t))`` (``offset`` an integer, e.g. a label count)."""
        return Pieces(
            self.starts,
            self.lengths,
            sign * (offset + self.g_start),
            sign * self.g_slope,
            lambda t: sign * (offset + self.exact(t)),
            self.scale + abs(offset),
        )

    def values(self) -> np.ndarray:
        """``G(t)`` for every t (float; small domains only -- tests and the dense reference)."""
        values: np.ndarray = np.repeat(self.g_start, self.lengths) + np.concatenate(
            [np.arange(m) * s for m, s in zip(self.lengths, self.g_slope, strict=True)]
        )
        return values


class PointScore:
    """``P(i) = Σ_{x_j = i} a_j - n·(dens(i) + base)`` for ``i = 0..N-1`` (constant on pieces)."""

    def __init__(
        self,
        xs_sorted: np.ndarray,
        a_sorted: np.ndarray,
        edges: np.ndarray,
        weights: np.ndarray,
        n: int,
        base: float = 0.0,
    ) -> None:
        self.mass = _BlockMass(edges, weights, base)
        self.n = n
        uniq, first = np.unique(xs_sorted, return_index=True)
        sums = np.add.reduceat(a_sorted, first) if uniq.size else np.zeros(0, dtype=np.int64)
        self.point_sum: dict[int, int] = dict(zip(uniq.tolist(), sums.tolist(), strict=True))
        domain = int(edges[-1])
        breaks = np.unique(np.concatenate([[0], uniq, uniq + 1, edges[:-1]]))
        self.starts = breaks[breaks < domain]
        self.lengths = np.diff(np.append(self.starts, domain))
        j = self.mass.block_of(self.starts)
        density = weights[j] / self.mass.lengths[j]
        idx = np.searchsorted(uniq, self.starts)
        hit = (
            (idx < uniq.size) & (uniq[np.minimum(idx, max(uniq.size - 1, 0))] == self.starts)
            if uniq.size
            else np.zeros(self.starts.shape[0], dtype=bool)
        )
        counts = np.where(hit, sums[np.minimum(idx, max(uniq.size - 1, 0))] if uniq.size else 0, 0)
        self.p_value = counts - n * (density + base)
        self.scale = float(n) * (1.0 + float(np.abs(weights).sum())) + float(np.abs(a_sorted).sum())

    def exact(self, i: int) -> Fraction:
        return self.point_sum.get(i, 0) - self.n * self.mass.exact_density(i)

    def pieces(self, sign: int, offset: int = 0) -> Pieces:
        zeros = np.zeros(self.starts.shape[0])
        return Pieces(
            self.starts,
            self.lengths,
            sign * (offset + self.p_value),
            zeros,
            lambda i: sign * (offset + self.exact(i)),
            self.scale + abs(offset),
        )
