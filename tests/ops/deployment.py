"""A live deployment for the ops tier: the embedded broker, a worker, and a producer running the
demo's workload (``privstream demo``: a realizable ``thresholds:65536`` stream with private
releases of 2,000-example windows at ε = 1, and a few malformed messages).

One deployment serves the whole tier (a worker's start and group join take 5-30 s here). A test
may kill the worker; the next test that needs it calls :meth:`LiveDeployment.running`, which
starts it again on the same ledger and state.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import numpy as np
from aiokafka import AIOKafkaProducer

from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.stream_app.embedded.broker import free_listener_ports
from privstream.stream_app.embedded.demo import DEMO_STREAM, WorkerProcess, fetch_json
from privstream.stream_app.kafka.clients import client_options, ensure_topics
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.sources.synthetic import malformed_messages, random_target, synthetic_examples
from tests.integration.conftest import run, start_worker, wait_until

CLASS = "thresholds:65536"
VECTOR_STREAM = "vectors"
WINDOW = 2000
EPSILON = 1.0
#: The demo's budget is 10 (its 20,000 examples spend it); the tier releases about 20 windows.
EPSILON_BUDGET = 50.0
#: One malformed message per this many examples, cycling through the dead-letter reasons.
INVALID_EVERY = 100
#: The operator listener's bearer token (a test value; deployments take theirs from a secret).
OPERATOR_TOKEN = "ops-tier-" + uuid.uuid4().hex


class LiveDeployment:
    def __init__(self, bootstrap: str, workdir: Path):
        run_id = uuid.uuid4().hex[:10]
        self.workdir = workdir
        self.settings = Settings(
            app_id=f"privstream-ops-{run_id}",
            topic_prefix=f"ops-{run_id}.",
            kafka_bootstrap=bootstrap,
            **free_listener_ports(),
            # Prometheus scrapes the operator listener with this bearer token, as deployed.
            operator_token=OPERATOR_TOKEN,
            data_dir=workdir / "data",
            topic_partitions=2,
            kafka_session_timeout_seconds=6,  # a group join on the embedded broker waits half of it
            kafka_heartbeat_interval_seconds=2,
            ledger_create_if_missing=True,
            log_format="json",
            streams=[
                StreamConfig(
                    name=DEMO_STREAM,
                    hypothesis_class=CLASS,
                    release=ReleaseConfig(
                        window=WindowConfig(size=WINDOW), epsilon=EPSILON, epsilon_budget=EPSILON_BUDGET
                    ),
                ),
                # A stream of feature vectors, online only: the dashboard's vector panels have data.
                StreamConfig(name=VECTOR_STREAM, features=2, feature_bounds=[(0.0, 1.0), (0.0, 1.0)]),
            ],
            _env_file=None,
        )
        self.target = random_target(parse_class_spec(CLASS), np.random.default_rng(19))
        self.sent_examples = 0
        self.worker: WorkerProcess | None = None
        run(ensure_topics(self.settings))

    @property
    def stream(self) -> str:
        return DEMO_STREAM

    @property
    def operator_address(self) -> str:
        """``host:port`` of the operator listener (what Prometheus scrapes, with the token)."""
        return f"{self.settings.operator_host}:{self.settings.operator_port}"

    @property
    def operator_url(self) -> str:
        return f"http://{self.operator_address}"

    @property
    def public_url(self) -> str:
        """The public listener: the releases' JSON and the page for people."""
        return f"http://{self.settings.public_host}:{self.settings.public_port}"

    @property
    def log_path(self) -> Path:
        """The worker's standard error: JSON log lines (``log_format = "json"``)."""
        return self.workdir / f"worker-{self.settings.public_port}.log"

    def running(self) -> LiveDeployment:
        """Start the worker if it is not running, and wait until it owns the examples' partitions.

        Call it from the main thread, not from a thread pool: the worker dies with the thread that
        started it (``PR_SET_PDEATHSIG``), and a pool's threads end with their event loop.
        """
        if self.worker is None or not self.worker.alive():
            self.worker = start_worker(self.settings, self.workdir)  # appends to the same log
        wait_until(self._ready, 90, what="the worker to own the examples' partitions (/readyz)")
        return self

    def _ready(self) -> bool:
        answer = fetch_json(f"{self.operator_url}/readyz")  # a probe: open without the token
        return answer is not None and answer.get("status") == "ready"

    def kill_worker(self) -> None:
        """SIGKILL: no goodbye to Prometheus or Kafka, as when a node dies."""
        assert self.worker is not None and self.worker.process is not None
        self.worker.process.kill()
        self.worker.process.wait(10)
        self.worker = None

    def load(self, examples: int, rate: float = 1000.0) -> None:
        """Send ``examples`` examples of the demo's target at about ``rate`` per second, with one
        malformed message per :data:`INVALID_EVERY` examples."""
        run(self._load(examples, rate))

    async def _load(self, examples: int, rate: float) -> None:
        producer = AIOKafkaProducer(**client_options(self.settings), linger_ms=5, acks="all")
        await producer.start()
        topic, key = self.settings.topic("examples"), self.stream.encode()
        chunk = max(1, int(rate / 4))  # four sends a second
        try:
            started, sent = time.monotonic(), 0
            while sent < examples:
                n = min(chunk, examples - sent)
                batch = synthetic_examples(CLASS, n, target=self.target)
                payload = [json.dumps(m).encode() for m in batch.messages(self.stream)]
                payload += malformed_messages(
                    (self.sent_examples + n) // INVALID_EVERY - self.sent_examples // INVALID_EVERY,
                    self.stream,
                )
                points = np.random.default_rng(self.sent_examples).random((max(1, n // 10), 2))
                vectors = {
                    "stream_id": VECTOR_STREAM,
                    "xs": points.tolist(),
                    "ys": (points.sum(1) > 1).tolist(),
                }
                payload.append(json.dumps(vectors).encode())
                await asyncio.gather(*[await producer.send(topic, value, key=key) for value in payload])
                sent += n
                self.sent_examples += n
                await asyncio.sleep(max(0.0, started + sent / rate - time.monotonic()))
        finally:
            await producer.stop()

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None
