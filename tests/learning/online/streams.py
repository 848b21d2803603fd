"""Streams for the online learners' tests: separable with a known margin, and not separable."""

from __future__ import annotations

import numpy as np

from privstream.learning.online import FeatureMap


def separable_stream(
    d: int, margin: float, n: int, seed: int, bounds: list[list[float]] | None = None
) -> tuple[np.ndarray, np.ndarray, list[list[float]]]:
    """``n`` raw examples whose mapped ``z`` have margin at least ``margin`` for a random unit
    normal (with offset): rejection sampling in the box, labels by the side of the hyperplane."""
    gen = np.random.default_rng(seed)
    bounds = bounds or [[-3.0 * (t + 1), 5.0 * (t + 1)] for t in range(d)]
    fmap = FeatureMap(bounds)
    v = gen.standard_normal(d + 1)
    v[-1] *= 0.3  # the hyperplane passes near the box's middle: both labels are common
    v /= np.linalg.norm(v)
    kept_x, kept_y = [], []
    while sum(len(k) for k in kept_x) < n:
        lo, hi = fmap.bounds[:, 0], fmap.bounds[:, 1]
        X = lo + (hi - lo) * gen.random((4 * n, d))
        score = fmap.transform(X) @ v
        keep = np.abs(score) >= margin
        kept_x.append(X[keep])
        kept_y.append((score[keep] > 0).astype(np.uint8))
    return np.concatenate(kept_x)[:n], np.concatenate(kept_y)[:n], bounds


def noisy_stream(
    d: int, n: int, seed: int, noise: float = 0.2
) -> tuple[np.ndarray, np.ndarray, list[list[float]]]:
    """A halfspace's labels with a share ``noise`` of them flipped: no halfspace separates it."""
    gen = np.random.default_rng(seed)
    bounds = [[0.0, 1.0]] * d
    X = gen.random((n, d))
    y = (X.sum(axis=1) > d / 2).astype(np.uint8)
    flip = gen.random(n) < noise
    y[flip] = 1 - y[flip]
    return X, y, bounds
