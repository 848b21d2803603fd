"""Distributions with known Bayes error and exact risk of grid classifiers (Bousquet et al.,
Differentially-Private Bayes Consistency, 2022).

Exact excess risk uses err(h) - L* = E_x[|2η(x) - 1| · 1[h(x) != h*(x)]] ([B Thm B.1 proof]).
"""

from __future__ import annotations

import math

import numpy as np

F2_CUT = 0.3737
F5_BOUNDS = np.array([[-4.0, 4.0], [-4.0, 4.0]])
F5_BAYES = 0.5 * math.erfc(1 / math.sqrt(2))  # Φ(-1)


def f1_sample(gen: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """F1: x ~ U[0,1], η(x) = x; L* = 1/4."""
    x = gen.random(n)
    return x[:, None], (gen.random(n) < x).astype(np.uint8)


def f1_excess(table: np.ndarray) -> float:
    """Exact excess risk of a 1-D grid table on F1 (cells [i/K, (i+1)/K))."""
    k = table.shape[0]

    def mass(lo: float, hi: float) -> float:  # ∫ |2x - 1| dx over [lo, hi]
        anti = lambda x: x * x - x if x >= 0.5 else -(x * x - x) - 0.5  # noqa: E731
        return max(0.0, anti(hi) - anti(lo))

    total = 0.0
    for i, label in enumerate(table.tolist()):
        a, b = i / k, (i + 1) / k
        total += mass(a, min(b, 0.5)) if label == 1 else mass(max(a, 0.5), b)
    return total


def f2_sample(gen: np.random.Generator, n: int, cut: float = F2_CUT) -> tuple[np.ndarray, np.ndarray]:
    """F2: x ~ U[0,1], η = 0.9 on [cut, 1], 0.1 below; L* = 0.1 for every cut."""
    x = gen.random(n)
    eta = np.where(x >= cut, 0.9, 0.1)
    return x[:, None], (gen.random(n) < eta).astype(np.uint8)


def f2_excess(table: np.ndarray, cut: float = F2_CUT) -> float:
    k = table.shape[0]
    total = 0.0
    for i, label in enumerate(table.tolist()):
        a, b = i / k, (i + 1) / k
        wrong = max(0.0, min(b, cut) - a) if label == 1 else max(0.0, b - max(a, cut))
        total += 0.8 * wrong
    return total


def f5_sample(gen: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """F5: y ~ Bernoulli(½), x ~ N((2y - 1, 0), I₂); η(x) = 1/(1 + e^{-2x₁}); L* = Φ(-1)."""
    y = (gen.random(n) < 0.5).astype(np.uint8)
    x = gen.standard_normal((n, 2))
    x[:, 0] += 2.0 * y - 1.0
    return x, y


def _phi(z: np.ndarray) -> np.ndarray:
    return 0.5 * np.array([math.erfc(-v / math.sqrt(2)) for v in np.ravel(z)]).reshape(np.shape(z))


def f5_error(table: np.ndarray, k: int) -> float:
    """Exact risk of a K×K table on F5_BOUNDS (points are clipped: border cubes extend to ±∞)."""
    lo, hi = F5_BOUNDS[0]
    edges = lo + (hi - lo) * np.arange(k + 1) / k
    edges[0], edges[-1] = -np.inf, np.inf
    grid = table.reshape(k, k)
    err = 0.0
    for label, mean in ((0, -1.0), (1, 1.0)):
        p1 = np.diff(_phi(edges - mean))  # first coordinate
        p2 = np.diff(_phi(edges))  # second coordinate (mean 0)
        cell = np.outer(p1, p2)
        err += 0.5 * float(cell[grid != label].sum())
    return err
