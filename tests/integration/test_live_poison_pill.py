"""A poison pill fed to a real worker on the embedded broker: it keeps running, commits, and emits
every prediction.

Ordinary input used to crash the worker for good: 5,000 single examples with 200-character ids,
waiting when it started, made one predictions message of 1,098,372 bytes, which the producer refused
(MessageSizeTooLargeError); the ingest loop died, nothing was committed, and every restart read the
same input and died again. Two valid batch messages of 532 KB did the same. Here they wait for one
worker, with repeats of some ids and one invalid row among them.
"""

from __future__ import annotations

import json

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from privstream.schemas import PredictionBatch
from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.settings import StreamConfig

from .conftest import consume_all, prediction_count, run, start_worker, wait_until

pytestmark = pytest.mark.live

STREAM = "pill"
SINGLES = 5_000
ROWS = 2_450  # a batch of 532 KB
REPEATS = 50  # copies of the first singles' ids: dropped


def an_id(kind: str, i: int) -> str:
    return f"{kind}-{i:0{199 - len(kind)}d}"  # 200 characters, the most the schema allows


def poison_pill() -> list[bytes]:
    singles = [
        json.dumps({"stream_id": STREAM, "x": 2**32 - 1 - i, "y": 1, "id": an_id("single", i)}).encode()
        for i in range(SINGLES)
    ]
    repeats = singles[:REPEATS]
    batches = []
    for k in range(2):
        xs = [2**31 + i for i in range(ROWS)]
        xs[7] = 2**32 if k == 1 else xs[7]  # one row outside the domain: dead-lettered alone
        batch = {
            "stream_id": STREAM,
            "xs": xs,
            "ys": [1] * ROWS,
            "ids": [an_id(f"b{k}", i) for i in range(ROWS)],
        }
        batches.append(json.dumps(batch).encode())
    assert all(530_000 < len(b) < 540_000 for b in batches)
    return singles + repeats + batches


async def committed_offset(settings, partition: int) -> int | None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap, group_id=f"{settings.app_id}.ingest"
    )
    await consumer.start()
    try:
        return await consumer.committed(TopicPartition(settings.topic("examples"), partition))
    finally:
        await consumer.stop()


def test_a_worker_survives_the_poison_pill_commits_and_emits_every_prediction(unique_settings, tmp_path):
    settings = unique_settings.model_copy(
        update={"streams": [StreamConfig(name=STREAM, hypothesis_class="thresholds:4294967296")]}
    )
    run(ensure_topics(settings))
    messages = poison_pill()
    run(produce_json(settings, settings.topic("examples"), [(STREAM, m) for m in messages]))
    worker = start_worker(settings, tmp_path)
    try:
        wait_until(
            lambda: (fetch_json(f"{worker.operator_url}/status") or {}).get("handled") == len(messages),
            120,
            what="every message handled",
        )
        expected = SINGLES + 2 * ROWS - 1  # the repeats dropped, the invalid row dead-lettered
        predictions = run(
            consume_all(settings, settings.topic("predictions"), expected, weight=prediction_count)
        )
        dead = run(consume_all(settings, settings.topic("examples.dlq"), 1))
        # one key, so one partition of the examples topic, from offset 0: all of it committed
        source = PredictionBatch.model_validate_json(predictions[0].value).source_partition
        wait_until(
            lambda: run(committed_offset(settings, source)) == len(messages),
            30,
            what="every offset committed",
        )
        health = fetch_json(f"{worker.operator_url}/healthz")
        assert worker.alive(), worker.log_path.read_text()[-3000:]
    finally:
        status = worker.stop()
    from privstream.agents.pipeline import MAX_RECORD_BYTES

    batches = [PredictionBatch.model_validate_json(r.value) for r in predictions]
    ids = [i for b in batches for i in b.example_ids or []]
    assert len(ids) == len(set(ids)) == expected  # every prediction, once
    assert all(len(r.value) + len(r.key or b"") <= MAX_RECORD_BYTES for r in predictions)
    assert len(predictions) > 1  # split by size: one message would have been over 1 MB
    assert health is not None and health["status"] == "ok"
    (letter,) = dead
    headers = dict(letter.headers)
    assert (headers["error.reason"], headers["source.row"]) == (b"out_of_domain", b"7")
    assert status == 0, worker.log_path.read_text()[-3000:]
