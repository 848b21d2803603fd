"""The multi-class Perceptron: its mistake bound on streams separable with the margin, the proof
of non-separability past it, the batch path equal to one example at a time, exact state restore,
and its inputs checked."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privstream.learning.online import FeatureMap, OnlineInputError, OnlineStateError
from privstream.learning.online.multiclass import MulticlassPerceptron


def separable(d: int, classes: int, margin: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, list]:
    """``n`` examples whose mapped ``z`` have margin ``margin`` under unit-norm scores ``W*``."""
    gen = np.random.default_rng(seed)
    bounds = [[-2.0, 3.0 + t] for t in range(d)]
    fmap = FeatureMap(bounds)
    W = gen.standard_normal((classes, d + 1))
    W /= np.linalg.norm(W)
    xs, ys = [], []
    while sum(len(x) for x in xs) < n:
        lo, hi = fmap.bounds[:, 0], fmap.bounds[:, 1]
        X = lo + (hi - lo) * gen.random((20 * n, d))
        S = fmap.transform(X) @ W.T
        top = np.sort(S, axis=1)
        keep = top[:, -1] - top[:, -2] >= margin
        xs.append(X[keep])
        ys.append(np.argmax(S[keep], axis=1))
    return np.concatenate(xs)[:n], np.concatenate(ys)[:n], bounds


@pytest.mark.parametrize(
    ("d", "classes", "margin", "seed"), [(2, 3, 0.1, 0), (5, 4, 0.05, 1), (9, 10, 0.03, 2)]
)
def test_at_most_the_bound_on_a_stream_separable_with_the_margin(
    d: int, classes: int, margin: float, seed: int
) -> None:
    X, y, bounds = separable(d, classes, margin, 4000, seed)
    learner = MulticlassPerceptron(bounds, classes=classes, margin=margin)
    for part in np.array_split(np.arange(len(y)), 5):
        learner.learn_many(X[part], y[part])
        assert learner.mistakes <= learner.mistake_bound and learner.realizable is True
    assert learner.mistake_bound == int(2 * (d + 1) / margin**2 + 1e-9)
    assert len(set(y.tolist())) > 1 and learner.mistakes > 0


def test_more_mistakes_than_the_bound_prove_no_margin() -> None:
    X = np.tile([[0.3, 0.7]], (60, 1))  # one point with three labels: no scores separate it
    y = np.tile([0, 1, 2], 20)
    learner = MulticlassPerceptron([[0, 1], [0, 1]], classes=3, margin=1.0)  # bound ⌊6/1⌋ = 6
    for x, label in zip(X, y, strict=True):
        learner.learn_one(x, int(label))
        assert learner.realizable is (learner.mistakes <= 6)
    assert learner.realizable is False


@pytest.mark.parametrize("cuts", [[1], [7, 1, 64, 3], [1000]])
def test_batches_equal_one_at_a_time_however_the_stream_is_cut(cuts: list[int]) -> None:
    gen = np.random.default_rng(3)
    X = gen.random((900, 4))
    y = np.digitize(X[:, 0] + X[:, 1] - X[:, 2], [0.3, 0.8, 1.3])
    flip = gen.random(900) < 0.1
    y[flip] = gen.integers(0, 4, int(flip.sum()))
    one = MulticlassPerceptron([[0, 1]] * 4, classes=4)
    singles = [one.learn_one(x, int(label)) for x, label in zip(X, y, strict=True)]
    many, out, pos, i = MulticlassPerceptron([[0, 1]] * 4, classes=4), [], 0, 0
    while pos < len(y):
        step = cuts[i % len(cuts)]
        out += many.learn_many(X[pos : pos + step], y[pos : pos + step]).tolist()
        pos, i = pos + step, i + 1
    assert out == singles
    assert many.state_dict() == one.state_dict()
    restored = MulticlassPerceptron.from_state_dict(json.loads(json.dumps(many.state_dict())))
    assert restored.learn_many(X[:50], y[:50]).tolist() == many.learn_many(X[:50], y[:50]).tolist()


def test_each_prediction_is_made_before_its_label_is_learned() -> None:
    gen = np.random.default_rng(4)
    X = gen.random((300, 3))
    y = gen.integers(0, 5, 300)
    learner = MulticlassPerceptron([[0, 1]] * 3, classes=5)
    for x, label in zip(X, y, strict=True):
        before = learner.predict_one(x)
        assert learner.learn_one(x, int(label)) == before
    assert learner.examples_seen == 300 and 0 < learner.mistakes < 300


def test_the_scores_on_the_raw_features_predict_as_the_learner() -> None:
    X, y, bounds = separable(3, 4, 0.05, 2000, 5)
    learner = MulticlassPerceptron(bounds, classes=4, margin=0.05)
    learner.learn_many(X, y)
    scores = np.column_stack([X @ w + b for w, b in learner.weights()])
    assert (np.argmax(scores, axis=1) == learner.predict_many(X)).mean() > 0.99  # X within the bounds


def test_inputs_and_states_are_checked() -> None:
    learner = MulticlassPerceptron([[0, 1]], classes=3)
    for bad in ([3], [-1], [0.5], [True]):
        with pytest.raises(OnlineInputError, match="from 0 to 2"):
            learner.learn_many([[0.5]], np.array(bad))
    for classes in (1, 257, 2.0, True):
        with pytest.raises(OnlineInputError, match="classes"):
            MulticlassPerceptron([[0, 1]], classes=classes)  # type: ignore[arg-type]
    assert learner.examples_seen == 0
    state = learner.state_dict()
    with pytest.raises(OnlineStateError):
        MulticlassPerceptron.from_state_dict({**state, "classes": 4})  # weights of another shape
    with pytest.raises(OnlineStateError):
        MulticlassPerceptron.from_state_dict({**state, "mistakes": 1})
    with pytest.raises(OnlineStateError):
        MulticlassPerceptron.from_state_dict({**state, "learner": "perceptron"})
