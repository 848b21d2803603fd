"""Algorithm G: the globally-stable learner for Littlestone classes (Bun–Livni–Moran).

BLM20 Sec 4 and ABLMM22 Sec 5.2 (with the corrections noted below). On a sample of size ``m`` from a
realizable distribution D, G outputs one fixed function f* with probability at least
``eta_G = 1/((d+1)·2^(2^(d+2)+1))`` and ``loss_D(f*) <= alpha`` ([ABLMM22 Thm 23] as proved), where
``d = Ldim(H) >= 1``. It runs the (extended, deterministic) SOA of :mod:`privstream.learning.soa`
on samples built by *tournaments*:

* ``D~_0`` is the empty sample; ``D~_k`` draws ``S_0, S_1 ~ D~_(k-1)`` and fresh blocks ``T_0, T_1``
  of ``n_aux`` examples, runs ``f_i = SOA(S_i∘T_i)``, retries while ``f_0 = f_1`` (as functions),
  then takes the first point ``x`` where they disagree and a uniform label ``y`` and returns the
  sample of the loser ``S_i∘T_i∘(x, y)`` (the one with ``f_i(x) != y``, which the SOA must then
  err on: Observation 11/24).
* Every example "drawn from D" is taken, in order, from a fixed *pool* (the first ``budget``
  examples of the batch); asking for more than ``budget`` examples gives "Fail" (ABLMM22 Sec 5.2.3, the
  Monte-Carlo variant ``D~_k``).
* G draws the depth k uniformly from ``{0..max_depth}`` (``max_depth = d`` in the theorem), samples
  ``S ~ D~_k`` and outputs ``SOA(S∘T)`` where ``T`` is the batch's last ``n_aux`` examples,
  disjoint from the pool (so a batch of ``budget + n_aux`` examples is a fixed layout).

Outputs are compared as functions through :meth:`Hypothesis.key`; ``FAIL_KEY`` is the key of
"Fail". :func:`algorithm_g` reads only its own batch and its own coins (ABLMM22 Sec 5.2.3
"Requirements"), which is what the privacy proof of Algorithm M needs.

>>> from privstream.learning.hypothesis_classes import parse_class_spec
>>> from privstream.learning.randomness import seeded
>>> import numpy as np
>>> H = parse_class_spec("points:16")
>>> xs = np.arange(40) % 16; ys = (xs == 3).astype(np.uint8)
>>> run = algorithm_g(H, xs, ys, n_aux=8, budget=32, max_depth=1, rng=seeded(1))
>>> run.key == FAIL_KEY or run.hypothesis.predict(3) == 1
True
>>> g_parameters(1, 0.05).N, g_parameters(1, 0.05).eta_G
(1310720, Fraction(1, 1024))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from privstream.learning.domain import as_labels, as_points
from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import HypothesisClass
from privstream.learning.randomness import RandomSource
from privstream.learning.soa import SOA

__all__ = [
    "FAIL_KEY",
    "GParameters",
    "GRun",
    "algorithm_g",
    "exact_fraction",
    "first_disagreement",
    "g_parameters",
    "rho_lower_bounds",
    "run_g",
]

#: Canonical key of G's "Fail" output (hashable, comparable with hypothesis keys, never a function).
FAIL_KEY: tuple[Any, ...] = ("fail",)


def exact_fraction(x: float | int | Fraction, name: str) -> Fraction:
    """``x`` as the exact rational its decimal text denotes (so ``0.05`` is 1/20, not a binary float)."""
    if isinstance(x, bool) or not isinstance(x, int | float | Fraction):
        raise ValueError(f"{name} must be a real number, got {x!r}")
    f = Fraction(x) if isinstance(x, int | Fraction) else Fraction(repr(float(x)))
    if not 0 < f < 1:
        raise ValueError(f"{name} must be in (0, 1), got {x!r}")
    return f


@dataclass(frozen=True)
class GParameters:
    """The constants of Algorithm G at ``(d, alpha)`` (ABLMM22 Thm 23, as proved).

    ``n_aux = ceil(2^(d+2)/alpha)``, ``N = 2^(2^(d+2)+1)·4^(d+1)·n_aux`` (draw budget),
    ``m = N + n_aux`` (sample size), ``thr = 2^(-2^(d+2))``, ``eta_G = 1/((d+1)·2^(2^(d+2)+1))``.
    """

    d: int
    alpha: Fraction
    n_aux: int
    N: int
    m: int
    thr: Fraction
    eta_G: Fraction


def g_parameters(d: int, alpha: float | Fraction) -> GParameters:
    """Exact integer/rational constants of G for Ldim ``d >= 1`` and accuracy ``alpha``.

    Inside M, G runs at ``alpha/2``, e.g. ``0.05``:

    >>> p = g_parameters(2, 0.05)
    >>> p.n_aux, p.N, p.m, p.eta_G
    (320, 2684354560, 2684354880, Fraction(1, 393216))
    """
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise ValueError(f"d must be an int >= 1 (d = 0 is the trivial one-function class), got {d!r}")
    a = exact_fraction(alpha, "alpha")
    n_aux = math.ceil(Fraction(2 ** (d + 2)) / a)
    exponent = 2 ** (d + 2)
    big_n = 2 ** (exponent + 1) * 4 ** (d + 1) * n_aux
    return GParameters(
        d=d,
        alpha=a,
        n_aux=n_aux,
        N=big_n,
        m=big_n + n_aux,
        thr=Fraction(1, 2**exponent),
        eta_G=Fraction(1, (d + 1) * 2 ** (exponent + 1)),
    )


def rho_lower_bounds(d: int, depth: int) -> list[Fraction]:
    """The recursion of Lemma 12/25: ``rho_0 = 1``, ``rho_k = (rho_(k-1)^2 - 8·2^(-2^(d+2)))/2``.

    ``rho_k`` lower-bounds Pr[all k tournament examples of ``S ~ D_k`` agree with the target]
    (while ``D_k`` is defined); the lemma needs ``rho_k >= 4·2^(-2^(k+1))`` for ``k <= d``. Exact.
    """
    thr = Fraction(1, 2 ** (2 ** (d + 2)))
    rho = [Fraction(1)]
    for _ in range(depth):
        rho.append((rho[-1] ** 2 - 8 * thr) / 2)
    return rho


def first_disagreement(f0: Hypothesis, f1: Hypothesis) -> int:
    """The smallest x with ``f0(x) != f1(x)`` (a rule independent of the tournament label y).

    From the run-length forms: ``f0 XOR f1`` starts with ``first0 ^ first1`` and changes exactly at
    the symmetric difference of the change-point sets. Raises ``ValueError`` if ``f0 == f1``.

    >>> from privstream.learning.hypotheses import hypothesis_from_runs
    >>> first_disagreement(hypothesis_from_runs(100, 0, [10]), hypothesis_from_runs(100, 0, [40]))
    10
    """
    a0, c0 = f0.change_points()
    a1, c1 = f1.change_points()
    if a0 != a1:
        return 0
    diff = set(c0).symmetric_difference(c1)
    if not diff:
        raise ValueError("the two functions are equal; there is no disagreement point")
    return min(diff)


class _BudgetExceeded(Exception):
    """More than ``budget`` examples were requested from the pool (the "Fail" event of D~_k)."""


class _Pool:
    """Hands out the pool's examples in order; the (k+1)-th request past the budget fails."""

    __slots__ = ("budget", "drawn", "xs", "ys")

    def __init__(self, xs: np.ndarray, ys: np.ndarray, budget: int) -> None:
        self.xs, self.ys, self.budget, self.drawn = xs, ys, budget, 0

    def take(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        if self.drawn + count > self.budget:
            raise _BudgetExceeded
        lo = self.drawn
        self.drawn += count
        return self.xs[lo : self.drawn], self.ys[lo : self.drawn]


_Sample = tuple[np.ndarray, np.ndarray]


def _concat(*parts: _Sample) -> _Sample:
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


@dataclass(frozen=True)
class GRun:
    """One run of G: the output (``hypothesis`` is None for Fail) with diagnostics.

    ``draws`` pool examples were consumed; ``mistakes`` is the SOA's mistake count on ``S∘T``
    (>= ``depth`` by Observation 11/24 unless Fail); ``tournament_size = |S| = depth·(n_aux+1)``.
    The diagnostics are computed from raw data: trusted zone only, never released.
    """

    hypothesis: Hypothesis | None
    depth: int
    draws: int
    mistakes: int
    tournament_size: int

    @property
    def key(self) -> tuple[Any, ...]:
        """Canonical key: :meth:`Hypothesis.key` of the output, or :data:`FAIL_KEY`."""
        return FAIL_KEY if self.hypothesis is None else self.hypothesis.key()


def algorithm_g(
    hclass: HypothesisClass,
    xs: np.ndarray,
    ys: np.ndarray,
    *,
    n_aux: int,
    budget: int,
    max_depth: int,
    rng: RandomSource,
    tie: int = 1,
    depth: int | None = None,
) -> GRun:
    """One run of G on the batch ``(xs, ys)`` of length >= ``budget + n_aux`` (ABLMM22 Sec 5.2.3).

    Layout (fixed, data-independent): ``xs[:budget]`` is the pool of D~_k, ``xs[budget:budget+n_aux]``
    is the final T; anything after is unused. The depth is uniform on ``{0..max_depth}`` from
    ``rng`` unless ``depth`` is given (tests). The tie rule of the SOA is fixed (deterministic).
    """
    for value, name in ((n_aux, "n_aux"), (budget, "budget"), (max_depth, "max_depth")):
        if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "n_aux" else 0):
            raise ValueError(f"{name} must be a non-negative int (n_aux >= 1), got {value!r}")
    points = as_points(xs, hclass.domain_size)
    labels = as_labels(ys, points.shape[0])
    if points.shape[0] < budget + n_aux:
        raise ValueError(f"G needs budget + n_aux = {budget + n_aux} examples, got {points.shape[0]}")
    k = rng.uniform_int(max_depth + 1) if depth is None else depth
    return run_g(hclass, points, labels, n_aux=n_aux, budget=budget, depth=k, rng=rng, tie=tie)


def run_g(
    hclass: HypothesisClass,
    points: np.ndarray,
    labels: np.ndarray,
    *,
    n_aux: int,
    budget: int,
    depth: int,
    rng: RandomSource,
    tie: int = 1,
) -> GRun:
    """G at a given depth on *validated* arrays (:func:`algorithm_g` draws the depth and validates)."""
    k = depth
    pool = _Pool(points[:budget], labels[:budget], budget)
    final_t = (points[budget : budget + n_aux], labels[budget : budget + n_aux])

    def soa(sample: _Sample) -> SOA:
        learner = SOA(hclass, tie)
        learner.learn_many(*sample)
        return learner

    def sample_dtilde(level: int) -> _Sample:
        if level == 0:
            return points[:0], labels[:0]
        while True:  # step (iii): retry until the two predictors differ as functions
            s0, s1 = sample_dtilde(level - 1), sample_dtilde(level - 1)
            st0, st1 = _concat(s0, pool.take(n_aux)), _concat(s1, pool.take(n_aux))
            f0, f1 = soa(st0).predictor(), soa(st1).predictor()
            if f0 != f1:
                break
        x = first_disagreement(f0, f1)
        y = rng.uniform_int(2)
        loser = st0 if f0.predict(x) != y else st1
        return _concat(loser, (np.array([x], dtype=points.dtype), np.array([y], dtype=labels.dtype)))

    try:
        s = sample_dtilde(k)
    except _BudgetExceeded:
        return GRun(hypothesis=None, depth=k, draws=pool.drawn, mistakes=-1, tournament_size=-1)
    final = soa(_concat(s, final_t))
    return GRun(
        hypothesis=final.predictor(),
        depth=k,
        draws=pool.drawn,
        mistakes=final.mistakes,
        tournament_size=int(s[0].shape[0]),
    )
