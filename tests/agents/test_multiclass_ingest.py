"""Streams of K classes at ingest: labels 0..K-1 validated against the stream's K (one label, one
row), and the online multi-class Perceptron predicting each class before learning it, its state
saved and restored, replays learned once."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privstream.agents.online import OnlineLearners, VectorStream
from privstream.agents.pipeline import IngestPipeline, RawRecord
from privstream.agents.progress import Progress
from privstream.agents.validation import ExampleValidator, Invalid, ValidExample, ValidRows, vector_domain
from privstream.learning.online.multiclass import MulticlassPerceptron
from privstream.schemas import VectorPredictionBatch
from privstream.stream_app.metrics import ServiceMetrics
from privstream.stream_app.store.sqlite_state import SqliteStateStore

BOUNDS = [[0.0, 1.0], [0.0, 1.0]]


@pytest.fixture
def validator() -> ExampleValidator:
    # "k" has 10 classes, "b" is a binary stream of the same features
    return ExampleValidator({"k": vector_domain(2), "b": vector_domain(2)}, classes={"k": 10, "b": 2})


def message(**fields: object) -> bytes:
    return json.dumps(fields).encode()


@pytest.mark.parametrize("y", [0, 1, 2, 9, True, False])
def test_a_class_of_the_stream_is_a_valid_label(validator: ExampleValidator, y: object) -> None:
    raw = message(stream_id="k", x=[0.5, 0.5], y=y)
    assert validator.validate(raw) == ValidExample("k", [0.5, 0.5], int(y))  # type: ignore[call-overload]
    assert validator.read(raw).y == int(y)  # type: ignore[call-overload, union-attr]  # the fast path too


@pytest.mark.parametrize("y", [10, 11, 255, -1, 2.5, "3", None])
def test_a_label_that_is_no_class_of_the_stream_is_refused(validator: ExampleValidator, y: object) -> None:
    result = validator.validate(message(stream_id="k", x=[0.5, 0.5], y=y))
    assert type(result) is Invalid and result.reason == "invalid_label", result
    assert "0 to 9" in result.detail


def test_a_binary_stream_keeps_its_labels(validator: ExampleValidator) -> None:
    assert validator.validate(message(stream_id="b", x=[0.5, 0.5], y=-1)) == ValidExample("b", [0.5, 0.5], 0)
    result = validator.validate(message(stream_id="b", x=[0.5, 0.5], y=2))
    assert type(result) is Invalid and result.reason == "invalid_label"
    assert result.detail.endswith("label must be 0/1, -1/+1 or a boolean, got 2")


def test_a_batch_loses_only_its_rows_without_a_class(validator: ExampleValidator) -> None:
    xs = [[0.1, 0.2]] * 5
    rows = validator.validate(message(stream_id="k", xs=xs, ys=[3, 12, -1, 9, 0]))
    assert type(rows) is ValidRows
    assert rows.rows == [0, 3, 4] and rows.ys == [3, 9, 0]
    assert [(r.row, r.invalid.reason) for r in rows.rejected] == [(1, "invalid_label"), (2, "invalid_label")]
    # each rejected row gets the verdict it gets alone
    for r in rows.rejected:
        assert validator.validate(r.value) == r.invalid
    every = validator.validate(message(stream_id="k", xs=xs[:3], ys=[1, 7, True]))
    assert type(every) is ValidRows and every.ys == [1, 7, 1] and not every.rejected


def three_classes(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(seed)
    X = gen.uniform(0, 1, (n, 2))
    return X, np.digitize(X[:, 0] - X[:, 1], [-0.3, 0.3])


def records(X: np.ndarray, y: np.ndarray, start: int = 0) -> list[RawRecord]:
    return [
        RawRecord(
            "examples",
            0,
            start + i,
            b"k",
            json.dumps({"stream_id": "k", "x": x.tolist(), "y": int(label)}).encode(),
            1_700_000_000_000,
        )
        for i, (x, label) in enumerate(zip(X, y, strict=True))
    ]


def pipeline(store: SqliteStateStore | None = None) -> tuple[IngestPipeline, OnlineLearners]:
    metrics = ServiceMetrics([], vector_stream_ids=["k"])
    stream = VectorStream("k", tuple(map(tuple, BOUNDS)), "auto", {"margin": 0.1}, classes=3)  # type: ignore[arg-type]
    learners = OnlineLearners({"k": stream}, metrics, store)
    validator = ExampleValidator({"k": vector_domain(2)}, classes={"k": 3})
    return IngestPipeline(validator, learners, metrics, Progress()), learners


def batches(out: object) -> list[VectorPredictionBatch]:
    return [VectorPredictionBatch.model_validate_json(value) for _, value in out.predictions]  # type: ignore[attr-defined]


def test_the_online_multiclass_perceptron_predicts_each_class_before_learning_it() -> None:
    X, y = three_classes(600, seed=1)
    flow, _ = pipeline()
    [batch] = batches(flow.process(records(X, y)))
    reference = MulticlassPerceptron(BOUNDS, classes=3, margin=0.1)
    assert batch.learner == "multiclass-perceptron"
    assert batch.predictions == reference.learn_many(X, y).tolist()
    assert set(batch.predictions) == {0, 1, 2} and batch.ys == y.tolist()
    assert batch.mistakes == reference.mistakes <= batch.mistake_bound == 600  # ⌊2·3/0.1²⌋
    assert batch.realizable is True
    assert np.mean(np.array(batch.predictions[300:]) == y[300:]) > 0.8  # chance: 1/3


def test_its_state_survives_a_restart_and_a_replay_is_learned_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    X, y = three_classes(400, seed=2)
    store = SqliteStateStore(tmp_path / "state.db")
    flow, _ = pipeline(store)
    flow.process(records(X[:250], y[:250]))
    again, learners = pipeline(store)  # a new worker on the same store
    [batch] = batches(again.process(records(X, y)))  # the first 250 delivered again
    assert batch.source_offsets == list(range(250, 400))
    reference = MulticlassPerceptron(BOUNDS, classes=3, margin=0.1)
    reference.learn_many(X, y)
    assert learners.vector_learner("k").state_dict() == reference.state_dict()
    store.close()
