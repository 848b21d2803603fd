"""PrivTree (Zhang, Xiao, Xie, SIGMOD 2016): a private partition of ``{0..N-1}`` into leaves, decided exactly.

**Algorithm** (PrivTree, Algorithm 2, on a 1-D integer domain). The root is the whole domain, at
depth 0. A node ``v = [lo, hi)`` at depth ``d(v)`` with true count ``c(v)`` gets the *biased count*
``b(v) = max(c(v) - d(v)·δ, θ - δ)`` and is split into ``β`` children of (nearly) equal width iff
``b(v) + Lap(λ) > θ`` and it holds more than one point; otherwise it is a leaf. ``δ = λ·ln β``.
Only visited nodes exist: the work is O(number of splits · β · log n), never O(N), so ``2^62``
domains are fine. An empty region splits with probability ``Pr[Lap(λ) > δ] = 1/(2β)`` per node, so
its expected number of split children is 1/2 and its subtree stays small (the reason δ is tied to β).

**Privacy** (add/remove-one neighbours ``D' = D ∪ {x}``; the output is the set of leaves). Nodes off
x's root-to-leaf path ``v_0, ..., v_k`` have the same count under D and D', hence the same decision
law. On the path, ``x_i = c(v_i) - i·δ`` is strictly decreasing (counts cannot grow with depth, the
bias grows by δ per level): this is what makes the loss independent of the tree's height.
With ``p(b) = Pr[b + Lap(λ) > θ] = F((b - θ)/λ)`` (F the standard Laplace CDF),
``d ln p/db = min(1, e^{-(b-θ)/λ})/λ`` and ``d ln(1 - p)/db ∈ [-1/λ, 0]``. Then

* ``ln Pr[T|D]/Pr[T|D']``: the split nodes only lose (``p`` grows with the count) and the leaf
  ``v_k`` gains at most ``1/λ`` (its biased count grows by at most 1).
* ``ln Pr[T|D']/Pr[T|D]``: the leaf term is ``<= 0``; the split node ``v_i`` contributes
  ``∫_{b_i}^{b'_i} min(1, e^{-(b-θ)/λ})/λ db`` over an interval of length ``<= 1``, nonzero only where
  ``x_i + 1 > θ - δ`` (a prefix ``i <= m`` of the path, since ``x_i`` decreases). Writing
  ``x_m = θ - δ - 1 + s``: node m gives ``<= min(s, 1)/λ``, node ``m-1-j`` starts at
  ``x >= θ - 1 + s + jδ``, and summing the integrals (``e^{-δ/λ} = 1/β``) the worst case is ``s = 1``:
  ``1/λ + (1 - e^{-1/λ})·β/(β - 1) <= (2β - 1)/((β - 1)·λ)``.

So the partition is ε_p-DP under add/remove-one for ``λ = (2β - 1)/((β - 1)·ε_p)`` (PrivTree's
theorem: the bound does not depend on the depth; our derivation, for the exact decision below,
gives the same constant). **Replace-one** (n public) goes through ``D - {x}``: the first half is an
addition (``<= (2β-1)/((β-1)λ)``), the second a removal (``<= 1/λ``, the leaf term only), so
``λ = ((2β - 1)/(β - 1) + 1)/ε_p`` (``4/ε_p`` at β = 2 instead of the ``6/ε_p`` of group privacy).

**Exact decisions.** No float Laplace is drawn: the decision is one Bernoulli with the exact
probability ``p = F(g)``, ``g = (c - θ)/λ - d·ln β`` clamped at ``g >= -ln β``. Because
``e^{-d·δ/λ} = β^{-d}`` is rational, ``e^{±g}`` is ``e^{∓a}`` (``a = (c - θ)/λ`` rational) times a power
of β, and :func:`~privstream.learning.randomness.exp_neg_bounds` gives certified dyadic bounds on it;
:meth:`~privstream.learning.randomness.RandomSource.bernoulli_below` then compares a lazily revealed
uniform with ``p`` exactly. The released partition has exactly the law analysed above.

>>> from privstream.learning.randomness import seeded
>>> xs = np.array([5] * 200)
>>> edges = privtree_partition(xs, 16, privtree_scale(100.0, 2, "add-remove-one"), 2, seeded(0))
>>> (5 in edges and 6 in edges, edges[0], edges[-1])   # a point of 200 ends in its own leaf
(True, 0, 16)
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Literal

import numpy as np

from privstream.learning.domain import INT64_MAX
from privstream.learning.randomness import RandomSource, exp_neg_bounds

__all__ = [
    "Relation",
    "privtree_partition",
    "privtree_scale",
    "split_probability",
    "split_probability_bounds",
]

Relation = Literal["replace-one", "add-remove-one"]

# Bits of the first certified bound on a split probability (more are added only when needed).
_BASE_BITS = 64


def privtree_scale(epsilon: float | Fraction, fanout: int, relation: Relation) -> Fraction:
    """λ making the partition ``epsilon``-DP under ``relation`` (see the module docstring).

    >>> privtree_scale(1.0, 2, "add-remove-one"), privtree_scale(1.0, 2, "replace-one")
    (Fraction(3, 1), Fraction(4, 1))
    """
    eps = Fraction(epsilon)
    if eps <= 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}")
    _check_fanout(fanout)
    addition = Fraction(2 * fanout - 1, fanout - 1)
    if relation == "add-remove-one":
        return addition / eps
    if relation == "replace-one":
        return (addition + 1) / eps
    raise ValueError(f"unknown neighbouring relation {relation!r}")


def _check_fanout(fanout: int) -> None:
    if isinstance(fanout, bool) or not isinstance(fanout, int) or fanout < 2:
        raise ValueError(f"fanout must be an int >= 2, got {fanout!r}")


def split_probability_bounds(
    count: int, depth: int, lam: Fraction, fanout: int, theta: Fraction, bits: int
) -> tuple[Fraction, Fraction]:
    """Certified ``lo <= Pr[b(v) + Lap(λ) > θ] <= hi`` for a node of ``count`` at bias ``depth``.

    The gap shrinks like ``2^-bits``. ``depth`` is the depth used in the bias (0 drops the bias).
    """
    a = (Fraction(count) - theta) / lam
    power = Fraction(fanout) ** depth
    bits += depth * (fanout - 1).bit_length()  # keep the precision after scaling by β^d
    one = 1 << bits
    if a >= 0:  # y = e^{-g} = β^d·e^{-a}, clamped at y <= β (g >= -ln β); p = 1 - y/2 or 1/(2y)
        lo, hi = exp_neg_bounds(a, bits)
        y_lo = min(power * Fraction(lo, one), Fraction(fanout))
        y_hi = min(power * Fraction(hi, one), Fraction(fanout))
        return _p_of_y(y_hi), _p_of_y(y_lo)  # p decreases in y
    lo, hi = exp_neg_bounds(-a, bits)  # E = e^{g} = e^{a}/β^d < 1, clamped at E >= 1/β; p = E/2
    floor = Fraction(1, fanout)
    return max(Fraction(lo, one) / power, floor) / 2, max(Fraction(hi, one) / power, floor) / 2


def _p_of_y(y: Fraction) -> Fraction:
    return 1 - y / 2 if y <= 1 else 1 / (2 * y)


def split_probability(count: int, depth: int, lam: float, fanout: int, theta: float = 0.0) -> float:
    """The same probability in floating point (for tests and diagnostics, never for a decision).

    >>> round(split_probability(0, 3, 3.0, 2), 6)   # an empty node: 1/(2β)
    0.25
    """
    g = max((count - theta) / lam - depth * math.log(fanout), -math.log(fanout))
    return 1 - 0.5 * math.exp(-g) if g >= 0 else 0.5 * math.exp(g)


def _counter(points: np.ndarray) -> Callable[[int], int]:
    """``rank(t) = #{points < t}`` for any Python int t (points sorted)."""
    if points.dtype == object:
        values = points.tolist()
        return lambda t: bisect.bisect_left(values, t)
    n = int(points.shape[0])

    def rank(t: int) -> int:
        if t > INT64_MAX:
            return n
        return int(np.searchsorted(points, t, side="left"))

    return rank


def privtree_partition(
    points: np.ndarray,
    domain_size: int,
    lam: Fraction,
    fanout: int,
    rng: RandomSource,
    theta: Fraction | int = 0,
    *,
    noise: bool = True,
    depth_bias: bool = True,
) -> list[int]:
    """The leaves of PrivTree over ``{0..domain_size-1}`` as block edges ``[0, ..., domain_size]``.

    ``points`` must be sorted. ``noise=False`` (decide ``b(v) > θ`` without noise) and
    ``depth_bias=False`` (``b(v) = max(c(v), θ - δ)``) are deliberately broken variants for the
    privacy audit only: the first reveals counts, the second lets the loss grow with the depth.
    """
    _check_fanout(fanout)
    lam = Fraction(lam)
    theta = Fraction(theta)
    rank = _counter(points)
    edges: list[int] = []
    stack = [(0, domain_size, 0, rank(0), rank(domain_size))]  # lo, hi, depth, rank(lo), rank(hi)
    while stack:
        lo, hi, depth, r_lo, r_hi = stack.pop()
        width = hi - lo
        if width > 1 and _splits(r_hi - r_lo, depth if depth_bias else 0, lam, fanout, theta, rng, noise):
            k = min(fanout, width)
            cuts = [lo + (width * j) // k for j in range(k + 1)]
            ranks = [r_lo, *(rank(c) for c in cuts[1:-1]), r_hi]
            for j in range(k - 1, -1, -1):  # pushed right to left: leaves come out in order
                stack.append((cuts[j], cuts[j + 1], depth + 1, ranks[j], ranks[j + 1]))
        else:
            edges.append(lo)
    edges.append(domain_size)
    return edges


def _splits(
    count: int, depth: int, lam: Fraction, fanout: int, theta: Fraction, rng: RandomSource, noise: bool
) -> bool:
    if not noise:  # BROKEN on purpose (audits only): the biased count compared without noise
        delta = lam * Fraction(math.log(fanout))
        return max(count - depth * delta, theta - delta) > theta
    return rng.bernoulli_below(
        lambda extra: split_probability_bounds(count, depth, lam, fanout, theta, _BASE_BITS + extra)
    )
