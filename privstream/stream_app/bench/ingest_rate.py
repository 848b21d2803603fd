"""``privstream bench ingest``: the service's ingestion rate next to the raw Kafka client's.

In one run, on one topic of the embedded broker (or ``PRIVSTREAM_KAFKA_BOOTSTRAP``):

* ``raw_rate``: a plain aiokafka consumer (``getmany``, ``json.loads`` per message) reading the
  single-example messages: the ceiling of a Python consumer on this machine;
* ``service_rate``: a worker (subprocess, online SOA on ``thresholds:2^32``, predictions
  published, offsets committed after processing) draining the same messages;
* ``batch_rate``: the worker draining ``ExampleBatch`` messages (examples per second);
* latency from produce to prediction (p50, p99) with examples sent at half the service rate.

Ratios, not absolute times, are the result: the machine is shared and noisy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from privstream.stream_app.embedded.broker import EmbeddedBroker, free_listener_ports
from privstream.stream_app.embedded.demo import WorkerProcess, fetch_json
from privstream.stream_app.kafka.clients import client_options, ensure_topics
from privstream.stream_app.settings import Settings, StreamConfig

STREAM = "bench"
CLASS = "thresholds:4294967296"


def _examples(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    xs = rng.integers(0, 2**32, n)
    return xs, (xs >= 2**31).astype(np.uint8)


async def _produce(settings: Settings, payloads: list[bytes]) -> list[Any]:
    producer = AIOKafkaProducer(**client_options(settings), linger_ms=5, max_batch_size=1 << 20)
    await producer.start()
    try:
        futures = [await producer.send(settings.topic("examples"), p, key=STREAM.encode()) for p in payloads]
        return list(await asyncio.gather(*futures))
    finally:
        await producer.stop()


async def raw_consume_rate(settings: Settings, n: int) -> float:
    """Messages per second of a bare aiokafka consumer parsing each message as JSON."""
    consumer = AIOKafkaConsumer(
        settings.topic("examples"), **client_options(settings), group_id=f"raw-{uuid.uuid4().hex}",
        auto_offset_reset="earliest", enable_auto_commit=False,
        max_partition_fetch_bytes=8 << 20, fetch_max_bytes=64 << 20,
    )
    await consumer.start()
    try:
        seen, started = 0, None
        while seen < n:
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            if started is None and batch:
                started = time.perf_counter()
            for messages in batch.values():
                for message in messages:
                    json.loads(message.value)
                seen += sum(len(m) for m in batch.values())
        assert started is not None
        return n / (time.perf_counter() - started)
    finally:
        await consumer.stop()


def _drain_rate(worker: WorkerProcess, target: int, timeout: float) -> float:
    """Examples per second while the worker's learned count climbs to ``target``.

    Measured from the last observation before the count moved (so a group join is excluded)
    to the first observation at the target; observations are 20 ms apart.
    """
    start: tuple[float, int] | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = worker.status()
        now = time.perf_counter()
        if status is None:  # the worker is not answering yet: nothing to anchor on
            time.sleep(0.02)
            continue
        done = status["streams"][STREAM]["examples"]
        if done >= target:
            if start is None or start[1] >= done:
                raise RuntimeError("too few examples to measure a rate: the worker drained them between "
                                   "two observations; use more --examples")
            return (done - start[1]) / (now - start[0])
        if start is None or done == start[1]:
            start = (now, done)  # the count has not moved since: start the clock from here
        time.sleep(0.02)
    raise TimeoutError(f"the worker learned fewer than {target} examples in {timeout:.0f} s")


async def _latency(
    settings: Settings, rate: float, seconds: float, start_count: int
) -> tuple[list[float], int]:
    """Produce→prediction latencies (s) of examples sent at ``rate`` per second, and how many
    examples were sent."""
    n = int(rate * seconds)
    xs, ys = _examples(n, seed=7)
    producer = AIOKafkaProducer(**client_options(settings), linger_ms=1)
    # Partitions assigned by hand: no group join to wait for. It reads the earlier predictions
    # too; those are not among the examples sent here and are ignored.
    # As the worker's consumer (kafka_fetch_max_wait_ms): the embedded broker holds an idle fetch
    # for the whole wait, which would otherwise add up to 500 ms to every measured latency.
    consumer = AIOKafkaConsumer(**client_options(settings), enable_auto_commit=False,
                                fetch_max_wait_ms=settings.kafka_fetch_max_wait_ms)
    await consumer.start()
    topic = settings.topic("predictions")
    await consumer.topics()  # fetch the metadata: the topic's partitions
    consumer.assign([TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()])
    await consumer.seek_to_beginning()
    await producer.start()
    sent_at: dict[tuple[int, int], float] = {}
    received: dict[tuple[int, int], float] = {}
    wanted: set[tuple[int, int]] = set()  # (partition, offset) of the examples sent here

    sending_done = asyncio.Event()

    async def receive() -> None:
        while not (sending_done.is_set() and wanted <= received.keys()):
            batch = await consumer.getmany(timeout_ms=200)
            now = time.time()
            for messages in batch.values():
                for message in messages:
                    prediction = json.loads(message.value)
                    partition = prediction["source_partition"]
                    for offset in prediction["source_offsets"]:
                        received[(partition, offset)] = now

    receiver = asyncio.create_task(receive())
    try:
        step, t0 = 0.01, time.perf_counter()
        per_step = max(1, int(rate * step))
        pending = []
        for i in range(0, n, per_step):
            for j in range(i, min(n, i + per_step)):
                payload = json.dumps({"stream_id": STREAM, "x": int(xs[j]), "y": int(ys[j])}).encode()
                pending.append((time.time(), await producer.send(settings.topic("examples"), payload,
                                                                  key=STREAM.encode())))
            await asyncio.sleep(max(0.0, t0 + (i // per_step + 1) * step - time.perf_counter()))
        for stamp, future in pending:
            meta = await future
            sent_at[(meta.partition, meta.offset)] = stamp
            wanted.add((meta.partition, meta.offset))
        sending_done.set()
        # Bounded: what has not arrived 30 s after the last send is reported as missing.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(receiver), timeout=30)
    finally:
        receiver.cancel()
        await producer.stop()
        await consumer.stop()
    return [received[k] - sent_at[k] for k in sent_at if k in received], len(sent_at)


def run_ingest_benchmark(n: int = 100_000, batch_size: int = 1000, latency_seconds: float = 10.0,
                         settings: Settings | None = None, log: Any = sys.stderr) -> dict[str, Any]:
    """Run the measurements described in the module docstring; returns the JSON-able result."""
    settings = settings or Settings()
    run = secrets.token_hex(4)
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="privstream-bench-")))
        if settings.kafka_bootstrap is None:
            broker = stack.enter_context(EmbeddedBroker(log_path=workdir / "broker.log"))
            settings = settings.model_copy(update={"kafka_bootstrap": broker.bootstrap})
        settings = settings.model_copy(update={
            "app_id": f"privstream-bench-{run}", "topic_prefix": f"bench-{run}.", "topic_partitions": 4,
            **free_listener_ports(), "data_dir": workdir / "data",
            "streams": [StreamConfig(name=STREAM, hypothesis_class=CLASS)],
        })
        asyncio.run(ensure_topics(settings))
        xs, ys = _examples(n, seed=1)
        singles = [json.dumps({"stream_id": STREAM, "x": int(x), "y": int(y)}).encode()
                   for x, y in zip(xs.tolist(), ys.tolist(), strict=True)]
        print(f"bench: producing {n} single-example messages", file=log)
        asyncio.run(_produce(settings, singles))
        print("bench: raw aiokafka consumer", file=log)
        raw_rate = asyncio.run(raw_consume_rate(settings, n))
        print(f"bench: raw {raw_rate:,.0f} msg/s; starting a worker", file=log)
        worker = WorkerProcess(settings, workdir / "worker.log").start()
        stack.callback(worker.stop)
        service_rate = _drain_rate(worker, n, timeout=600)
        print(f"bench: service {service_rate:,.0f} examples/s; batched messages next", file=log)
        bx, by = _examples(n, seed=2)
        batches = [json.dumps({"stream_id": STREAM, "xs": bx[i:i + batch_size].tolist(),
                               "ys": by[i:i + batch_size].tolist()}).encode()
                   for i in range(0, n, batch_size)]
        asyncio.run(_produce(settings, batches))
        batch_rate = _drain_rate(worker, 2 * n, timeout=600)
        print(f"bench: batched {batch_rate:,.0f} examples/s; latency at half the service rate", file=log)
        latencies, latency_sent = asyncio.run(_latency(settings, service_rate / 2, latency_seconds, 2 * n))
        status = fetch_json(f"{worker.operator_url}/status") or {}
        exit_status = worker.stop()
        if exit_status != 0:
            print("bench: the worker failed; the end of its log:\n"
                  + (workdir / "worker.log").read_text()[-4000:], file=log)
    lat = np.array(latencies) if latencies else np.array([float("nan")])
    return {
        "raw_rate": raw_rate,
        "service_rate": service_rate,
        "ratio": service_rate / raw_rate,
        "batch_rate": batch_rate,
        "batch_ratio": batch_rate / raw_rate,
        "p50_latency_seconds": float(np.percentile(lat, 50)),
        "p99_latency_seconds": float(np.percentile(lat, 99)),
        "latency_samples": len(latencies),
        "latency_missing": latency_sent - len(latencies),
        "latency_rate": service_rate / 2,
        "examples": n,
        "batch_size": batch_size,
        "worker_exit_status": exit_status,
        "invalid": status.get("invalid"),
    }
