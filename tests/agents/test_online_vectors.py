"""The online agent on streams of feature vectors: predict before learning, the margin bound and its
report, metrics, durable state, and replays after a crash that count nothing twice."""

from __future__ import annotations

import json
import logging

import numpy as np

from privstream.agents.online import OnlineLearners, VectorStream
from privstream.agents.pipeline import IngestPipeline, RawRecord
from privstream.agents.progress import Progress
from privstream.agents.validation import ExampleValidator, vector_domain
from privstream.learning.online import make_online_learner
from privstream.schemas import VectorPredictionBatch
from privstream.stream_app.metrics import ServiceMetrics
from privstream.stream_app.store.sqlite_state import SqliteStateStore
from tests.learning.online.streams import noisy_stream, separable_stream

BOUNDS = [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]


def make_pipeline(store=None, learner="perceptron", params=None, bounds=BOUNDS):
    metrics = ServiceMetrics([], vector_stream_ids=["v"])
    stream = VectorStream("v", tuple(map(tuple, bounds)), learner, params or {"margin": 0.2})
    learners = OnlineLearners({"v": stream}, metrics, store)
    validator = ExampleValidator({"v": vector_domain(len(bounds))})
    return IngestPipeline(validator, learners, metrics, Progress()), learners, metrics


def records(X, y, start=0, partition=0):
    return [
        RawRecord(
            "examples",
            partition,
            start + i,
            b"v",
            json.dumps({"stream_id": "v", "x": x.tolist(), "y": int(label)}).encode(),
            1_700_000_000_000,
        )
        for i, (x, label) in enumerate(zip(X, y, strict=True))
    ]


def batches(out):
    return [VectorPredictionBatch.model_validate_json(value) for _, value in out.predictions]


def metric(metrics, name, **labels):
    return metrics.registry.get_sample_value(name, labels)


def test_a_vector_stream_gets_predictions_made_before_learning():
    X, y, bounds = separable_stream(3, 0.2, 300, seed=1, bounds=BOUNDS)
    pipeline, learners, metrics = make_pipeline()
    out = pipeline.process(records(X, y))
    [batch] = batches(out)
    reference = make_online_learner("perceptron", bounds, margin=0.2)
    assert batch.predictions == [reference.learn_one(x, int(label)) for x, label in zip(X, y, strict=True)]
    assert batch.mistakes == reference.mistakes <= batch.mistake_bound == 100  # (sqrt(4)/0.2)²
    assert batch.realizable is True and batch.learner == "perceptron"
    assert batch.source_offsets == list(range(300)) and batch.ys == y.tolist()
    assert metric(metrics, "privstream_examples_learned_total", stream="v") == 300
    assert metric(metrics, "privstream_online_mistakes_total", stream="v") == reference.mistakes
    assert metric(metrics, "privstream_online_margin_bound", stream="v") == 100
    assert learners.vector_learner("v").examples_seen == 300


def test_more_mistakes_than_the_bound_are_reported(caplog):
    X, y, _ = noisy_stream(3, 400, seed=2, noise=0.3)
    pipeline, _, metrics = make_pipeline(params={"margin": 0.9})  # bound ⌊4/0.81⌋ = 4
    with caplog.at_level(logging.WARNING):
        [batch] = batches(pipeline.process(records(X, y)))
    assert batch.margin_bound == 4 < batch.mistakes and batch.realizable is False
    assert metric(metrics, "privstream_stream_realizable", stream="v") == 0
    assert metric(metrics, "privstream_online_margin_mistakes", stream="v") == batch.mistakes
    assert "no halfspace separates the stream" in caplog.text


def test_a_learner_without_a_margin_test_reports_none():
    X, y, _ = noisy_stream(3, 200, seed=3)
    pipeline, _, metrics = make_pipeline(learner="logistic", params={"learning_rate": 0.5})
    [batch] = batches(pipeline.process(records(X, y)))
    assert batch.mistake_bound is None and batch.realizable is None and batch.margin_bound is None
    assert metric(metrics, "privstream_stream_realizable", stream="v") == 1  # not proven otherwise


def test_the_state_survives_a_restart_and_a_replay_counts_nothing_twice(tmp_path):
    X, y, _ = noisy_stream(3, 900, seed=4, noise=0.1)
    every = records(X, y)
    straight, _, _ = make_pipeline(learner="averaged-perceptron", params={"margin": 0.1})
    expected = batches(straight.process(every))[0]

    store = SqliteStateStore(tmp_path / "state.sqlite3")
    first, _, _ = make_pipeline(store, "averaged-perceptron", {"margin": 0.1})
    [head] = batches(first.process(every[:500]))
    # A crash before the offsets were committed: a new worker gets offsets 300.. again, and more.
    store.close()
    store = SqliteStateStore(tmp_path / "state.sqlite3")
    second, learners, metrics = make_pipeline(store, "averaged-perceptron", {"margin": 0.1})
    [tail] = batches(second.process(every[300:]))
    assert tail.source_offsets == list(range(500, 900))  # the replayed 300..499 are skipped
    assert head.predictions + tail.predictions == expected.predictions
    assert tail.mistakes == expected.mistakes and learners.vector_learner("v").examples_seen == 900
    assert metric(metrics, "privstream_examples_learned_total", stream="v") == 400
    # A replay of learned examples only publishes nothing.
    assert second.process(every[600:700]).predictions == []


def test_a_saved_state_of_other_settings_is_not_used(tmp_path, caplog):
    X, y, _ = noisy_stream(3, 100, seed=5)
    store = SqliteStateStore(tmp_path / "state.sqlite3")
    first, _, _ = make_pipeline(store, params={"margin": 0.2})
    first.process(records(X, y))
    with caplog.at_level(logging.WARNING):
        _, learners, _ = make_pipeline(store, params={"margin": 0.5})  # the margin was changed
    assert learners.vector_learner("v").examples_seen == 0
    assert "ignoring its saved online state" in caplog.text
    _, learners, _ = make_pipeline(store, params={"margin": 0.2})
    assert learners.vector_learner("v").examples_seen == 100


def test_values_outside_the_bounds_are_counted_per_feature_for_the_operator_only():
    X = np.array([[0.5, 0.5, 0.5], [1.5, 0.5, -0.2], [2.0, 0.5, 0.5], [0.5, 0.5, 1.0]])
    y = np.array([1, 0, 1, 0])
    pipeline, _, metrics = make_pipeline()
    out = pipeline.process(records(X, y))
    assert metric(metrics, "privstream_feature_values_clipped_total", stream="v", feature="x1") == 2
    assert metric(metrics, "privstream_feature_values_clipped_total", stream="v", feature="x2") is None
    assert (
        metric(metrics, "privstream_feature_values_clipped_total", stream="v", feature="x3") == 1
    )  # 1.0: inside
    # Nothing of it in what the pipeline publishes (the prediction batches).
    assert all("clip" not in value.decode() for _, value in out.predictions)
    named = VectorStream("w", ((0.0, 1.0),), "perceptron", {}, ("age",))
    assert named.feature_names() == ("age",)
