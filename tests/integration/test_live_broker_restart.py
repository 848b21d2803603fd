"""The embedded broker restarted (memory only: its topics start again at offset 0) under a worker.

Day 1 releases window 0; the worker and the broker stop; day 2 starts both again and sends as
many examples: they are stored and released (windows L0-1 and L1-0), after day 1's, with one
WARNING line and the replacement counted. Then the broker restarts under the running worker and
day 3's examples are released too (L0-2). A worker told to refuse stops with one line instead.
Before log marks, the new log's examples were below the state store's positions and dropped:
0 stored, 0 releases, no warning.
"""

from __future__ import annotations

import subprocess
import urllib.request
import uuid
from pathlib import Path

import pytest

from privstream.stream_app.embedded.broker import EmbeddedBroker, free_listener_ports, free_port
from privstream.stream_app.embedded.demo import WorkerProcess, fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.signing import shared_key_file
from privstream.stream_app.sources.synthetic import synthetic_examples
from privstream.stream_app.store.factory import open_ledger
from privstream.stream_app.store.sqlite_streams import SqliteStreamStores

from .conftest import run, start_worker, wait_until

pytestmark = [pytest.mark.live, pytest.mark.slow]

CLASS = "thresholds:4096"
WINDOW = 200


def examples(n: int, seed: int) -> list:
    return [("s", m) for m in synthetic_examples(CLASS, n, seed=seed).messages("s")]


def deployment(tmp_path: Path, port: int) -> Settings:
    stream = StreamConfig(
        name="s",
        hypothesis_class=CLASS,
        release=ReleaseConfig(window=WindowConfig(size=WINDOW), epsilon=1.0, epsilon_budget=2.0, top_level=1),
    )
    run_id = uuid.uuid4().hex[:10]
    return Settings(
        app_id=f"privstream-it-{run_id}",
        topic_prefix=f"it-{run_id}.",
        kafka_bootstrap=f"127.0.0.1:{port}",
        data_dir=tmp_path / "data",
        signing_key_file=shared_key_file(tmp_path / "signing_key.pem"),
        streams=[stream],
        ledger_create_if_missing=True,
        topic_partitions=1,
        kafka_session_timeout_seconds=6,
        kafka_heartbeat_interval_seconds=2,
        kafka_fetch_max_wait_ms=10,
        _env_file=None,
        **free_listener_ports(),
    )


def releases(worker: WorkerProcess) -> int:
    return int((fetch_json(f"{worker.public_url}/streams/s/budget") or {}).get("releases") or 0)


def stored(settings: Settings) -> int:
    store = SqliteStreamStores(settings.resolved_state_path)
    try:
        return store.next_seq("s")
    finally:
        store.close()


def test_the_embedded_brokers_new_log_is_learned_and_released(tmp_path: Path) -> None:
    port = free_port()
    broker = EmbeddedBroker(port=port).start()
    settings = deployment(tmp_path, port)
    try:
        run(ensure_topics(settings))
        worker = start_worker(settings, tmp_path)
        try:
            run(produce_json(settings, settings.topic("examples"), examples(WINDOW, seed=1)))
            wait_until(lambda: releases(worker) == 1, 120, what="day 1: window 0 released")
        finally:
            assert worker.stop() == 0
        broker.stop()
        assert stored(settings) == WINDOW

        # day 2: the broker and the worker start again; the broker remembers nothing
        broker = EmbeddedBroker(port=port).start()
        settings = settings.model_copy(update={"ledger_create_if_missing": False, **free_listener_ports()})
        run(ensure_topics(settings))
        worker = start_worker(settings, tmp_path)
        try:
            run(produce_json(settings, settings.topic("examples"), examples(WINDOW, seed=2)))
            wait_until(lambda: releases(worker) == 3, 180, what="day 2: L0-1 and L1-0 released")
            metrics = urllib.request.urlopen(f"{worker.operator_url}/metrics", timeout=10).read().decode()
            assert "privstream_examples_log_replaced_total 1.0" in metrics, metrics[-2000:]

            # the broker restarts under the running worker
            broker.stop()
            broker = EmbeddedBroker(port=port).start()
            run(ensure_topics(settings))
            run(produce_json(settings, settings.topic("examples"), examples(WINDOW, seed=3)))
            wait_until(lambda: releases(worker) == 4, 240, what="day 3: L0-2 released")
        finally:
            assert worker.stop() == 0
        assert stored(settings) == 3 * WINDOW
        output = worker.log_path.read_text()
        replaced = [line for line in output.splitlines() if "was replaced" in line]
        assert len(replaced) >= 1 and "reading its new log from its start as new examples" in replaced[0]
        ledger = open_ledger(settings)
        try:
            assert len(ledger.entries("s")) == 4
            assert ledger.spent("s").epsilon == pytest.approx(2.0)  # each example paid L0 + L1 once
        finally:
            ledger.close()
    finally:
        broker.stop()


def test_a_worker_told_to_refuse_a_replaced_log_stops_in_one_line(tmp_path: Path) -> None:
    port = free_port()
    broker = EmbeddedBroker(port=port).start()
    settings = deployment(tmp_path, port)
    try:
        run(ensure_topics(settings))
        worker = start_worker(settings, tmp_path)
        try:
            run(produce_json(settings, settings.topic("examples"), examples(WINDOW, seed=1)))
            wait_until(lambda: releases(worker) == 1, 120, what="window 0 released")
        finally:
            assert worker.stop() == 0
        broker.stop()
        broker = EmbeddedBroker(port=port).start()
        settings = settings.model_copy(
            update={
                "ledger_create_if_missing": False,
                "examples_log_replaced": "refuse",
                **free_listener_ports(),
            }
        )
        run(ensure_topics(settings))
        run(produce_json(settings, settings.topic("examples"), examples(WINDOW // 2, seed=2)))
        refused = WorkerProcess(settings, tmp_path / "refused.log").start()
        assert refused.process is not None
        try:
            status = refused.process.wait(120)
        except subprocess.TimeoutExpired:
            refused.stop()
            raise AssertionError("the worker went on:\n" + refused.log_path.read_text()[-3000:]) from None
        output = refused.log_path.read_text()
        assert status == 2, output[-3000:]
        assert "Traceback" not in output, output[-3000:]
        [line] = [line for line in output.splitlines() if line.startswith("privstream worker: error: ")]
        assert "partition 0 was replaced (its log ends at offset" in line, line
        assert "PRIVSTREAM_EXAMPLES_LOG_REPLACED=rebase" in line, line
        assert stored(settings) == WINDOW  # nothing of the new log taken
    finally:
        broker.stop()
