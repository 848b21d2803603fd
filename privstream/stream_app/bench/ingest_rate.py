"""``privstream bench ingest``: the service's ingestion rate next to the raw Kafka client's.

In one run, on one topic of the embedded broker (or ``PRIVSTREAM_KAFKA_BOOTSTRAP``):

* ``raw_rate``: a plain aiokafka consumer (``getmany``, ``json.loads`` per message) reading the
  single-example messages: the ceiling of a Python consumer on this machine; ``service_rate``: a
  worker (subprocess, online SOA on ``thresholds:2^32``, predictions published, offsets committed
  after processing) draining the same messages; ``ratio`` is ``service_rate / raw_rate``;
* ``strict_raw_rate`` and ``strict_ratio``: the same with the raw consumer parsing by the service's
  own parser, ``pydantic_core.from_json``, a higher ceiling (and the only one on hostile messages:
  ``json.loads`` takes 75 µs on 2,000-deep nesting where the service's parser takes 3 µs);
* ``batch_rate``: the worker draining ``ExampleBatch`` messages (examples per second), last;
* latency from produce to prediction (p50, p99) with examples sent at a tenth of the service rate
  just measured (a quiet stream: what batching and fetch waits add) and at half of it (a busy one),
  each example timed from its record batch's send to its prediction's arrival at a reader in a
  process of its own (so that sending never delays the reading);
* with ``invalid_ratio`` R > 0, a flood, after the clean messages: n valid messages mixed with R·n
  hostile ones (every kind of :func:`~privstream.stream_app.sources.synthetic.hostile_messages`,
  spread evenly), then n hostile ones alone. The raw consumers and the worker read the same
  messages, so each part has its ratios, in messages per second: ``mix_ratio`` and
  ``strict_mix_ratio`` (the mix), ``flood_ratio`` and ``strict_flood_ratio`` (the hostile messages
  alone: what a flood of invalid messages lets through); ``mix_valid_rate`` is the valid examples
  per second in the mix.

Everything is produced before either consumer starts, with one key (so one partition, in order),
and the raw consumers run before the worker: each reads alone, and their rates are measured, not
the producer's. A part's rate is taken between the consumer's observations enclosing it.

Ratios, not absolute times, are the result: the machine is shared and noisy.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import secrets
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import numpy as np
import pydantic_core
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from privstream.stream_app.embedded.broker import EmbeddedBroker, free_listener_ports, on_embedded_broker
from privstream.stream_app.embedded.demo import WorkerProcess, fetch_json
from privstream.stream_app.kafka.clients import client_options, ensure_topics
from privstream.stream_app.settings import Settings, StreamConfig
from privstream.stream_app.sources.synthetic import hostile_messages

STREAM = "bench"
CLASS = "thresholds:4294967296"


def _examples(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    xs = rng.integers(0, 2**32, n)
    return xs, (xs >= 2**31).astype(np.uint8)


def _singles(n: int, seed: int) -> list[bytes]:
    """``n`` single-example messages of the bench stream."""
    xs, ys = _examples(n, seed)
    return [
        json.dumps({"stream_id": STREAM, "x": x, "y": y}).encode()
        for x, y in zip(xs.tolist(), ys.tolist(), strict=True)
    ]


async def _produce(settings: Settings, payloads: list[bytes]) -> list[Any]:
    producer = AIOKafkaProducer(**client_options(settings), linger_ms=5, max_batch_size=1 << 20)
    await producer.start()
    try:
        futures = [await producer.send(settings.topic("examples"), p, key=STREAM.encode()) for p in payloads]
        return list(await asyncio.gather(*futures))
    finally:
        await producer.stop()


def _stdlib_parse(value: bytes) -> None:
    # Not contextlib.suppress: a context per message would lower the ceiling.
    try:  # noqa: SIM105
        json.loads(value)
    except (ValueError, RecursionError):  # a hostile message: trying to parse it is the work
        pass


def _service_parse(value: bytes) -> None:
    try:  # noqa: SIM105
        pydantic_core.from_json(value)
    except ValueError:
        pass


async def raw_consume(
    settings: Settings, n: int, parse: Callable[[bytes], None] = _stdlib_parse
) -> list[tuple[float, int]]:
    """A bare aiokafka consumer reading ``n`` messages from the start of the examples topic, parsing
    each with ``parse``: (time, messages read) when the first batch arrived and after each batch."""
    consumer = AIOKafkaConsumer(
        settings.topic("examples"),
        **client_options(settings),
        group_id=f"raw-{uuid.uuid4().hex}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=8 << 20,
        fetch_max_bytes=64 << 20,
    )
    await consumer.start()
    try:
        seen = 0
        samples: list[tuple[float, int]] = []
        while seen < n:
            # Batches of 2,000: observations fine enough to measure parts of 10,000 messages or more.
            batch = await consumer.getmany(timeout_ms=1000, max_records=2000)
            if not samples and batch:
                samples.append((time.perf_counter(), 0))  # the group is joined: the clock starts
            for messages in batch.values():
                for message in messages[: n - seen]:  # what follows the n messages is not timed
                    parse(message.value)
                seen += min(len(messages), n - seen)
            if batch:
                samples.append((time.perf_counter(), seen))
        return samples
    finally:
        await consumer.stop()


def _mixed(valid: list[bytes], invalid: list[bytes], ratio: float) -> list[bytes]:
    """``valid`` with ``invalid`` spread evenly among them, ``ratio`` invalid per valid message."""
    out: list[bytes] = []
    used = 0
    for i, message in enumerate(valid):
        out.append(message)
        due = min(len(invalid), int((i + 1) * ratio))
        out += invalid[used:due]
        used = due
    return out + invalid[used:]


class Observation(NamedTuple):
    """The worker's counts at one time."""

    time: float
    learned: int  # valid examples learned
    invalid: int  # invalid messages
    handled: int  # messages, valid or not


def _observe(worker: WorkerProcess, learned: int, invalid: int, timeout: float) -> list[Observation]:
    """The worker's counts every 20 ms, until it has learned ``learned`` examples and rejected
    ``invalid`` messages. Only ``/status`` is asked: little work for the worker."""
    samples: list[Observation] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = fetch_json(f"{worker.operator_url}/status")
        if status is not None:  # once it answers
            samples.append(
                Observation(
                    time.perf_counter(),
                    status["streams"][STREAM]["examples"],
                    status["invalid"],
                    status["handled"],
                )
            )
            if samples[-1].learned >= learned and samples[-1].invalid >= invalid:
                return samples
        time.sleep(0.02)
    raise TimeoutError(
        f"the worker saw fewer than {learned} valid examples and {invalid} invalid "
        f"messages in {timeout:.0f} s"
    )


def _rate(samples: list[tuple[float, int]], begin: int, end: int) -> float:
    """Per second while a count climbed from ``begin`` to ``end``, from (time, count) samples: from the
    first sample past ``begin`` to the first at or past ``end``. The raw consumers and the worker are
    timed alike: from the end of their first batch of the part (what came before it, a group join or
    a fetch that waited, is excluded for both)."""
    t0, c0 = next((t, c) for t, c in samples if c > begin)
    t1, c1 = next((t, c) for t, c in samples if c >= end)
    if t1 <= t0:
        raise RuntimeError(
            "too few messages to measure a rate: they were read between two observations; use more --examples"
        )
    return (c1 - c0) / (t1 - t0)


def _receive_predictions(settings: Settings, ready: Any, stop: Any, highest: Any, out: Any) -> None:
    """A process of its own that reads the predictions topic from its end and sends back, for each
    example predicted, (partition, offset) and when its prediction arrived (Unix time); ``highest``
    tells the highest source offset predicted so far (the examples are on one partition)."""

    async def receive() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        consumer = AIOKafkaConsumer(
            **client_options(settings),
            enable_auto_commit=False,
            fetch_max_wait_ms=settings.kafka_fetch_max_wait_ms,  # as the worker's: see the settings
            max_partition_fetch_bytes=8 << 20,
        )
        await consumer.start()
        topic = settings.topic("predictions")
        await consumer.topics()
        consumer.assign([TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()])
        await consumer.seek_to_end()
        for tp in consumer.assignment():
            await consumer.position(tp)
        ready.set()
        partitions: list[np.ndarray] = []
        offsets: list[np.ndarray] = []
        times: list[np.ndarray] = []
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=100)
                now = time.time()
                for messages in batch.values():
                    for message in messages:
                        prediction = msgspec.json.decode(message.value)
                        got = np.asarray(prediction["source_offsets"], dtype=np.int64)
                        offsets.append(got)
                        partitions.append(np.full(len(got), prediction["source_partition"], np.int64))
                        times.append(np.full(len(got), now))
                        if len(got):
                            highest.value = max(highest.value, int(got.max()))
        finally:
            await consumer.stop()
        if not offsets:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        return np.concatenate(partitions), np.concatenate(offsets), np.concatenate(times)

    out.send(asyncio.run(receive()))


class Latency(NamedTuple):
    """Produce→prediction latencies at one rate."""

    rate: float  # examples per second sent
    seconds: np.ndarray  # each received example's latency
    missing: int  # examples sent whose prediction did not arrive

    def figures(self) -> dict[str, Any]:
        lat = self.seconds if len(self.seconds) else np.array([float("nan")])
        return {
            "rate": self.rate,
            "p50_seconds": float(np.percentile(lat, 50)),
            "p99_seconds": float(np.percentile(lat, 99)),
            "samples": len(self.seconds),
            "missing": self.missing,
        }


async def _send_at_rate(settings: Settings, rate: float, seconds: float) -> dict[tuple[int, int], float]:
    """Single-example messages at ``rate`` per second for ``seconds``, as one record batch every 10 ms
    (cheap for the sender, so that it keeps the rate); (partition, offset) -> when it was sent."""
    n = int(rate * seconds)
    xs, ys = _examples(n, seed=7)
    producer = AIOKafkaProducer(**client_options(settings), linger_ms=0, max_batch_size=1 << 20)
    await producer.start()
    try:
        topic = settings.topic("examples")
        partitions = sorted(await producer.partitions_for(topic))
        key = STREAM.encode()
        partition = DefaultPartitioner()(key, partitions, partitions)
        step, t0 = 0.01, time.perf_counter()
        per_step = max(1, int(rate * step))
        pending: list[tuple[float, int, asyncio.Future[Any]]] = []
        for i in range(0, n, per_step):
            count = min(n, i + per_step) - i
            batch = producer.create_batch()
            for j in range(i, i + count):
                payload = b'{"stream_id":"%s","x":%d,"y":%d}' % (key, xs[j], ys[j])
                batch.append(key=key, value=payload, timestamp=None)
            pending.append((time.time(), count, await producer.send_batch(batch, topic, partition=partition)))
            await asyncio.sleep(max(0.0, t0 + (i // per_step + 1) * step - time.perf_counter()))
        sent: dict[tuple[int, int], float] = {}
        for stamp, count, future in pending:
            meta = await future
            for k in range(count):
                sent[(meta.partition, meta.offset + k)] = stamp
        return sent
    finally:
        await producer.stop()


def _latency(settings: Settings, rate: float, seconds: float) -> Latency:
    """Produce→prediction latencies of examples sent at ``rate`` per second for ``seconds``; the
    predictions are read by a process of its own, so that sending never delays their reading."""
    context = multiprocessing.get_context("spawn")
    ready, stop, highest = context.Event(), context.Event(), context.Value("q", -1)
    receiving, out = context.Pipe(duplex=False)
    receiver = context.Process(
        target=_receive_predictions, args=(settings, ready, stop, highest, out), daemon=True
    )
    receiver.start()
    try:
        if not ready.wait(60):
            raise RuntimeError("the predictions reader did not start")
        sent = asyncio.run(_send_at_rate(settings, rate, seconds))
        # Bounded: what has not arrived 30 s after the last send is reported as missing.
        deadline = time.monotonic() + 30
        last = max((offset for _, offset in sent), default=-1)
        while highest.value < last and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        if not receiving.poll(30):
            raise RuntimeError("the predictions reader did not answer")
        partitions, offsets, times = receiving.recv()
    finally:
        stop.set()
        receiver.join(10)
        if receiver.is_alive():
            receiver.kill()
    received = dict(zip(zip(partitions.tolist(), offsets.tolist(), strict=True), times.tolist(), strict=True))
    latencies = np.array([received[k] - t for k, t in sent.items() if k in received])
    return Latency(rate, latencies, len(sent) - len(latencies))


def run_ingest_benchmark(
    n: int = 100_000,
    batch_size: int = 1000,
    latency_seconds: float = 10.0,
    settings: Settings | None = None,
    log: Any = sys.stderr,
    invalid_ratio: float = 0.0,
) -> dict[str, Any]:
    """Run the measurements described in the module docstring; returns the JSON-able result."""
    if invalid_ratio < 0:
        raise ValueError(f"invalid_ratio must be >= 0, got {invalid_ratio}")
    settings = settings or Settings()
    run = secrets.token_hex(4)
    mixed_invalid = round(invalid_ratio * n)  # hostile messages in the mix
    alone = n if invalid_ratio > 0 else 0  # hostile messages alone, after the mix
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="privstream-bench-")))
        if settings.kafka_bootstrap is None:
            broker = stack.enter_context(EmbeddedBroker(log_path=workdir / "broker.log"))
            settings = on_embedded_broker(settings, broker)
        settings = settings.model_copy(
            update={
                "app_id": f"privstream-bench-{run}",
                "topic_prefix": f"bench-{run}.",
                "topic_partitions": 4,
                **free_listener_ports(),
                "data_dir": workdir / "data",
                "streams": [StreamConfig(name=STREAM, hypothesis_class=CLASS)],
            }
        )
        asyncio.run(ensure_topics(settings))
        messages = _singles(n, seed=1)
        if invalid_ratio > 0:
            hostile = hostile_messages(mixed_invalid + alone, STREAM, 2**32, seed=4)
            messages += _mixed(_singles(n, seed=3), hostile[:mixed_invalid], invalid_ratio)
            messages += hostile[mixed_invalid:]
            print(
                f"bench: producing {n} single-example messages, then {n} mixed with {mixed_invalid} "
                f"hostile ones, then {alone} hostile ones alone",
                file=log,
            )
        else:
            print(f"bench: producing {n} single-example messages", file=log)
        bx, by = _examples(n, seed=2)
        batches = [
            json.dumps(
                {
                    "stream_id": STREAM,
                    "xs": bx[i : i + batch_size].tolist(),
                    "ys": by[i : i + batch_size].tolist(),
                }
            ).encode()
            for i in range(0, n, batch_size)
        ]
        print(f"bench: then {len(batches)} ExampleBatch messages of {batch_size} examples", file=log)
        asyncio.run(_produce(settings, messages + batches))
        # The parts, as ranges of the topic's messages (one partition, in order).
        clean, mix, flood = (0, n), (n, 2 * n + mixed_invalid), (2 * n + mixed_invalid, len(messages))
        print("bench: raw aiokafka consumers (json.loads, then the service's parser)", file=log)
        raw = asyncio.run(raw_consume(settings, len(messages), _stdlib_parse))
        strict = asyncio.run(raw_consume(settings, len(messages), _service_parse))
        raw_rate, strict_rate = _rate(raw, *clean), _rate(strict, *clean)
        print(f"bench: raw {raw_rate:,.0f} msg/s, strict {strict_rate:,.0f} msg/s", file=log)
        print("bench: starting a worker", file=log)
        worker = WorkerProcess(settings, workdir / "worker.log").start()
        stack.callback(worker.stop)
        valid = 2 * n if invalid_ratio > 0 else n  # single examples
        samples = _observe(worker, valid + n, mixed_invalid + alone, timeout=600)
        handled = [(s.time, s.handled) for s in samples]  # messages, valid or not
        service_rate = _rate(handled, *clean)
        print(f"bench: service {service_rate:,.0f} examples/s", file=log)
        flood_figures: dict[str, Any] = {}
        if invalid_ratio > 0:
            learned = [(s.time, s.learned) for s in samples]
            flood_figures = {"invalid_ratio": invalid_ratio, "mix_valid_rate": _rate(learned, n, 2 * n)}
            for part, where in (("mix", mix), ("flood", flood)):
                rate, raw_part = _rate(handled, *where), _rate(raw, *where)
                strict_part = _rate(strict, *where)
                flood_figures.update(
                    {
                        f"{part}_rate": rate,
                        f"raw_{part}_rate": raw_part,
                        f"{part}_ratio": rate / raw_part,
                        f"strict_raw_{part}_rate": strict_part,
                        f"strict_{part}_ratio": rate / strict_part,
                    }
                )
                print(
                    f"bench: {part} {rate:,.0f} msg/s (raw {raw_part:,.0f}, strict {strict_part:,.0f})",
                    file=log,
                )
        # Examples per second of the batches: from the last observation before they began to the
        # first with all of them learned.
        t0 = next(s.time for s in reversed(samples) if s.handled <= len(messages))
        t1 = next(s.time for s in samples if s.learned >= valid + n)
        batch_rate = n / (t1 - t0)
        print(f"bench: batched {batch_rate:,.0f} examples/s; latency at half the service rate", file=log)
        # Quiet first (a tenth of the capacity just measured), then busy (half of it).
        quiet = _latency(settings, service_rate / 10, latency_seconds)
        busy = _latency(settings, service_rate / 2, latency_seconds)
        print(
            "bench: p99 latency {:.0f} ms at 10% of the capacity, {:.0f} ms at 50%".format(
                1000 * quiet.figures()["p99_seconds"], 1000 * busy.figures()["p99_seconds"]
            ),
            file=log,
        )
        status = fetch_json(f"{worker.operator_url}/status") or {}
        exit_status = worker.stop()
        if exit_status != 0:
            print(
                "bench: the worker failed; the end of its log:\n"
                + (workdir / "worker.log").read_text()[-4000:],
                file=log,
            )
    return {
        "raw_rate": raw_rate,
        "service_rate": service_rate,
        "ratio": service_rate / raw_rate,
        "strict_raw_rate": strict_rate,
        "strict_ratio": service_rate / strict_rate,
        "batch_rate": batch_rate,
        "batch_ratio": batch_rate / raw_rate,
        **flood_figures,
        "latency_at_10_percent": quiet.figures(),
        "latency_at_50_percent": busy.figures(),
        # the figures at 50%, as earlier versions reported them
        "p50_latency_seconds": busy.figures()["p50_seconds"],
        "p99_latency_seconds": busy.figures()["p99_seconds"],
        "latency_samples": len(busy.seconds),
        "latency_missing": busy.missing,
        "latency_rate": busy.rate,
        "examples": n,
        "batch_size": batch_size,
        "worker_exit_status": exit_status,
        "invalid": status.get("invalid"),
        "invalid_by_reason": status.get("invalid_by_reason"),
    }
