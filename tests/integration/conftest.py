"""Live tests: a real embedded broker and the worker as a subprocess, unique names per test."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer

from privstream.stream_app.embedded.broker import EmbeddedBroker, free_listener_ports
from privstream.stream_app.embedded.demo import WorkerProcess
from privstream.stream_app.settings import Settings
from privstream.stream_app.signing import shared_key_file

RECV_TIMEOUT = 120.0  # a cold group join on the embedded broker takes 5-30 s


def process_gone(pid: int) -> bool:
    """True when the process has exited (a zombie waiting to be reaped counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except FileNotFoundError:
        return True
    return state in "ZX"


def children_of(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return []
    return [int(p) for p in text.split()]


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    external = os.environ.get("PRIVSTREAM_KAFKA_BOOTSTRAP")
    if external:  # the same tests run against Apache Kafka when one is configured

        class External:
            bootstrap = external
            pid = None

        yield External()  # type: ignore[misc]
        return
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def unique_settings(broker, tmp_path) -> Settings:
    run = uuid.uuid4().hex[:10]
    return Settings(
        app_id=f"privstream-it-{run}",
        topic_prefix=f"it-{run}.",
        kafka_bootstrap=broker.bootstrap,
        **free_listener_ports(),
        data_dir=tmp_path / "data",
        # One deployment key for every worker a test starts (workers with their own data folders
        # share it, as a mounted secret would); a test of the default key file unsets it.
        signing_key_file=shared_key_file(tmp_path / "signing_key.pem"),
        topic_partitions=2,
        # the embedded broker holds a group join for half the session timeout: 3 s per join
        kafka_session_timeout_seconds=6,
        kafka_heartbeat_interval_seconds=2,
        _env_file=None,
    )


def wait_until(predicate, timeout: float, interval: float = 0.25, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def start_worker(settings: Settings, tmp_path: Path, *, wait_ready: bool = True) -> WorkerProcess:
    """Start a worker and, unless ``wait_ready`` is false, wait until its partitions are assigned
    (a test that measures the worker from its very start, a backlog included, does not wait)."""
    worker = WorkerProcess(settings, tmp_path / f"worker-{settings.public_port}.log").start()
    try:
        # Ready: partitions assigned. A count window closes at its last example's record timestamp,
        # so examples produced while the worker still joins would find their deadlines passed.
        wait_until(lambda: not worker.alive() or not wait_ready or worker.ready(), 90, what="worker ready")
        assert worker.alive()
    except AssertionError:
        worker.stop()
        raise AssertionError("worker did not start:\n" + worker.log_path.read_text()[-3000:]) from None
    return worker


def prediction_count(record) -> int:
    """How many examples' predictions a ``PredictionBatch`` record carries."""
    import json

    return len(json.loads(record.value)["xs"])


async def consume_all(
    settings: Settings, topic: str, expected: int, timeout: float = RECV_TIMEOUT, weight=lambda record: 1
):
    """Read records from ``topic`` (from the beginning) until their total ``weight`` reaches
    ``expected`` (by default: ``expected`` records), or until ``timeout``."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=settings.kafka_bootstrap,
        group_id=f"reader-{uuid.uuid4().hex}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    records = []
    try:
        deadline = time.monotonic() + timeout
        total = 0
        while total < expected and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500, max_records=5000)
            for messages in batch.values():
                records.extend(messages)
                total += sum(weight(m) for m in messages)
        # Anything beyond what we expect is a bug too (e.g. a duplicate): drain briefly.
        batch = await consumer.getmany(timeout_ms=1000)
        for messages in batch.values():
            records.extend(messages)
    finally:
        await consumer.stop()
    return records


def run(coro):
    return asyncio.run(coro)
