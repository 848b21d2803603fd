"""Load on a live worker (embedded broker): 80% of its sustained rate for a while, memory bounded.

The sustained rate is measured first, in the same test, as the rate at which a backlog is
produced and handled (a lower bound of the worker's rate: the test's producer may be the slower of
the two); then examples are produced at 80% of it for ``seconds`` while the worker's resident
memory (``VmRSS`` of ``/proc/<pid>/status``: the worker's, not the broker's -- the embedded broker
keeps every message in memory and grows) and ``/healthz`` are sampled twice a second. Asserted:
no error (no invalid message, no error line in the worker's log, healthy at every sample), every
example predicted (the predictions cover every source offset), and the worker's memory bounded
(its growth after warm-up stays under a generous cap). Figures are printed as one JSON line.

The short version runs in CI; the 10-minute one is ``slow`` (``pytest -m slow``;
``PRIVSTREAM_LOAD_SECONDS`` overrides its duration).

The helpers here (``produce_at_rate``, ``MemorySampler``, ``predicted_offsets``) are shared by
``test_faults.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from aiokafka import AIOKafkaProducer

from privstream.stream_app.embedded.demo import WorkerProcess, fetch_json
from privstream.stream_app.kafka.clients import client_options, ensure_topics, produce_json
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig

from .conftest import consume_all, prediction_count, run, start_worker, wait_until

pytestmark = pytest.mark.live

DOMAIN = 2**32
CLASS = f"thresholds:{DOMAIN}"
STREAMS = ("load-a", "load-b")  # two keys: both partitions of the topic carry load
MEMORY_GROWTH_CAP_MIB = 150  # after warm-up; a leak of a few hundred bytes per example exceeds it


def payloads(n: int, seed: int) -> list[tuple[str, bytes]]:
    """``n`` single-example messages (key, JSON) of a realizable threshold stream, alternating keys."""
    rng = np.random.default_rng(seed)
    xs = rng.integers(0, DOMAIN, n).tolist()
    return [
        (STREAMS[i % 2], b'{"stream_id":"%s","x":%d,"y":%d}' % (STREAMS[i % 2].encode(), x, x >= 2**31))
        for i, x in enumerate(xs)
    ]


def load_settings(settings: Settings, window: int = 20_000) -> Settings:
    """Two streams with private releases (so windows, the ledger and learners are on the path)."""
    release = ReleaseConfig(window=WindowConfig(size=window), epsilon=0.1, epsilon_budget=1000.0)
    return settings.model_copy(
        update={
            "streams": [StreamConfig(name=s, hypothesis_class=CLASS, release=release) for s in STREAMS],
            "ledger_create_if_missing": True,
        }
    )


def rss_mib(pid: int) -> float:
    """Resident memory of a process, MiB, from ``/proc/<pid>/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def handled(worker: WorkerProcess) -> int:
    status = fetch_json(f"{worker.operator_url}/status")
    return -1 if status is None else status["handled"]


def healthz(worker: WorkerProcess) -> int:
    try:
        return urllib.request.urlopen(f"{worker.operator_url}/healthz", timeout=5).status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0  # not answering


@dataclass
class MemorySampler:
    """Samples a worker's RSS, /healthz and handled count in a thread, every ``interval`` s."""

    worker: WorkerProcess
    interval: float = 0.5
    samples: list[tuple[float, float, int, int]] = field(default_factory=list)  # (t, MiB, health, handled)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> MemorySampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        pid = self.worker.process.pid
        while not self._stop.wait(self.interval):
            try:
                mib = rss_mib(pid)
            except (FileNotFoundError, AssertionError):
                mib = float("nan")
            sample = (time.monotonic() - self._t0, mib, healthz(self.worker), handled(self.worker))
            self.samples.append(sample)

    def summary(self) -> dict[str, object]:
        mib = [s[1] for s in self.samples]
        quarter = max(1, len(mib) // 4)
        return {
            "rss_mib_first": mib[0],
            "rss_mib_after_warmup": max(mib[:quarter]),
            "rss_mib_peak": max(mib),
            "rss_mib_last": mib[-1],
            "samples": len(mib),
            "rss_mib_series": [round(m, 1) for m in mib[:: max(1, len(mib) // 40)]],
        }


async def produce_at_rate(
    settings: Settings,
    messages: list[tuple[str, bytes]],
    rate: float,
    seconds: float | None = None,
    tick: float = 0.05,
) -> tuple[float, list[tuple[int, int]]]:
    """Send ``messages`` at ``rate`` per second (in ticks), for at most ``seconds``; returns the
    achieved rate and each sent message's (partition, offset).

    On 2 cores the producer competes with the worker and the broker: when it falls behind the
    target, it sends as fast as it can and stops at ``seconds`` (the achieved rate says so)."""
    producer = AIOKafkaProducer(**client_options(settings), linger_ms=5, acks="all", max_batch_size=1 << 20)
    await producer.start()
    topic = settings.topic("examples")
    futures = []
    try:
        t0, sent = time.perf_counter(), 0
        while sent < len(messages) and (seconds is None or time.perf_counter() - t0 < seconds):
            due = min(len(messages), int((time.perf_counter() - t0 + tick) * rate))
            for key, value in messages[sent:due]:
                futures.append(await producer.send(topic, value, key=key.encode()))
            sent = max(sent, due)
            await asyncio.sleep(max(0.0, t0 + sent / rate - time.perf_counter()))
        achieved = sent / (time.perf_counter() - t0)
        metadata = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return achieved, [(m.partition, m.offset) for m in metadata]


def predicted_offsets(settings: Settings, expected: int, timeout: float = 120.0) -> list[tuple[int, int]]:
    """Every (partition, offset) the predictions topic covers, with repeats (at-least-once)."""
    records = run(
        consume_all(
            settings, settings.topic("predictions"), expected, timeout=timeout, weight=prediction_count
        )
    )
    seen = []
    for record in records:
        prediction = json.loads(record.value)
        seen += [(prediction["source_partition"], o) for o in prediction["source_offsets"]]
    return seen


def sustained_rate(settings: Settings, worker: WorkerProcess, n: int) -> float:
    """Examples per second the (started, ready) worker sustains, at least: a backlog of ``n``
    examples produced and handled, timed from its first send to its last example handled. The worker
    learns while the backlog is still being produced, so when it is faster than this test's producer
    the figure is the producer's rate; 80% of it is below the worker's capacity either way."""
    before = handled(worker)
    started = time.perf_counter()
    run(produce_json(settings, settings.topic("examples"), payloads(n, seed=1)))
    wait_until(lambda: handled(worker) - before >= n, 120, interval=0.01, what="the backlog handled")
    return n / (time.perf_counter() - started)


def error_lines(log_path: Path) -> list[str]:
    return [
        line
        for line in log_path.read_text(errors="replace").splitlines()
        if "Traceback" in line or " ERROR" in line or "[ERROR]" in line or "CRITICAL" in line
    ]


def run_load(settings: Settings, tmp_path: Path, seconds: float) -> dict[str, object]:
    settings = load_settings(settings)
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    try:
        wait_until(
            lambda: fetch_json(f"{worker.operator_url}/readyz") == {"status": "ready", "reason": "ok"},
            120,
            what="worker ready",
        )
        backlog = 20_000
        rate = sustained_rate(settings, worker, backlog)
        target = 0.8 * rate
        messages = payloads(int(target * seconds), seed=2)
        with MemorySampler(worker) as sampler:
            achieved, positions = run(produce_at_rate(settings, messages, target, seconds))
            total = backlog + len(positions)
            wait_until(lambda: handled(worker) >= total, 120, what="every example handled")
        seen = predicted_offsets(settings, total)
        status = fetch_json(f"{worker.operator_url}/status")
        memory = sampler.summary()
        health = {s[2] for s in sampler.samples}
    finally:
        exit_status = worker.stop()
    figures = {
        "sustained_rate": round(rate),
        "target_rate": round(target),
        "achieved_rate": round(achieved),
        "seconds": seconds,
        "examples": total,
        "predicted": len(seen),
        "health_codes": sorted(health),
        **memory,
    }
    print(json.dumps({"test_load": figures}))
    assert exit_status == 0
    assert status["invalid"] == 0 and status["handled"] == total
    assert error_lines(worker.log_path) == []
    assert health == {200}, figures
    assert set(positions) <= set(seen), "an example without a prediction"
    assert memory["rss_mib_peak"] - memory["rss_mib_after_warmup"] < MEMORY_GROWTH_CAP_MIB, figures
    return figures


def test_load_at_80_percent_of_the_sustained_rate_short(unique_settings, tmp_path):
    run_load(unique_settings, tmp_path, seconds=25.0)


@pytest.mark.slow
def test_load_at_80_percent_of_the_sustained_rate_10_minutes(unique_settings, tmp_path):
    run_load(unique_settings, tmp_path, seconds=float(os.environ.get("PRIVSTREAM_LOAD_SECONDS", "600")))


def hostile_messages(n: int, seed: int) -> list[tuple[str, bytes]]:
    """``n`` invalid messages of every kind (two of them over 1 MB, more than a dead letter holds)
    and their keys."""
    rng = np.random.default_rng(seed)
    kinds = [
        lambda i: bytes(rng.integers(0, 256, int(rng.integers(1, 60)), dtype=np.uint8)),  # random bytes
        lambda i: b'{"stream_id": "load-a", "x": NaN, "y": 1}',
        lambda i: b'{"stream_id": "load-a", "x": Infinity, "y": 1}',
        lambda i: b'{"stream_id": "load-a", "x": 1' + b"0" * 400 + b', "y": 1}',  # huge number
        lambda i: b"[" * 2000 + b"]" * 2000,  # deep
        lambda i: b'{"stream_id": "load-a", "x": "%d", "y": 1}' % i,  # wrong type
        lambda i: b'{"stream_id": "load-a", "x": %d, "y": 7}' % i,  # bad label
        lambda i: b'{"stream_id": "load-a", "x": %d, "y": 1}' % (DOMAIN + i),  # out of domain
        lambda i: '{"stream_id": "\u00e9t\u00e9-\U0001f600", "x": 1, "y": 1}'.encode(),  # unicode, unknown
        lambda i: b'{"x": 1, "y": 1}',  # missing field
    ]
    messages = [(STREAMS[i % 2], kinds[i % len(kinds)](i)) for i in range(n)]
    big = b'{"stream_id": "load-a", "x": "' + b"p" * 1_100_000 + b'", "y": 1}'  # a wrong type, 1.1 MB
    messages[n // 3] = messages[2 * n // 3] = (STREAMS[0], big)
    return messages


def learned(worker: WorkerProcess) -> int:
    """Valid examples learned by the worker (every stream)."""
    status = fetch_json(f"{worker.operator_url}/status")
    return -1 if status is None else sum(s["examples"] for s in status["streams"].values())


async def produce_big(settings: Settings, messages: list[tuple[str, bytes]]) -> None:
    producer = AIOKafkaProducer(**client_options(settings), linger_ms=5, acks="all", max_request_size=4 << 20)
    await producer.start()
    try:
        futures = [await producer.send(settings.topic("examples"), v, key=k.encode()) for k, v in messages]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def test_a_flood_of_invalid_messages_neither_crashes_nor_stalls_the_worker(unique_settings, tmp_path):
    """Valid examples alone, then the same number mixed 1:1 with hostile ones: every hostile one
    lands in the DLQ with a bounded reason, and the valid rate holds (a loose bound, reported)."""
    from privstream.agents.pipeline import MAX_DEAD_LETTER_VALUE_BYTES
    from privstream.agents.validation import INVALID_REASONS

    settings = unique_settings.model_copy(
        update={"streams": [StreamConfig(name=s, hypothesis_class=CLASS) for s in STREAMS]}
    )
    run(ensure_topics(settings))
    n = 20_000
    # One key, so one partition, in order: n valid examples, then n valid mixed 1:1 with n hostile.
    # All produced before the worker starts, so its rates are measured, not the producer's.
    valid = [("load-a", v.replace(b'"load-b"', b'"load-a"')) for _, v in payloads(2 * n, seed=3)]
    hostile = [("load-a", v) for _, v in hostile_messages(n, seed=4)]
    mixed = valid[:n] + [m for pair in zip(valid[n:], hostile, strict=True) for m in pair]
    run(produce_big(settings, mixed))
    worker = start_worker(settings, tmp_path, wait_ready=False)  # its rate from the first example
    try:
        samples: list[tuple[float, int]] = []
        with MemorySampler(worker, interval=0.5) as sampler:
            deadline = time.monotonic() + 120
            while (not samples or samples[-1][1] < 2 * n) and time.monotonic() < deadline:
                samples.append((time.perf_counter(), learned(worker)))
                time.sleep(0.02)
            wait_until(
                lambda: (fetch_json(f"{worker.operator_url}/status") or {}).get("invalid") == n,
                60,
                what="every hostile message counted",
            )
        dead = run(consume_all(settings, settings.topic("examples.dlq"), n))
        status = fetch_json(f"{worker.operator_url}/status")
    finally:
        exit_status = worker.stop()

    def at(count: int) -> tuple[float, int]:  # the first sample at or past ``count``
        return next(s for s in samples if s[1] >= count)

    began = max((s for s in samples if s[1] <= 0), key=lambda s: s[0])
    (t1, c1), (t2, c2) = at(n), at(2 * n)
    clean_rate = (c1 - began[1]) / (t1 - began[0])
    flood_rate = (c2 - c1) / (t2 - t1)
    figures = {
        "valid_rate_clean": round(clean_rate),
        "valid_rate_in_flood": round(flood_rate),
        "ratio": round(flood_rate / clean_rate, 3),
        "invalid": status["invalid"],
        "invalid_by_reason": status["invalid_by_reason"],
        "rss_mib_peak": sampler.summary()["rss_mib_peak"],
    }
    print(json.dumps({"test_flood": figures}))
    assert exit_status == 0
    assert len(dead) == n  # each hostile message dead-lettered once
    reasons = [dict(record.headers)["error.reason"].decode() for record in dead]
    assert set(reasons) <= set(INVALID_REASONS)
    # The oversized ones: dead-lettered, cut to the limit (regression: they crashed the consumer).
    assert sum(len(record.value) == MAX_DEAD_LETTER_VALUE_BYTES for record in dead) == 2
    assert status["streams"][STREAMS[0]]["examples"] + status["streams"][STREAMS[1]]["examples"] == 2 * n
    health = [s[2] for s in sampler.samples]  # 0 while the listener is not up yet
    assert 200 in health and set(health[health.index(200) :]) == {200}  # never unhealthy once up
    # Loose, against a stall only: half the messages are hostile, so even at equal cost per message
    # the ratio would be ~0.5; measured 0.16-0.19 (2026-11-24, when a rejected message took
    # pydantic's full path: ~12-20 µs vs 2.6 µs for a valid one), 0.23-0.31 (2026-11-25, load ~7
    # on 2 cores) with invalid messages classified without pydantic (1-3 µs) and their dead letters
    # sent as one record batch per partition. What remains is mostly bytes: a hostile message here
    # averages ~475 bytes (two over 1 MB aside) against ~43 for a valid one, read once and written
    # again to the DLQ.
    # A figure for the hot path's tuning, not a crash or a stall.
    assert flood_rate > 0.05 * clean_rate, figures
