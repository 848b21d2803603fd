"""PCDE, the (ε, δ)-DP histogram density estimator (privstream.learning.consistent.density)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privstream.learning.consistent.density import HistogramDensity, pcde_fit
from privstream.learning.consistent.grid import CubeGrid, cells_per_axis
from privstream.learning.errors import LearningInputError
from privstream.learning.mechanisms import StableHistogram
from privstream.learning.randomness import seeded

UNIT = [[0.0, 1.0]]


def _counts(grid: CubeGrid, X: np.ndarray) -> dict[int, int]:
    ids, counts = np.unique(grid.cell_ids(X), return_counts=True)
    return dict(zip(ids.tolist(), counts.tolist(), strict=True))


def test_released_cells_are_occupied_and_above_the_threshold() -> None:
    X = np.random.default_rng(0).beta(2, 5, size=(5000, 2))
    f = pcde_fit(X, epsilon=1.0, delta=5000.0**-2, bounds=[[0, 1], [0, 1]], rng=seeded(1))
    occupied = _counts(f.grid, X)
    threshold = StableHistogram(1.0, 5000.0**-2).threshold
    assert set(f.cells.tolist()) <= set(occupied)
    assert f.counts.min() >= threshold and not f.fallback_used
    assert f.grid.k == cells_per_axis(5000, 2)


def test_l1_identity_and_normalisation() -> None:
    X = np.random.default_rng(1).random((3000, 1))
    f = pcde_fit(X, epsilon=1.0, delta=1e-6, bounds=[[-1.0, 2.0]], rng=seeded(2))
    true = _counts(f.grid, X)
    released = dict(zip(f.cells.tolist(), f.counts.tolist(), strict=True))
    # ∫|f_S - f̂_S| = Σ|c - ĉ|/n (equal-volume cubes; Bousquet et al. 2022, Alg. 3), computed cube by cube
    centres = f.grid.bounds[:, :1].T + (np.arange(f.grid.k)[:, None] + 0.5) / f.grid.k * 3.0
    vol = 3.0 / f.grid.k
    f_hat = f.density(centres, normalized=False)
    f_s = np.array([true.get(c, 0) for c in range(f.grid.k)]) / (3000 * vol)
    lhs = float(np.sum(np.abs(f_s - f_hat)) * vol)
    rhs = sum(abs(true.get(c, 0) - released.get(c, 0)) for c in set(true) | set(released)) / 3000
    assert lhs == pytest.approx(rhs, rel=1e-9)
    assert float(np.sum(f.density(centres)) * vol) == pytest.approx(1.0, rel=1e-12)


def test_samples_fall_in_released_cells_with_the_released_frequencies() -> None:
    X = np.random.default_rng(2).beta(2, 2, size=(20_000, 1))
    f = pcde_fit(X, epsilon=1.0, delta=1e-8, bounds=UNIT, rng=seeded(3))
    pts = f.sample(20_000, seeded(4))
    ids = f.grid.cell_ids(pts)
    assert set(ids.tolist()) <= set(f.cells.tolist())
    observed = np.array([np.count_nonzero(ids == c) for c in f.cells])
    expected = 20_000 * f.counts / f.counts.sum()
    chi2 = float(np.sum((observed - expected) ** 2 / expected))
    dof = f.cells.size - 1
    assert chi2 < dof + 5 * math.sqrt(2 * dof)


def test_fallback_is_uniform_on_the_box_when_everything_is_suppressed() -> None:
    X = np.random.default_rng(3).random((30, 2))
    f = pcde_fit(X, epsilon=1.0, delta=30.0**-2, bounds=[[0, 2], [0, 1]], rng=seeded(5))
    assert f.fallback_used and f.total_mass() == 0
    assert np.allclose(f.density(X), 0.5)
    pts = f.sample(500, seeded(6))
    assert pts[:, 0].max() > 1.0 and (pts >= 0).all() and (pts[:, 0] <= 2).all()


def test_release_round_trip_and_validation() -> None:
    X = np.random.default_rng(4).random((2000, 1))
    f = pcde_fit(X, epsilon=1.0, delta=1e-6, bounds=UNIT, rng=seeded(7))
    g = HistogramDensity.from_dict(f.to_dict())
    assert g.to_dict() == f.to_dict()
    with pytest.raises(LearningInputError):
        pcde_fit(X, epsilon=1.0, delta=0.0, bounds=UNIT)


def _l1_uniform(f: HistogramDensity) -> float:
    """‖f - g‖₁ for the uniform density on [0, 1] (G1, exact)."""
    if f.fallback_used:
        return 0.0
    vol = f.grid.cell_volumes(f.grid.unflatten(f.cells))
    g = f.counts / (vol * f.counts.sum())
    return float(np.sum(np.abs(1 - g) * vol) + (1 - vol.sum()))


def test_consistency_on_the_uniform_density() -> None:
    means = []
    for n in (10**3, 10**4, 10**5):
        runs = [
            _l1_uniform(
                pcde_fit(
                    np.random.default_rng(s).random((n, 1)),
                    epsilon=1.0,
                    delta=n**-2.0,
                    bounds=UNIT,
                    rng=seeded(s),
                )
            )
            for s in range(5)
        ]
        means.append(float(np.mean(runs)))
    assert means[0] > means[1] > means[2]
    assert means[2] < 0.1  # ≈ 0.046 at 10^5
