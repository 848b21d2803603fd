"""The cube partition of a public box and its resolution schedule in n ([B Alg 2 steps 1-3, Alg 3]).

Features are first mapped to ``[0, 1]^d`` with the *public* bounds (``u = (x - lo)/(hi - lo)``),
then cut into ``K`` cubes per axis: cell ``κ_t = min(⌊u_t / r⌋, K - 1)`` with ``K = ⌈1/r⌉``, so the
last cube on each axis is closed at 1 and, when ``K·r > 1``, intersected with the box
(the boundary convention of [B Alg 2]). Cells are numbered in C order (mixed radix K,
last feature fastest): ``id = Σ_t κ_t K^{d-1-t}``.

The schedule ``r = n^{-1/(2d)}`` ([B Alg 2 step 1, Alg 3 step 1]) gives ``n r^d = √n`` points per cube
under a uniform marginal: ``r → 0`` and ``n r^d → ∞``, the conditions of [B Thm 3.4] (Devroye et al.).
The resolution depends only on (n, d), both public under replace-one neighbours.

>>> cells_per_axis(10_000, 1), cells_per_axis(10_000, 2), cells_per_axis(2, 1)
(100, 10, 2)
>>> g = CubeGrid([[0.0, 1.0]], 4)
>>> g.cell_ids(np.array([[0.0], [0.24], [0.25], [1.0]])).tolist()
[0, 0, 1, 3]
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from privstream.learning.private_learners.vector_base import check_bounds

__all__ = ["INT64_MAX", "CubeGrid", "cells_per_axis"]

INT64_MAX = 2**63 - 1


@lru_cache(maxsize=1024)
def cells_per_axis(n: int, d: int, exponent: Fraction = Fraction(1, 2)) -> int:
    """``K = ⌈n^{exponent/d}⌉``: the paper's ``⌈1/r⌉`` with ``r = n^{-1/(2d)}`` by default.

    Exact for perfect powers (integer arithmetic), at least 1. ``exponent = 1/4`` gives PCL2's
    coarser ``r = n^{-1/(4d)}`` ([B Alg 4]).
    """
    if n < 1 or d < 1:
        raise ValueError(f"need n >= 1 and d >= 1, got n={n}, d={d}")
    e = Fraction(exponent) / d  # K = ceil(n^e), e = p/q: least K with K^q >= n^p
    p, q = e.numerator, e.denominator
    target = n**p
    k: int = max(1, math.floor(float(n) ** float(e)) - 1)
    while k**q < target:
        k += 1
    while k > 1 and (k - 1) ** q >= target:
        k -= 1
    return k


class CubeGrid:
    """``K^d`` equal cubes over the public box ``bounds`` (shape ``(d, 2)``)."""

    def __init__(self, bounds: object, cells_per_axis: int) -> None:
        self.bounds = check_bounds(bounds)
        if (
            isinstance(cells_per_axis, bool)
            or not isinstance(cells_per_axis, int | np.integer)
            or cells_per_axis < 1
        ):
            raise ValueError(f"cells_per_axis must be an int >= 1, got {cells_per_axis!r}")
        self.k = int(cells_per_axis)
        self.d = int(self.bounds.shape[0])
        self.num_cells = self.k**self.d  # a Python int: may exceed int64 for large d

    @property
    def side(self) -> float:
        """Side r = 1/K of a cube in the unit box."""
        return 1.0 / self.k

    def coordinates(self, X: np.ndarray) -> np.ndarray:
        """Per-axis cube indices ``κ`` (int64, shape ``(n, d)``) of points already inside the bounds."""
        lo, hi = self.bounds[:, 0], self.bounds[:, 1]
        u = (np.asarray(X, dtype=np.float64) - lo) / (hi - lo)
        idx = np.floor(u * self.k).astype(np.int64)
        cells: np.ndarray = np.clip(idx, 0, self.k - 1)
        return cells

    def flat(self, coords: np.ndarray) -> np.ndarray:
        """Cell ids of per-axis indices: int64 when ``K^d`` fits, else Python ints (object)."""
        coords = np.asarray(coords, dtype=np.int64)
        if self.num_cells - 1 <= INT64_MAX:
            out = np.zeros(coords.shape[0], dtype=np.int64)
            for t in range(self.d):
                out = out * self.k + coords[:, t]
            return out
        big = np.zeros(coords.shape[0], dtype=object)
        for t in range(self.d):
            big = big * self.k + coords[:, t].astype(object)
        return big

    def cell_ids(self, X: np.ndarray) -> np.ndarray:
        """Cell id of each point (rows of ``X`` inside the bounds)."""
        return self.flat(self.coordinates(X))

    def unflatten(self, ids: np.ndarray) -> np.ndarray:
        """Per-axis indices of cell ids (inverse of :meth:`flat`)."""
        rest = np.asarray(ids).astype(object if self.num_cells - 1 > INT64_MAX else np.int64)
        coords = np.zeros((rest.shape[0], self.d), dtype=np.int64)
        for t in range(self.d - 1, -1, -1):
            coords[:, t] = (rest % self.k).astype(np.int64)
            rest = rest // self.k
        return coords

    def cell_volumes(self, coords: np.ndarray) -> np.ndarray:
        """Volume (in feature units) of each cube intersected with the box."""
        coords = np.asarray(coords, dtype=np.int64)
        r = self.side
        lo_u = coords * r
        hi_u = np.minimum((coords + 1) * r, 1.0)
        widths = (hi_u - lo_u) * (self.bounds[:, 1] - self.bounds[:, 0])
        volumes: np.ndarray = np.prod(widths, axis=1)
        return volumes

    def to_dict(self) -> dict[str, object]:
        return {"bounds": self.bounds.tolist(), "cells_per_axis": self.k}
