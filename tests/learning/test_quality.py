"""The private quality estimate: its noise bound is exact, its interval covers the true error at
the stated confidence, and it refuses bad input."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from privstream.learning.errors import LearningInputError, PrivacyParameterError
from privstream.learning.quality import estimate_error, noise_bound, quality_guarantee
from privstream.learning.randomness import seeded


def dlap_two_sided_tail(scale: Fraction, k: int) -> float:
    q = math.exp(-1 / float(scale))
    return 1.0 if k <= 0 else 2 * q**k / (1 + q)


@pytest.mark.parametrize("scale", [Fraction(1), Fraction(2), Fraction(1, 3), Fraction(20)])
@pytest.mark.parametrize("beta", [0.5, 0.05, 0.001])
def test_the_noise_bound_is_the_least_k_whose_tail_is_within_beta(scale, beta) -> None:
    k = noise_bound(scale, beta)
    assert dlap_two_sided_tail(scale, k) <= beta < dlap_two_sided_tail(scale, k - 1)


def test_the_noise_bound_holds_empirically() -> None:
    rng, scale, beta = seeded(5), Fraction(2), 0.05
    k = noise_bound(scale, beta)
    draws = np.array([rng.discrete_laplace(scale) for _ in range(20_000)])
    assert np.mean(np.abs(draws) >= k) <= beta + 3 * math.sqrt(beta * (1 - beta) / draws.size)


@pytest.mark.parametrize("size_public", [True, False])
def test_the_interval_covers_the_true_error_at_its_confidence(size_public) -> None:
    """Fresh i.i.d. windows of a classifier with true error 0.2: the 95% interval holds 0.2 in at
    least 95% of 600 runs (Hoeffding and the noise bound are conservative, so usually all)."""
    data, true_error, n = np.random.default_rng(7), 0.2, 300
    covered = 0
    for run in range(600):
        labels = np.zeros(n, dtype=np.int64)
        predictions = (data.random(n) < true_error).astype(np.int64)
        q = estimate_error(predictions, labels, epsilon=0.5, size_public=size_public, rng=seeded(run))
        covered += q.low <= true_error <= q.high
        assert 0.0 <= q.low <= q.high <= 1.0
    assert covered / 600 >= 0.95


def test_more_examples_and_more_epsilon_give_narrower_intervals() -> None:
    def width(n: int, epsilon: float) -> float:
        q = estimate_error(
            [1] * (n // 10) + [0] * (n - n // 10), [0] * n, epsilon=epsilon, size_public=False, rng=seeded(1)
        )
        return q.high - q.low

    assert width(10_000, 1.0) < width(1_000, 1.0) < width(100, 1.0)
    assert width(1_000, 4.0) < width(1_000, 0.1)


def test_the_size_is_published_only_where_it_is_public() -> None:
    args = ([1, 0, 0, 0], [0, 0, 0, 0])
    public = estimate_error(*args, epsilon=1.0, size_public=True, rng=seeded(0))
    private = estimate_error(*args, epsilon=1.0, size_public=False, rng=seeded(0))
    assert public.size == 4 and public.noisy_size is None
    assert private.size is None and isinstance(private.noisy_size, int)
    assert set(private.to_dict()) == {
        "error",
        "low",
        "high",
        "confidence",
        "epsilon",
        "noisy_errors",
        "size",
        "noisy_size",
    }


def test_the_same_randomness_gives_the_same_estimate() -> None:
    args = ([1, 1, 0, 0, 1], [0, 1, 0, 1, 1])
    assert estimate_error(*args, epsilon=1.0, size_public=False, rng=seeded(3)) == estimate_error(
        *args, epsilon=1.0, size_public=False, rng=seeded(3)
    )


def test_an_empty_window_gives_an_estimate_not_an_error() -> None:
    q = estimate_error([], [], epsilon=1.0, size_public=False, rng=seeded(2))
    assert 0.0 <= q.low <= q.high <= 1.0


def test_the_guarantee_is_pure_epsilon_under_add_remove() -> None:
    g = quality_guarantee(0.3)
    assert (g.epsilon, g.delta, g.relation) == (0.3, 0.0, "add-remove-one")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"predictions": [0, 1], "labels": [0]}, LearningInputError),
        ({"epsilon": 0.0}, PrivacyParameterError),
        ({"epsilon": float("nan")}, PrivacyParameterError),
        ({"confidence": 1.0}, PrivacyParameterError),
    ],
)
def test_bad_input_is_refused(kwargs, error) -> None:
    args = {"predictions": [0, 1], "labels": [0, 1], "epsilon": 1.0, "size_public": True, **kwargs}
    with pytest.raises(error):
        estimate_error(**args)
