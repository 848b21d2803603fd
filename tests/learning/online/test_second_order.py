"""The second-order Perceptron (the contract suite covers the interface)."""

from __future__ import annotations

import numpy as np
import pytest

from privstream.learning.online import (
    DEFAULT_ONLINE_LEARNER,
    SECOND_ORDER_MAX_FEATURES,
    OnlineInputError,
    make_online_learner,
    resolve_online_learner,
)
from privstream.learning.online.second_order import SecondOrderPerceptron
from tests.learning.online.streams import noisy_stream


def reference_predictions(Z: np.ndarray, y: np.ndarray, a: float) -> list[int]:
    """The averaged second-order Perceptron written out: ``A`` and ``v`` kept as defined, ``A`` inverted
    from scratch at each example, the sum of the rules held so far summed explicitly."""
    p = Z.shape[1]
    A, v, held, out = a * np.eye(p), np.zeros(p), np.zeros(p), []
    for z, label in zip(Z, y, strict=True):
        w = np.linalg.solve(A, v)
        held = held + w
        out.append(int(held @ z >= 0))
        if (w @ z >= 0) != bool(label):
            A, v = A + np.outer(z, z), v + (1 if label else -1) * z
    return out


def test_it_is_the_second_order_perceptron_averaged() -> None:
    X, y, bounds = noisy_stream(4, 600, seed=11, noise=0.1)
    learner = SecondOrderPerceptron(bounds, regularizer=0.5)
    predictions = learner.learn_many(X, y).tolist()
    expected = reference_predictions(learner.feature_map.transform(X), y, 0.5)
    agree = np.mean(np.array(predictions) == np.array(expected))
    assert agree > 0.995  # the same rule up to rounding (an exact inverse vs rank-one updates)
    assert learner.updates > 20


def test_where_the_bounds_put_the_origin_hardly_matters() -> None:
    # Shifting the bounds moves the mapped features (z -> Mz, M invertible): the Perceptron's
    # predictions change with it, the second-order ones hardly (exactly so as the regularizer -> 0).
    gen = np.random.default_rng(12)
    X = gen.random((2000, 3)) ** 3
    y = (X @ [1.0, -1.5, 0.8] > 0.05).astype(np.uint8)
    tight, shifted = [[0, 1]] * 3, [[-1, 1]] * 3
    agreement = {}
    for name in ("perceptron", "second-order-perceptron"):
        params = {"regularizer": 1e-6} if name != "perceptron" else {}
        a = make_online_learner(name, tight, **params).learn_many(X, y)
        b = make_online_learner(name, shifted, **params).learn_many(X, y)
        agreement[name] = float(np.mean(a == b))
    assert agreement["second-order-perceptron"] > 0.99
    assert agreement["perceptron"] < agreement["second-order-perceptron"] - 0.02


def test_wide_streams_are_refused_and_the_weighted_majority_votes_without_it() -> None:
    wide = [[0, 1]] * (SECOND_ORDER_MAX_FEATURES + 1)
    with pytest.raises(OnlineInputError, match="at most 256 features"):
        SecondOrderPerceptron(wide)
    vote = make_online_learner("weighted-majority", wide)
    assert "second-order-perceptron" not in [e.name for e in vote.experts]  # type: ignore[attr-defined]
    assert make_online_learner(DEFAULT_ONLINE_LEARNER, [[0, 1]] * 9, margin=0.2).margin == 0.2  # type: ignore[attr-defined]
    assert resolve_online_learner("auto", SECOND_ORDER_MAX_FEATURES + 1) == "block-vote"


@pytest.mark.parametrize("regularizer", [0, -1.0, float("inf"), True, "1"])
def test_the_regularizer_is_checked(regularizer: object) -> None:
    with pytest.raises(OnlineInputError):
        SecondOrderPerceptron([[0, 1]], regularizer=regularizer)  # type: ignore[arg-type]
