"""Sending a batch's outputs: a record Kafka refuses is handled on its own, never a crash.

A producer stand-in fails on command (at ``send`` or in the returned future, as aiokafka does);
``deliver`` must come back once every record is acknowledged, with a record refused for its size
replaced by its reference in the dead-letter topic, and other failures sent again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaTimeoutError, MessageSizeTooLargeError, RecordListTooLargeError

from privstream.agents.pipeline import MAX_RECORD_BYTES, DeadLetter
from privstream.stream_app.kafka.ingest import (
    PRODUCER_MAX_REQUEST_BYTES,
    deliver,
    ingest_producer_options,
    send_dead_letters,
    send_one,
)
from privstream.stream_app.settings import Settings


class Batch:
    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes, list]] = []

    def append(self, *, key: bytes | None, value: bytes, timestamp: None, headers: list) -> object | None:
        if len(self.records) == 3:
            return None  # full
        self.records.append((key, value, headers))
        return object()


class Producer:
    """Acknowledges what it is sent, except: a value in ``too_large`` (refused at ``send``, as the
    client's own size check does), a value in ``flaky`` (its future fails once with a timeout), and
    any batch holding a value in ``batch_too_large`` (refused by the broker)."""

    def __init__(self, too_large=(), flaky=(), batch_too_large=()):
        self.too_large, self.flaky, self.batch_too_large = set(too_large), set(flaky), set(batch_too_large)
        self.acknowledged: list[tuple[str, bytes | None, bytes, list]] = []

    def _future(self, error: Exception | None, records: list) -> asyncio.Future[Any]:
        future = asyncio.get_running_loop().create_future()
        if error is not None:
            future.set_exception(error)
        else:
            self.acknowledged += records
            future.set_result(None)
        return future

    async def send(self, topic, value, key=None, headers=None):
        if value in self.too_large:
            raise MessageSizeTooLargeError(f"The message is {len(value)} bytes")
        if value in self.flaky:
            self.flaky.discard(value)
            return self._future(KafkaTimeoutError(), [])
        return self._future(None, [(topic, key, value, headers)])

    async def partitions_for(self, topic):
        return {0, 1}

    def create_batch(self):
        return Batch()

    async def send_batch(self, batch, topic, *, partition):
        if any(value in self.batch_too_large for _, value, _ in batch.records):
            return self._future(RecordListTooLargeError(), [])
        return self._future(None, [(topic, k, v, h) for k, v, h in batch.records])


async def test_a_record_refused_for_its_size_becomes_a_reference_and_the_others_go_through():
    producer = Producer(too_large={b"huge prediction"}, flaky={b"p2"})
    sent = [
        await send_one(producer, "predictions", (b"s", v, [])) for v in (b"p1", b"huge prediction", b"p2")
    ]
    refused = []
    assert await deliver(
        producer, sent, "dlq", on_refused=lambda topic, record, error: refused.append(record)
    )
    values = [(topic, value) for topic, _, value, _ in producer.acknowledged]
    assert ("predictions", b"p1") in values and ("predictions", b"p2") in values  # p2 sent again
    (reference,) = [a for a in producer.acknowledged if a[0] == "dlq"]
    headers = dict(reference[3])
    assert reference[2] == b"" and headers["error.reason"] == b"output_refused"
    assert headers["output.topic"] == b"predictions" and headers["source.bytes"] == b"15"
    assert [value for _, value, _ in refused] == [b"huge prediction"]


async def test_a_dead_letter_batch_refused_is_sent_letter_by_letter():
    letters = [DeadLetter(b"k", b"v%d" % i, [("error.reason", b"wrong_type")]) for i in range(5)]
    producer = Producer(batch_too_large={b"v1"}, too_large={b"v1"})
    sent = await send_dead_letters(producer, "dlq", letters)
    assert await deliver(producer, sent, "dlq")
    by_value = {value: dict(headers) for _, _, value, headers in producer.acknowledged}
    assert set(by_value) == {b"v0", b"v2", b"v3", b"v4", b""}  # v1 only as its reference
    assert by_value[b""]["error.reason"] == b"wrong_type" and by_value[b""]["source.bytes"] == b"2"


async def test_a_record_failing_until_the_worker_stops_leaves_the_batch_uncommitted():
    class Down(Producer):
        async def send(self, topic, value, key=None, headers=None):
            return self._future(KafkaTimeoutError(), [])

    producer = Down()
    attempts = []

    def stopping() -> bool:
        attempts.append(1)
        return len(attempts) >= 3

    assert not await deliver(
        producer, [await send_one(producer, "predictions", (b"s", b"p", []))], "dlq", stopping
    )
    assert len(attempts) == 3 and producer.acknowledged == []


async def test_the_producer_takes_every_record_the_pipeline_can_make():
    options = ingest_producer_options(Settings(kafka_bootstrap="127.0.0.1:9092", _env_file=None))
    assert options["max_request_size"] == PRODUCER_MAX_REQUEST_BYTES
    producer = AIOKafkaProducer(**options)  # options aiokafka knows (else TypeError)
    try:
        # the largest record the pipeline makes passes the producer's own size check
        key, headers = b"k" * 100, [("error.detail", b"d" * 2000)]
        value = b"v" * (MAX_RECORD_BYTES - len(key) - 2000 - len("error.detail"))
        producer._serialize(key, value, headers)
    finally:
        await producer.stop()
