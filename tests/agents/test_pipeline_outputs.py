"""Every record the pipeline asks to publish fits Kafka's request limit, whatever the input.

A predictions message used to be cut at 5,000 entries whatever their size: 5,000 examples with
200-character ids made a 1,098,372-byte message, which the producer refused; the ingest loop then
crashed, and every restart crashed again on the same uncommitted input.
"""

from __future__ import annotations

import inspect
import json

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from hypothesis import given, settings
from hypothesis import strategies as st

from privstream.agents.online import OnlineLearners, OnlineStream
from privstream.agents.pipeline import MAX_PREDICTIONS_PER_MESSAGE, BatchOutput, IngestPipeline, RawRecord
from privstream.agents.progress import Progress
from privstream.agents.validation import MAX_MESSAGE_BYTES, ExampleValidator, integer_domain, vector_domain
from privstream.learning.errors import ClassSpecError
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.schemas import PredictionBatch
from privstream.stream_app.metrics import ServiceMetrics

#: What Kafka takes in one request by default (the producer's max_request_size, the broker's limit).
KAFKA_DEFAULT_REQUEST_BYTES = inspect.signature(AIOKafkaProducer).parameters["max_request_size"].default

CLASS = parse_class_spec("thresholds:4294967296")
STREAM = "s" * 200  # the longest stream id


def make_pipeline() -> IngestPipeline:
    metrics = ServiceMetrics([STREAM])
    learners = OnlineLearners({STREAM: OnlineStream(STREAM, CLASS)}, metrics, None)
    validator = ExampleValidator({STREAM: integer_domain(CLASS.check_point)}, user_level=frozenset())
    return IngestPipeline(validator, learners, metrics, Progress())


def record_bytes(key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> int:
    return len(key or b"") + len(value) + sum(len(k) + len(v) for k, v in headers)


def assert_bounded(out: BatchOutput) -> None:
    """Every record fits Kafka's default request (as the producer counts it, framing included), our
    producer's own limit, and the pipeline's stated bound on key, value and headers."""
    records = [(key, value, []) for key, value in out.predictions] + [tuple(d) for d in out.dead_letters]
    for key, value, headers in records:
        size = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
        assert size <= KAFKA_DEFAULT_REQUEST_BYTES, size
    from privstream.agents.pipeline import MAX_RECORD_BYTES
    from privstream.stream_app.kafka.ingest import PRODUCER_MAX_REQUEST_BYTES

    for key, value, headers in records:
        assert (
            DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
            <= PRODUCER_MAX_REQUEST_BYTES
        )
        assert record_bytes(key, value, headers) <= MAX_RECORD_BYTES


def predicted(out: BatchOutput) -> int:
    return sum(len(PredictionBatch.model_validate_json(v).xs) for _, v in out.predictions)


def single(i: int, example_id: str) -> bytes:
    return json.dumps({"stream_id": STREAM, "x": 2**32 - 1 - i, "y": 1, "id": example_id}).encode()


def records(values: list[bytes]) -> list[RawRecord]:
    return [RawRecord("examples", 0, 10**18 + i, b"k", v) for i, v in enumerate(values)]


def test_five_thousand_examples_with_200_character_ids_are_split_by_size():
    values = [single(i, f"{i:0200d}") for i in range(MAX_PREDICTIONS_PER_MESSAGE)]
    out = make_pipeline().process(records(values))
    assert_bounded(out)
    assert len(out.predictions) > 1 and predicted(out) == len(values)


def test_ids_written_at_six_bytes_a_character_still_fit():
    """A control character is written \\u0001 in JSON: 200 of them take 1,200 bytes."""
    values = [single(i, "\x01" * 199 + chr(0x10000 + i)) for i in range(MAX_PREDICTIONS_PER_MESSAGE)]
    out = make_pipeline().process(records(values))
    assert_bounded(out)
    assert predicted(out) == len(values)


def test_two_batch_messages_of_532_kb_are_split_by_size():
    rows = 2_500
    message = json.dumps(
        {
            "stream_id": STREAM,
            "xs": [2**32 - 1 - i for i in range(rows)],
            "ys": [1] * rows,
            "ids": [f"{i:0200d}" for i in range(rows)],
        }
    ).encode()
    assert len(message) > 530_000
    out = make_pipeline().process(records([message, message]))
    assert_bounded(out)
    assert predicted(out) == 2 * rows


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(max_size=200), min_size=1, max_size=300), st.integers(1, 40))
def test_predictions_of_any_ids_stay_under_the_limit(ids, copies):
    values = [single(i, example_id) for i, example_id in enumerate(ids)]
    out = make_pipeline().process(records(values * copies))
    assert_bounded(out)
    assert predicted(out) == len(values) * copies


def test_dead_letters_of_huge_messages_and_keys_are_bounded_and_say_the_size():
    pipeline = make_pipeline()
    huge_key = b"k" * 3_000_000
    values = [
        b"x" * (MAX_MESSAGE_BYTES + 1),  # over the hard cap
        b'{"stream_id": "nope", "xs": [' + b"1," * 2_000_000 + b"1]}",  # a whole batch rejected, 4 MB
        json.dumps({"stream_id": STREAM, "xs": [1, "x" * 3_000_000], "ys": [1, 1]}).encode(),  # one huge row
    ]
    out = pipeline.process([RawRecord("examples", 0, i, huge_key, v) for i, v in enumerate(values)])
    assert_bounded(out)
    assert len(out.dead_letters) == 3 and predicted(out) == 1
    for letter, value in zip(out.dead_letters, values, strict=True):
        headers = dict(letter.headers)
        assert int(headers["source.bytes"]) > len(letter.value) and letter.key == huge_key[: len(letter.key)]
        if "source.row" not in headers:  # the message itself, cut
            assert value.startswith(letter.value)


def test_points_at_the_top_of_the_largest_domain_are_learned_and_their_predictions_fit():
    """The largest domain a class may have (2^62 points; larger specs are refused when parsed):
    its top points are learned and predicted, within the bounded prediction messages."""
    with pytest.raises(ClassSpecError):
        parse_class_spec("thresholds:2^64")
    spec, x = "thresholds:2^62", 2**62 - 1
    hclass = parse_class_spec(spec)
    metrics = ServiceMetrics(["big"])
    learners = OnlineLearners({"big": OnlineStream("big", hclass)}, metrics, None)
    pipeline = IngestPipeline(
        ExampleValidator({"big": integer_domain(hclass.check_point)}), learners, metrics, Progress()
    )
    values = [json.dumps({"stream_id": "big", "x": x - i, "y": 1}).encode() for i in range(5_000)]
    out = pipeline.process(records(values))
    assert_bounded(out)
    batches = [PredictionBatch.model_validate_json(v) for _, v in out.predictions]
    assert sum(len(b.xs) for b in batches) == 5_000 and batches[0].xs[0] == x


@pytest.mark.parametrize("vector", [False, True])
def test_predictions_are_written_as_pydantic_writes_them(vector):
    """The pipeline writes its predictions with msgspec from models built without pydantic's checks:
    the bytes are the ones the validated model writes (every field of its type, in its order)."""
    from privstream.agents.online import VectorStream
    from privstream.schemas import VectorPredictionBatch

    stream = "v" if vector else "c"
    learners = OnlineLearners(
        {"c": OnlineStream("c", CLASS), "v": VectorStream("v", ((0.0, 1.0), (-1.0, 1.0)))},
        ServiceMetrics(["c"], vector_stream_ids=["v"]),
        None,
    )
    validator = ExampleValidator(
        {"c": integer_domain(CLASS.check_point, CLASS.domain_size), "v": vector_domain(2)}
    )
    pipeline = IngestPipeline(validator, learners, ServiceMetrics(["c"], vector_stream_ids=["v"]), Progress())
    xs = [[0.5, -0.25], [0.1, 0.9], [1, 0]] if vector else [3, 2**31, 7]
    records = [
        RawRecord(
            "examples",
            0,
            offset,
            b"k",
            json.dumps({"stream_id": stream, "x": x, "y": offset % 2, "id": f"e{offset}"}).encode(),
        )
        for offset, x in enumerate(xs)
    ]
    ((_key, value),) = pipeline.process(records).predictions
    model = (VectorPredictionBatch if vector else PredictionBatch).model_validate_json(value)
    assert value == model.model_dump_json().encode()
    assert model.source_offsets == [0, 1, 2] and model.example_ids == ["e0", "e1", "e2"]
