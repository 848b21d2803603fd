"""Random Fourier features of the Gaussian kernel on the public unit box: :class:`RandomFeatures`.

Features are mapped to the unit box with the public bounds, ``u = (x - lo)/(hi - lo)`` clipped to
``[0, 1]^d``. For a bandwidth ``h`` the Gaussian kernel ``k(u, u') = exp(-‖u - u'‖²/h²)`` is, by
Bochner's theorem, ``E[cos⟨ω, u - u'⟩]`` for ``ω ~ N(0, (2/h²)·I_d)``. With ``D`` frequencies
``ω_1..ω_D`` the map

    φ(u) = (cos⟨ω_j, u⟩, sin⟨ω_j, u⟩)_{j = 1..D} / √D        (2D coordinates)

has ``⟨φ(u), φ(u')⟩ = (1/D)·Σ_j cos⟨ω_j, u - u'⟩``, an unbiased estimate of ``k(u, u')`` (Rahimi-Recht
2007), and **every** ``φ(u)`` has norm exactly 1. That norm is what the learner's sensitivity rests
on, whatever the data.

The frequencies are ``ω_j = (√2/h)·g_j`` with ``g`` the first ``d·D`` standard normals of NumPy's
legacy ``RandomState(seed)`` (row-major ``(d, D)``), whose stream NumPy keeps frozen across
versions: ``(seed, D, h)`` define the map, so a released model stores them, not the frequencies.

**One row, one result.** ``φ(u)`` and a score ``⟨w, φ(u)⟩`` are computed row by row in a fixed
order of summation (:func:`~privstream.learning.private_learners.vector_base.row_products`), so a
row's floating-point result never depends on which other rows share its block: a neighbouring
dataset moves no other row's score across an offset, and the learner's error counts move by at
most one.

>>> rf = RandomFeatures(dimension=2, frequencies=64, bandwidth=0.5)
>>> phi = rf.transform(np.array([[0.1, 0.2], [0.15, 0.2], [0.9, 0.9]]))
>>> phi.shape, np.allclose(np.linalg.norm(phi, axis=1), 1.0)
((3, 128), True)
>>> round(float(phi[0] @ phi[1]), 1), round(float(np.exp(-0.05**2 / 0.25)), 1)  # near points: k ≈ 1
(1.0, 1.0)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator

import numpy as np

from privstream.learning.private_learners.vector_base import row_products

__all__ = ["FEATURE_SEED", "MAX_FREQUENCIES", "RandomFeatures"]

#: The public seed of the frequencies (part of the map's definition).
FEATURE_SEED = 20261130
#: The most frequencies a map (or a released model) may have.
MAX_FREQUENCIES = 16_384
#: Rows mapped at once (bounds the working memory at ROWS_PER_CHUNK x 2D floats).
ROWS_PER_CHUNK = 4096


@functools.lru_cache(maxsize=8)
def _standard_normals(seed: int, dimension: int, frequencies: int) -> np.ndarray:
    normals = np.random.RandomState(seed).standard_normal((dimension, frequencies))
    normals.setflags(write=False)
    return normals


class RandomFeatures:
    """The map ``u -> φ(u)`` of the module docstring, for ``dimension`` features on the unit box."""

    def __init__(self, dimension: int, frequencies: int, bandwidth: float, seed: int = FEATURE_SEED) -> None:
        limits = (("dimension", dimension, None), ("frequencies", frequencies, MAX_FREQUENCIES))
        for name, value, high in limits:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
            if high is not None and value > high:
                raise ValueError(f"{name} must be at most {high}, got {value!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
            raise ValueError(f"seed must be an int in [0, 2^32), got {seed!r}")
        if not (isinstance(bandwidth, int | float) and math.isfinite(bandwidth) and bandwidth > 0):
            raise ValueError(f"bandwidth must be a positive number, got {bandwidth!r}")
        self.dimension, self.frequencies, self.seed = dimension, frequencies, seed
        self.bandwidth = float(bandwidth)
        self._omega = _standard_normals(seed, dimension, frequencies) * (math.sqrt(2.0) / self.bandwidth)

    @property
    def size(self) -> int:
        """``2D``: the number of coordinates of ``φ(u)``."""
        return 2 * self.frequencies

    def transform(self, U: np.ndarray) -> np.ndarray:
        """``φ`` of each row of ``U`` (unit-box rows, shape ``(n, d)``): shape ``(n, 2D)``, unit rows."""
        return np.vstack(list(self.chunks(U))) if U.shape[0] else np.zeros((0, self.size))

    def chunks(self, U: np.ndarray) -> Iterator[np.ndarray]:
        """``φ`` of ``U`` a block of :data:`ROWS_PER_CHUNK` rows at a time (in order)."""
        scale = 1.0 / math.sqrt(self.frequencies)
        for first in range(0, U.shape[0], ROWS_PER_CHUNK):
            angles = row_products(U[first : first + ROWS_PER_CHUNK], self._omega)
            yield np.hstack((np.cos(angles), np.sin(angles))) * scale

    def scores(self, U: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``⟨weights, φ(u)⟩`` per row of ``U``, each row's result independent of the others."""
        return np.concatenate([row_products(chunk, weights) for chunk in self.chunks(U)] or [np.zeros(0)])
