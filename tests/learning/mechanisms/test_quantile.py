"""The private quantile on a public grid and the per-feature bounds built from it: the exact law is
the exponential mechanism's on the right scores, the pair's privacy loss stays within ε, the
bounds are accurate when the tails hold enough rows, and the budget splits as stated."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from privstream.learning.audit import audit_spec, privacy_loss
from privstream.learning.errors import PrivacyParameterError
from privstream.learning.mechanisms import PrivateQuantile, private_bounds
from privstream.learning.randomness import seeded


def brute_scores(values: list[float], q: float, lo: float, hi: float, cells: int) -> list[Fraction]:
    """``-max(0, #{x < g_j} - q n, q n - #{x <= g_j})`` for every grid point, written out."""
    points = [lo + j * (hi - lo) / cells for j in range(cells + 1)]
    clipped = [min(max(v, lo), hi) for v in values]
    target = Fraction(str(q)) * len(values)
    return [
        -max(
            Fraction(0), sum(1 for v in clipped if v < g) - target, target - sum(1 for v in clipped if v <= g)
        )
        for g in points
    ]


@pytest.mark.parametrize("seed", range(5))
def test_the_blocks_are_the_scores_of_every_grid_point(seed: int) -> None:
    gen = np.random.default_rng(seed)
    values = [*gen.normal(3, 4, 50).round(1).tolist(), -100.0, 100.0, 0.0, 10.0, *[2.5] * 9]  # outside, ties
    m = PrivateQuantile(1.0, lo=0, hi=10, cells=20)
    for q in (0.01, 0.3, 0.5, 0.9):
        expanded = [score for size, score in m.blocks(values, q) for _ in range(size)]
        assert expanded == brute_scores(values, q, 0, 10, 20)


def test_the_law_is_the_exponential_mechanisms_and_the_draws_follow_it() -> None:
    values = [0.5, 1.5, 1.5, 2.5, 3.5, 3.7]
    m = PrivateQuantile(1.0, lo=0, hi=4, cells=8, rng=seeded(1))
    law = m.probabilities(values, 0.5)
    scores = brute_scores(values, 0.5, 0, 4, 8)
    weights = [math.exp(float(s) / 2) for s in scores]
    assert law == pytest.approx([w / sum(weights) for w in weights], rel=1e-12)
    draws = np.bincount([m.release_index(values, 0.5) for _ in range(6000)], minlength=9) / 6000
    assert np.abs(draws - np.array(law)).max() < 0.03


def test_the_worst_pair_stays_within_epsilon_and_a_doubled_coefficient_does_not() -> None:
    spec = audit_spec("quantile")
    assert spec.exact is not None
    p, q = spec.exact()
    assert 0.5 < privacy_loss(p, q) <= spec.claimed.epsilon
    d0, d1 = spec.pair
    loose = PrivateQuantile(4.0, lo=0, hi=4, cells=4)  # what epsilon_quadrupled runs
    assert (
        privacy_loss(
            dict(enumerate(loose.probabilities(d0, 0.5))), dict(enumerate(loose.probabilities(d1, 0.5)))
        )
        > 1.5
    )


def test_a_pile_of_equal_values_is_found() -> None:
    # A count that is 0 for 30% of the rows: its 5% quantile is 0, which only the ties' term sees.
    values = [0.0] * 300 + [float(v % 40 + 1) for v in range(700)]
    m = PrivateQuantile(1.0, lo=-1000, hi=1000, cells=2000, rng=seeded(5))
    assert [m.release(values, 0.05) for _ in range(20)] == [0.0] * 20


def test_every_neighbour_of_a_small_set_stays_within_epsilon() -> None:
    # Replace-one and add/remove neighbours of a dataset on a grid of 6 cells: all within ε.
    m = PrivateQuantile(1.0, lo=0, hi=6, cells=6)
    base = [0.5, 2.0, 2.5, 2.5, 5.5]
    grid = [0.5 + k for k in range(6)] + [float(k) for k in range(7)]  # between and on grid points
    neighbours = [[*base[:i], v, *base[i + 1 :]] for i in range(5) for v in grid]
    neighbours += [base[:i] + base[i + 1 :] for i in range(5)] + [[*base, v] for v in grid]
    for q in (0.1, 0.5, 0.75):
        law = dict(enumerate(m.probabilities(base, q)))
        for other in neighbours:
            assert privacy_loss(law, dict(enumerate(m.probabilities(other, q)))) <= 1.0 + 1e-9


def test_bounds_are_close_to_the_quantiles_when_the_tails_hold_enough_rows() -> None:
    gen = np.random.default_rng(2)
    rows = np.column_stack([gen.normal(50, 10, 20_000), gen.exponential(30, 20_000)])
    released = private_bounds(rows.tolist(), epsilon=1.0, lo=-1000, hi=1000, cells=20_000, rng=seeded(3))
    assert released.epsilon_per_quantile == 0.25 and released.epsilon == 1.0
    truth = np.quantile(rows, [0.01, 0.99], axis=0).T
    for (lo, hi), (t_lo, t_hi) in zip(released.bounds, truth, strict=True):
        assert abs(lo - t_lo) < 5 and abs(hi - t_hi) < 5 and lo < hi
    # The same budget on a range a million times wider with the same cell width: far from the
    # truth (the empty cells outweigh the tails' 200 rows), which the docs' accuracy rule predicts.
    wide = private_bounds(rows.tolist(), epsilon=0.01, lo=-1e6, hi=1e6, cells=2_000_000, rng=seeded(3))
    assert max(abs(lo - t) for (lo, _), t in zip(wide.bounds, truth[:, 0], strict=True)) > 10


def test_parameters_are_checked() -> None:
    with pytest.raises(PrivacyParameterError):
        PrivateQuantile(1.0, lo=1, hi=1)
    with pytest.raises(PrivacyParameterError):
        PrivateQuantile(0, lo=0, hi=1)
    with pytest.raises(PrivacyParameterError):
        PrivateQuantile(1.0, lo=0, hi=1).release([0.5], 1.0)
    with pytest.raises(PrivacyParameterError):
        private_bounds([[1.0], [1.0, 2.0]], epsilon=1.0, lo=0, hi=1)
    with pytest.raises(PrivacyParameterError):
        private_bounds([[1.0]], epsilon=1.0, lo=0, hi=1, quantile=0.5)
