"""One-vs-rest: K halfspaces at ε/K each (basic composition), the class of the highest score."""

from __future__ import annotations

import numpy as np
import pytest

from privstream.learning.errors import LearningInputError
from privstream.learning.private_learners.halfspaces.model import HalfspaceModel
from privstream.learning.private_learners.one_vs_rest import OneVsRestModel, fit_one_vs_rest
from privstream.learning.randomness import seeded


def corners(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(seed)
    y = gen.integers(0, 4, n)
    centres = np.array([[0.1, 0.1], [0.9, 0.1], [0.1, 0.9], [0.9, 0.9]])
    return np.clip(centres[y] + gen.normal(0, 0.12, (n, 2)), 0, 1), y


def test_each_class_gets_an_equal_share_of_the_budget(monkeypatch) -> None:
    from privstream.learning.private_learners import one_vs_rest

    spent: list[tuple[float, float]] = []
    real = one_vs_rest.make_vector_learner

    class Recording:
        def __init__(self) -> None:
            self.inner = real("halfspaces")

        def fit(self, X, y, *, epsilon, delta, bounds, rng):  # type: ignore[no-untyped-def]
            spent.append((epsilon, delta))
            assert set(np.unique(y).tolist()) <= {0, 1} and len(y) == 2000  # every row, one class vs rest
            return self.inner.fit(X, y, epsilon=epsilon, delta=delta, bounds=bounds, rng=rng)

    monkeypatch.setattr(one_vs_rest, "make_vector_learner", lambda name: Recording())
    X, y = corners(2000, 0)
    model = fit_one_vs_rest(X, y, classes=4, epsilon=2.0, bounds=[[0, 1], [0, 1]], rng=seeded(1))
    assert spent == [(0.5, 0.0)] * 4 and sum(e for e, _ in spent) == model.epsilon == 2.0
    assert model.composition == "basic: 4 one-vs-rest halfspaces at ε/4 each"


def test_it_predicts_the_class_of_the_highest_score() -> None:
    X, y = corners(4000, 2)
    model = fit_one_vs_rest(X, y, classes=4, epsilon=4.0, bounds=[[0, 1], [0, 1]], rng=seeded(3))
    scores = model.scores(X)
    assert model.predict(X).tolist() == np.argmax(scores, axis=1).tolist()
    assert float(np.mean(model.predict(X) == y)) > 0.9
    assert all(isinstance(h, HalfspaceModel) for h in model.halfspaces)
    assert model.to_dict()["kind"] == "one-vs-rest" and len(model.to_dict()["halfspaces"]) == 4


def test_a_fixed_seed_gives_the_same_release_and_another_seed_another() -> None:
    X, y = corners(1500, 4)
    a = fit_one_vs_rest(X, y, classes=4, epsilon=1.0, bounds=[[0, 1], [0, 1]], rng=seeded(5))
    b = fit_one_vs_rest(X, y, classes=4, epsilon=1.0, bounds=[[0, 1], [0, 1]], rng=seeded(5))
    c = fit_one_vs_rest(X, y, classes=4, epsilon=1.0, bounds=[[0, 1], [0, 1]], rng=seeded(6))
    assert a.to_dict() == b.to_dict() != c.to_dict()


@pytest.mark.parametrize(("labels", "classes"), [([0, 3], 3), ([0, -1], 3), ([0, 1], 1), ([0.0, 1.0], 2)])
def test_labels_and_classes_are_checked(labels: list, classes: int) -> None:
    with pytest.raises(LearningInputError):
        fit_one_vs_rest(np.zeros((2, 1)), np.array(labels), classes=classes, epsilon=1.0, bounds=[[0, 1]])


def test_a_model_of_k_halfspaces_is_a_model() -> None:
    h = HalfspaceModel([[0, 1]], [1.0], 0.5)
    g = HalfspaceModel([[0, 1]], [-1.0], -0.5)
    model = OneVsRestModel((h, g), 1.0, 0.0)
    assert model.predict(np.array([[0.9], [0.1]])).tolist() == [0, 1]
    assert model.epsilon_per_class == 0.5


def test_the_audit_pair_holds_the_claim_and_an_unsplit_budget_would_not() -> None:
    from privstream.learning.audit import audit_spec, privacy_loss
    from privstream.learning.private_learners.one_vs_rest_audit_specs import one_vs_rest_audit_spec

    spec = audit_spec("one-vs-rest")
    assert spec.exact is not None
    assert 0.4 < privacy_loss(*spec.exact()) <= spec.claimed.epsilon == 1.0
    unsplit = one_vs_rest_audit_spec(3.0)  # each class at ε = 1: what budget_not_split releases
    assert unsplit.exact is not None and privacy_loss(*unsplit.exact()) > 1.5
