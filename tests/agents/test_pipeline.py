"""The ingest pipeline offline (no broker): validation, batched SOA learning, dead letters."""

from __future__ import annotations

import json

import numpy as np

from privstream.agents.online import OnlineLearners, OnlineStream
from privstream.agents.pipeline import IngestPipeline, RawRecord
from privstream.agents.progress import Progress
from privstream.agents.validation import ExampleValidator
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.soa import SOA
from privstream.schemas import PredictionBatch
from privstream.stream_app.metrics import ServiceMetrics
from privstream.stream_app.store.sqlite_state import SqliteStateStore

CLASS = parse_class_spec("thresholds:8")


def make_pipeline(store=None):
    metrics = ServiceMetrics(["s"])
    learners = OnlineLearners({"s": OnlineStream("s", CLASS)}, metrics, store)
    validator = ExampleValidator({"s": CLASS.check_point})
    return IngestPipeline(validator, learners, metrics, Progress()), metrics


def records(values, partition=0, start=0):
    return [
        RawRecord("examples", partition, start + i, b"s", v, 1_700_000_000_000) for i, v in enumerate(values)
    ]


def example(x, y):
    return json.dumps({"stream_id": "s", "x": x, "y": y}).encode()


def test_predictions_are_made_before_learning_and_match_a_plain_soa():
    pipeline, metrics = make_pipeline()
    xs = [4, 6, 5, 4, 6, 5, 0, 7]  # binary-search order for the target t = 5
    out = pipeline.process(records([example(x, int(x >= 5)) for x in xs]))
    assert len(out.predictions) == 1 and out.dead_letters == [] and out.examples == len(xs)
    key, value = out.predictions[0]
    batch = PredictionBatch.model_validate_json(value)
    reference = SOA(CLASS)
    assert batch.predictions == [reference.learn_one(x, int(x >= 5)) for x in xs]
    assert batch.mistakes == reference.mistakes <= batch.mistake_bound == 3
    assert batch.source_offsets == list(range(len(xs))) and key == b"s"
    assert metrics.received_count == len(xs)


def test_example_batches_and_single_examples_mix_in_order():
    pipeline, _ = make_pipeline()
    batch_message = json.dumps({"stream_id": "s", "xs": [1, 7, 3], "ys": [0, 1, 0], "ids": ["a", "b", "c"]})
    out = pipeline.process(records([example(6, 1), batch_message.encode(), example(2, 0)]))
    batch = PredictionBatch.model_validate_json(out.predictions[0][1])
    assert batch.xs == [6, 1, 7, 3, 2]
    assert batch.source_offsets == [0, 1, 1, 1, 2] and batch.source_items == [0, 0, 1, 2, 0]
    assert batch.example_ids == [None, "a", "b", "c", None]


def test_invalid_messages_become_dead_letters_and_the_rest_goes_on():
    pipeline, metrics = make_pipeline()
    out = pipeline.process(records([b"{broken", example(8, 1), example(7, 1)], partition=3, start=40))
    reasons = [dict(d.headers)["error.reason"] for d in out.dead_letters]
    assert reasons == [b"invalid_json", b"out_of_domain"]
    assert out.dead_letters[0].value == b"{broken"
    assert dict(out.dead_letters[1].headers)["source.offset"] == b"41"
    assert dict(out.dead_letters[1].headers)["source.partition"] == b"3"
    assert PredictionBatch.model_validate_json(out.predictions[0][1]).xs == [7]
    assert metrics.invalid_counts["invalid_json"] == 1 and metrics.invalid_counts["out_of_domain"] == 1


def test_soa_state_is_saved_on_change_and_restored(tmp_path):
    store = SqliteStateStore(tmp_path / "state.sqlite3")
    pipeline, _ = make_pipeline(store)
    pipeline.process(records([example(4, 0), example(6, 1)]))
    soa = pipeline.learners.soa("s")
    # A new worker on the same store continues with the same SOA (same predictor, same mistakes).
    restarted, _ = make_pipeline(store)
    again = restarted.learners.soa("s")
    assert again.mistakes == soa.mistakes and again.predictor() == soa.predictor()
    xs = np.arange(8)
    assert np.array_equal(again.predictor().predict(xs), soa.predictor().predict(xs))


def test_huge_polls_become_several_prediction_messages_under_the_size_limit():
    from privstream.agents.pipeline import MAX_PREDICTIONS_PER_MESSAGE

    pipeline, _ = make_pipeline()
    n = 2 * MAX_PREDICTIONS_PER_MESSAGE + 7
    xs = [i % 8 for i in range(n)]
    message = json.dumps({"stream_id": "s", "xs": xs, "ys": [int(x >= 5) for x in xs]})
    out = pipeline.process(records([message.encode()]))
    assert len(out.predictions) == 3
    batches = [PredictionBatch.model_validate_json(v) for _, v in out.predictions]
    assert [len(b.xs) for b in batches] == [MAX_PREDICTIONS_PER_MESSAGE, MAX_PREDICTIONS_PER_MESSAGE, 7]
    assert batches[1].mistakes_before == batches[0].mistakes and batches[2].source_items[-1] == n - 1
    assert all(len(v) < 1_000_000 for _, v in out.predictions)
