"""PCDE: the (ε, δ)-DP universally consistent histogram density estimator ([B Alg 3, Thm 1.7, 4.2, 4.3]).

**Rule.** Cut the public box into ``K = ⌈n^{1/(2d)}⌉`` cubes per axis (:mod:`.grid`; the paper's grid
on R^d anchored at 0 becomes, after the public affine map of the box onto [0,1]^d, this grid
intersected with the box) and release the cube counts through the stability histogram
:class:`~privstream.learning.mechanisms.StableHistogram` ([B Alg 1], reused as is: exact discrete
Laplace of scale 2/ε on the *occupied* cubes only, released iff the noisy count reaches its
threshold T). The estimate is ``f̂(x) = ĉ_κ(x) / (n·vol κ)`` and, normalised ([B Remark 4.1]),
``g(x) = ĉ_κ(x) / (vol κ · Σ ĉ)``. Released counts are 0 or >= T > 0, so nothing is negative.

**Privacy ((ε, δ)-DP, replace-one, n public) [B Thm 4.2].** K depends only on (n, d) and the public
bounds; each row is mapped to its cube by a fixed map (clipped into the bounds). A replacement
changes at most two cube counts by one: exactly the neighbouring relation of the stable
histogram's guarantee (its module proves (ε, δ) for it). Everything else, ``density``, ``sample``
and the uniform fallback, is post-processing of the released sparse map.

**Add/remove-one (``expected_size=m``, n private).** K and the released ``n`` (the normaliser of
``f̂``) come from m, never from the rows. One row joining or leaving changes a single cube count
by one: half of the replace-one change, covered by the same stable-histogram argument (a count
moving by one costs ε/2 of the Laplace part, a cube appearing or vanishing costs the δ), so the
same (ε, δ) holds. An empty sample releases nothing (every count is suppressed: the fallback).
The released key set is a subset of the occupied cubes, each of which passed the noisy threshold;
that is what the δ pays for (a lone point's cube is released with probability <= δ).

δ should be ``n^{-2}`` or smaller (a correction to [B]: the proof needs
log(1/δ) = o(√n)). When every count is suppressed (typical for small n), ``g`` falls back to the
uniform density on the box and :attr:`HistogramDensity.fallback_used` is set.

>>> import numpy as np
>>> from privstream.learning.randomness import seeded
>>> X = np.random.default_rng(0).random((10_000, 1))
>>> f = pcde_fit(X, epsilon=1.0, delta=1e-8, bounds=[[0, 1]], rng=seeded(0))
>>> f.grid.k, f.fallback_used
(100, False)
>>> bool(np.all((f.sample(5, seeded(1)) >= 0) & (f.sample(5, seeded(1)) <= 1)))
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from privstream.learning.consistent.grid import CubeGrid, cells_per_axis
from privstream.learning.errors import HypothesisFormatError, LearningInputError
from privstream.learning.mechanisms import StableHistogram
from privstream.learning.private_learners.base import check_expected_size
from privstream.learning.private_learners.vector_base import check_bounds, check_features, finite_epsilon
from privstream.learning.randomness import RandomSource, resolve

__all__ = ["MECHANISM", "HistogramDensity", "pcde_fit"]

MECHANISM = "pcde"


class HistogramDensity:
    """A released histogram density: the grid, the public size n (m when n is private), the cube counts."""

    kind = "histogram-density"

    def __init__(self, grid: CubeGrid, n: int, counts: Mapping[int, int]) -> None:
        self.grid = grid
        self.n = int(n)
        items = sorted((int(c), int(v)) for c, v in counts.items() if v > 0)
        self.cells = np.array([c for c, _ in items], dtype=np.int64)
        self.counts = np.array([v for _, v in items], dtype=np.int64)
        if self.cells.size and (self.cells.min() < 0 or self.cells.max() >= grid.num_cells):
            raise HypothesisFormatError("cell id outside the grid")
        coords = grid.unflatten(self.cells) if self.cells.size else np.zeros((0, grid.d), dtype=np.int64)
        self._coords = coords
        self._volumes = grid.cell_volumes(coords)

    @property
    def fallback_used(self) -> bool:
        """Whether every count was suppressed, so ``g`` is the uniform density on the box."""
        return self.cells.size == 0

    def total_mass(self) -> int:
        """Σ ĉ (a released quantity)."""
        return int(self.counts.sum())

    def density(self, X: np.ndarray, *, normalized: bool = True) -> np.ndarray:
        """``g`` (normalised, default) or the paper's ``f̂ = ĉ/(n·vol)`` at the rows of ``X``."""
        arr = check_features(X, self.grid.bounds)
        ids = self.grid.cell_ids(arr)
        if self.fallback_used:
            box = float(np.prod(self.grid.bounds[:, 1] - self.grid.bounds[:, 0]))
            return np.full(arr.shape[0], 1.0 / box if normalized else 0.0)
        pos = np.searchsorted(self.cells, ids)
        pos = np.minimum(pos, self.cells.size - 1)
        hit = self.cells[pos] == ids
        denom = self.total_mass() if normalized else max(self.n, 1)
        values = self.counts[pos] / (self._volumes[pos] * denom)
        return np.where(hit, values, 0.0)

    def sample(self, k: int, rng: RandomSource | None = None) -> np.ndarray:
        """``k`` i.i.d. points from ``g``: a cube with probability ĉ/Σĉ (exact), then uniform in it."""
        src = resolve(rng)
        d = self.grid.d
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        lo, width = self.grid.bounds[:, 0], self.grid.bounds[:, 1] - self.grid.bounds[:, 0]
        # positions inside a cube: floats from the source's bits (post-processing of public data)
        gen = np.random.default_rng(src.getrandbits(128))
        u = gen.random((k, d))
        if self.fallback_used:
            uniform: np.ndarray = lo + u * width
            return uniform
        cum = np.cumsum(self.counts)
        total = int(cum[-1])
        draws = np.array([src.uniform_int(total) for _ in range(k)], dtype=np.int64)
        which = np.searchsorted(cum, draws, side="right")
        coords = self._coords[which]
        r = self.grid.side
        cell_lo = coords * r
        cell_hi = np.minimum((coords + 1) * r, 1.0)
        points: np.ndarray = lo + (cell_lo + u * (cell_hi - cell_lo)) * width
        return points

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "bounds": self.grid.bounds.tolist(),
            "cells_per_axis": self.grid.k,
            "n": self.n,
            "cells": [[int(c), int(v)] for c, v in zip(self.cells, self.counts, strict=True)],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HistogramDensity:
        try:
            if d["kind"] != cls.kind:
                raise HypothesisFormatError(f"not a {cls.kind} model")
            grid = CubeGrid(d["bounds"], d["cells_per_axis"])
            counts = {int(c): int(v) for c, v in d["cells"]}
            return cls(grid, int(d["n"]), counts)
        except HypothesisFormatError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise HypothesisFormatError(f"malformed {cls.kind} model: {exc}") from None


def pcde_fit(
    X: object,
    *,
    epsilon: float,
    delta: float,
    bounds: object,
    rng: RandomSource | None = None,
    n: int | None = None,
    expected_size: int | None = None,
    cells_per_axis_override: int | None = None,
    histogram: StableHistogram | None = None,
) -> HistogramDensity:
    """Fit PCDE ((ε, δ)-DP) on the rows of ``X`` (zero rows release the uniform fallback).

    ``n`` is the public size that sets the resolution (default: the number of rows; the
    semi-supervised learner passes its total row count); ``expected_size`` is that size when n is
    private (add/remove-one; ``n`` must then be None). ``histogram`` replaces the stable histogram
    built from (ε, δ, rng); it exists for audits of deliberately broken variants.
    """
    eps = finite_epsilon(epsilon)
    if not 0 < float(delta) < 1:
        raise LearningInputError(f"the density estimator needs 0 < delta < 1 (e.g. n^-2), got {delta!r}")
    m = check_expected_size(expected_size)
    if m is not None and n is not None:
        raise ValueError("pass n (n public) or expected_size (n private), not both")
    b = check_bounds(bounds)
    arr = check_features(X, b)
    size = m if m is not None else (arr.shape[0] if n is None else int(n))
    k = (
        cells_per_axis(max(size, 1), b.shape[0])
        if cells_per_axis_override is None
        else cells_per_axis_override
    )
    grid = CubeGrid(b, k)
    if grid.num_cells - 1 > 2**63 - 1:
        raise LearningInputError(f"K^d = {grid.num_cells} cubes: too many features for the density estimator")
    hist = StableHistogram(eps, float(delta), rng=resolve(rng)) if histogram is None else histogram
    released = hist.release(grid.cell_ids(arr).tolist())
    return HistogramDensity(grid, size, released)
