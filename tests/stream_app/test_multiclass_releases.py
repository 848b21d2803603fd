"""Private releases of a stream of K classes: K one-vs-rest halfspaces at ε/K each (never summing
past the charge), a certificate stating the composition, and the client predicting K classes from
the published release exactly as the service's model does."""

from __future__ import annotations

import asyncio
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from privstream_client import Release
from privstream_client.models import describe, model_from_dict
from pydantic import ValidationError

from privstream import __version__
from privstream.agents.releases import ReleaseAgent
from privstream.learning.private_learners.one_vs_rest import OneVsRestLearner, OneVsRestModel, share
from privstream.learning.private_learners.vector_base import make_vector_learner, vector_model_from_dict
from privstream.learning.randomness import seeded
from privstream.stream_app.release_policies import release_policy
from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.store.sqlite_state import SqliteStateStore
from privstream.testing.releases import NullMetrics

BOX = [[0.0, 1.0], [0.0, 1.0]]
N = 1500


def corners(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Three classes around three corners of the unit square."""
    gen = np.random.default_rng(seed)
    y = gen.integers(0, 3, n)
    centres = np.array([[0.15, 0.15], [0.85, 0.15], [0.15, 0.85]])
    return np.clip(centres[y] + gen.normal(0, 0.12, (n, 2)), 0, 1), y


@pytest.mark.parametrize(("epsilon", "classes"), [(1.0, 3), (0.1, 7), (2.0, 4), (1.0, 10)])
def test_the_class_shares_never_sum_past_the_budget(epsilon: float, classes: int) -> None:
    part = share(epsilon, classes)
    assert Fraction(part) * classes <= Fraction(epsilon) and part > epsilon / classes * (1 - 1e-15)


def test_each_class_is_fit_against_the_rest_on_every_row_at_its_share() -> None:
    seen: list[tuple[float, float, list[int], int]] = []
    halfspaces = make_vector_learner("halfspaces")

    class Recording:
        name = "halfspaces"

        def fit(self, X, y, **options):  # type: ignore[no-untyped-def]
            seen.append((options["epsilon"], options["delta"], sorted(set(y.tolist())), len(y)))
            return halfspaces.fit(X, y, **options)

    X, y = corners(600, 1)
    result = OneVsRestLearner(3, Recording()).fit(  # type: ignore[arg-type]
        X, y, epsilon=1.0, bounds=np.array(BOX), rng=seeded(2)
    )
    assert [s[0] for s in seen] == [share(1.0, 3)] * 3 and all(s[1] == 0.0 for s in seen)
    assert all(s[2] == [0, 1] and s[3] == 600 for s in seen)
    assert result.epsilon == 1.0 and result.delta == 0.0  # the charge: the shares sum to at most it
    p = result.parameters
    assert p["classes"] == 3 and p["epsilon_per_class"] == share(1.0, 3)
    assert p["composition"] == "basic: 3 one-vs-rest halfspaces at ε/3 each"
    assert "basic composition" in result.theorem and result.proper is False


def test_a_class_outside_the_labels_range_is_refused() -> None:
    X, _ = corners(10, 0)
    with pytest.raises(ValueError, match="labels must be integers from 0 to 2"):
        OneVsRestLearner(3).fit(X, np.full(10, 3), epsilon=1.0, bounds=np.array(BOX), rng=seeded(0))


def test_the_model_reads_back_and_the_client_predicts_the_same_classes() -> None:
    X, y = corners(N, 3)
    model = OneVsRestLearner(3).fit(X, y, epsilon=1.0, bounds=np.array(BOX), rng=seeded(4)).model
    assert isinstance(model, OneVsRestModel)
    assert vector_model_from_dict(model.to_dict()) == model
    client = model_from_dict(model.to_dict())
    grid = np.random.default_rng(5).uniform(-0.2, 1.2, (2000, 2))  # out of the box too: clipped
    np.testing.assert_array_equal(client.predict(grid), model.predict(grid))
    assert set(client.predict(grid).tolist()) == {0, 1, 2}
    assert describe(model.to_dict()).startswith("predicts the class of the highest of 3 halfspace scores")


def multiclass_stream(**release: Any) -> StreamConfig:
    return StreamConfig(
        name="digits",
        features=2,
        feature_bounds=BOX,
        classes=3,
        release={
            "learner": "halfspaces",
            "epsilon": 1.0,
            "epsilon_budget": 10.0,
            "window": {"kind": "count", "size": N},
            **release,
        },
    )


def test_the_service_releases_k_classes_with_their_composition_in_the_certificate() -> None:
    stream = multiclass_stream()
    published: list[tuple[str, bytes]] = []

    async def publish(topic: str, stream_id: str, release: bytes, *, timestamp_ms: int | None = None) -> None:
        published.append((topic, release))

    agent = ReleaseAgent(
        {"digits": release_policy(stream, None)},
        SqliteStateStore(":memory:"),
        SqliteLedger.open(":memory:", budgets={"digits": (10.0, 0.0)}),
        publish,
        NullMetrics(),
        library_version=__version__,
        rng_factory=lambda window_id: seeded(7),
    )
    X, y = corners(N, 6)

    async def run() -> None:
        agent.observe_batch(
            "digits", 0, list(range(N)), X.tolist(), y.tolist(), [None] * N, [None] * N, [None] * N
        )
        await agent.drain()

    asyncio.run(run())
    [body] = [body for topic, body in published if topic == "hypotheses"]
    release = Release.from_json(body)
    certificate = release.certificate
    assert release.hypothesis.kind == "one-vs-rest" and release.hypothesis.classes == 3  # type: ignore[attr-defined]
    assert certificate.epsilon == 1.0 and certificate.mechanism == "one-vs-rest(halfspace-net-em)"
    assert certificate.parameters["composition"] == "basic: 3 one-vs-rest halfspaces at ε/3 each"
    assert certificate.parameters["epsilon_per_class"] == share(1.0, 3)
    X_test, y_test = corners(3000, 8)
    accuracy = float(np.mean(release.predict(X_test) == y_test))
    assert accuracy > 0.6, accuracy  # three classes: chance is 1/3


def test_a_release_learner_without_class_scores_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValidationError) as info:
        multiclass_stream(learner="kernel", delta=1e-6, delta_budget=1e-5)
    assert "release.learner: 'kernel' releases a 0/1 rule without class scores" in str(info.value)
