"""Faults on a live worker: SIGKILL under load, the broker restarted, a slow learner.

Asserted each time: every valid example processed at least once (the predictions cover every
source offset), no release duplicated or double-charged (the public topic checked against the
ledger with ``check_public_topic``), and nothing waits longer than the configured timeouts.

The broker restart: the embedded broker keeps nothing, so a restarted one has no topics, no
committed offsets and no groups. The worker keeps running and reconnects (a transient outage must
not kill it), and it does not hide the outage: Kafka is probed every few seconds, and once it has
not answered for ``stall_seconds`` the worker logs one clear error line and ``/healthz`` answers
503 until Kafka is back (a supervisor such as Kubernetes' liveness probe then restarts it).
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

import numpy as np
import pytest

from privstream.learning.private_learners.base import LEARNERS
from privstream.stream_app.embedded.broker import EmbeddedBroker, free_port
from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.settings import ReleaseConfig, StreamConfig, WindowConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger

from .conftest import consume_all, run, start_worker, wait_until
from .test_live_releases import check_public_topic
from .test_load import (
    MemorySampler,
    handled,
    healthz,
    load_settings,
    payloads,
    predicted_offsets,
    produce_at_rate,
)

pytestmark = pytest.mark.live


def test_sigkill_under_load_then_restart(unique_settings, tmp_path):
    """Kill -9 mid-load with windows open and releases in flight; a restarted worker finishes."""
    settings = load_settings(unique_settings, window=5000)
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    wait_until(
        lambda: fetch_json(f"{worker.operator_url}/readyz") == {"status": "ready", "reason": "ok"},
        120,
        what="worker ready",
    )
    messages = payloads(40_000, seed=5)  # 4 windows of 5,000 per stream
    produced: dict[str, object] = {}

    def produce() -> None:
        produced["result"] = run(produce_at_rate(settings, messages, rate=2500))

    producer = threading.Thread(target=produce)
    producer.start()
    ledger = SqliteLedger.open(settings.resolved_ledger_path)
    # Kill while examples are still arriving, after at least one release (windows open, some
    # released, offsets of the batch in hand uncommitted).
    wait_until(lambda: len(ledger.entries("load-a")) >= 1 and handled(worker) > 0, 120, what="a release")
    assert producer.is_alive(), "the load ended before the kill: raise the example count"
    killed_at = handled(worker)
    worker.process.send_signal(signal.SIGKILL)
    worker.process.wait(10)
    restarted = start_worker(settings.model_copy(update={"ledger_create_if_missing": False}), tmp_path)
    try:
        producer.join(120)
        _, positions = produced["result"]
        windows = {s: 4 for s in ("load-a", "load-b")}
        wait_until(
            lambda: all(len(ledger.entries(s)) == n for s, n in windows.items()),
            150,
            what="every window released after the restart",
        )
        seen = predicted_offsets(settings, len(messages) - killed_at)
        published = run(consume_all(settings, settings.topic("hypotheses"), sum(windows.values())))
        streams = check_public_topic(published, ledger)
        status = fetch_json(f"{restarted.operator_url}/status")
    finally:
        assert restarted.stop() == 0
    assert set(positions) <= set(seen), "an example lost by the crash"
    replays = sum(c - 1 for c in Counter(seen).values())
    print(f"sigkill: killed after {killed_at} handled; {replays} predictions replayed")
    assert status["invalid"] == 0
    for stream, n in windows.items():
        ids = [r.certificate.window.window_id for r in streams[stream]]
        assert len(ids) == len(set(ids)) == n  # no window released twice
        assert len(ledger.entries(stream)) == n  # nor charged twice
        per_example = max(r.certificate.epsilon for r in streams[stream])  # one window each
        assert ledger.spent(stream).epsilon == pytest.approx(per_example)
        assert ledger.unpublished(stream) == []


def test_broker_restart_is_reported_then_recovered(unique_settings, tmp_path):
    port = free_port()
    broker = EmbeddedBroker(port=port, log_path=tmp_path / "broker.log").start()
    stall = 6.0
    settings = unique_settings.model_copy(
        update={
            "kafka_bootstrap": broker.bootstrap,
            "stall_seconds": stall,
            "streams": [StreamConfig(name="load-a", hypothesis_class="thresholds:4294967296")],
        }
    )
    try:
        run(ensure_topics(settings))
        worker = start_worker(settings, tmp_path)
        try:
            first = [m for m in payloads(2000, seed=6) if m[0] == "load-a"]
            run(produce_json(settings, settings.topic("examples"), first))
            wait_until(lambda: handled(worker) == len(first), 120, what="the first examples")
            assert healthz(worker) == 200

            broker.stop()
            # 503 within stall_seconds + a probe period (5 s) + the probe's own timeout (5 s); it
            # counts from Kafka's last answer, up to a probe period before the broker went.
            wait_until(lambda: healthz(worker) == 503, stall + 15, what="/healthz 503 while Kafka is gone")
            assert worker.alive()
            # One clear line, at the probe that finds it silent for longer than stall_seconds.
            wait_until(lambda: "has not answered for" in worker.log_path.read_text(), 15, what="the log line")
            reason = fetch_json(f"{worker.operator_url}/healthz")  # the probe says why
            assert reason is None or "Kafka" in str(reason)

            broker = EmbeddedBroker(port=port, log_path=tmp_path / "broker2.log").start()
            run(ensure_topics(settings))  # the new broker has no topics: recreate them
            wait_until(lambda: healthz(worker) == 200, 30, what="/healthz 200 once Kafka answers again")
            second = [m for m in payloads(2000, seed=7) if m[0] == "load-a"]
            run(produce_json(settings, settings.topic("examples"), second))
            wait_until(
                lambda: handled(worker) == len(first) + len(second),
                120,
                what="examples sent after the restart handled",
            )
            assert "answers again" in worker.log_path.read_text()
        finally:
            exit_status = worker.stop()
    finally:
        broker.stop()
    assert exit_status == 0


#: A learner that takes seconds on any window: the generic learner after a pause. Every real learner
#: is now fast on windows a test can fill (the interval sampler is O(n log n)), so the slowness is
#: made on purpose; it is registered in the worker (and its spawned learner child) by sitecustomize.
SLOW_LEARNER_MODULE = """
import time
from privstream.learning.private_learners.generic.learner import GenericLearner

class SlowGenericLearner(GenericLearner):
    def fit(self, *args, **kwargs):
        time.sleep({seconds})
        return super().fit(*args, **kwargs)
"""
SLOW_LEARNER_REGISTRATION = """
from privstream.learning.private_learners import base
base.LEARNERS["slow-generic"] = "privstream_slow_learner:SlowGenericLearner"
"""


def test_ingestion_continues_while_a_slow_window_is_learned(unique_settings, tmp_path, monkeypatch):
    """A window whose learner takes seconds (a generic learner made slow on purpose, in the worker's
    learner child process); meanwhile another stream's examples keep being learned online."""
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "privstream_slow_learner.py").write_text(SLOW_LEARNER_MODULE.format(seconds=8))
    (plugin / "sitecustomize.py").write_text(SLOW_LEARNER_REGISTRATION)
    paths = [str(plugin), os.environ.get("PYTHONPATH")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))  # the worker and its child
    monkeypatch.syspath_prepend(str(plugin))  # this process checks the settings' learner name
    monkeypatch.setitem(LEARNERS, "slow-generic", "privstream_slow_learner:SlowGenericLearner")
    window = 12_000
    rng = np.random.default_rng(8)
    xs = rng.choice(2**20, window, replace=False).tolist()
    slow = [("slow", {"stream_id": "slow", "x": x, "y": int(1000 <= x < 600_000)}) for x in xs]
    fast = [m for m in payloads(16_000, seed=9) if m[0] == "load-a"]
    settings = unique_settings.model_copy(
        update={
            "streams": [
                StreamConfig(
                    name="slow",
                    hypothesis_class="intervals:1048576",
                    release=ReleaseConfig(
                        learner="slow-generic",
                        # A slot that holds the 8 s fit: derived, it would be three times the
                        # slowest fit measured at start-up (which would take its 8 s too).
                        window=WindowConfig(size=window, publish_delay_seconds=12.0),
                        epsilon=1.0,
                        epsilon_budget=10.0,
                    ),
                ),
                StreamConfig(name="load-a", hypothesis_class="thresholds:4294967296"),
            ],
            "ledger_create_if_missing": True,
        }
    )
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    ledger = SqliteLedger.open(settings.resolved_ledger_path)
    try:
        run(produce_json(settings, settings.topic("examples"), slow))
        wait_until(lambda: handled(worker) >= window, 120, what="the slow window filled")
        with MemorySampler(worker, interval=0.2) as sampler:
            progress = []  # (handled, released) while the fast stream flows

            def observe() -> bool:
                progress.append((handled(worker), len(ledger.entries("slow"))))
                return progress[-1][1] == 1

            producing = threading.Thread(target=lambda: run(produce_at_rate(settings, fast, rate=2000)))
            producing.start()
            wait_until(observe, 120, interval=0.2, what="the slow window released")
            producing.join(60)
            wait_until(lambda: handled(worker) == window + len(fast), 60, what="every fast example")
        published = run(consume_all(settings, settings.topic("hypotheses"), 1))
    finally:
        assert worker.stop() == 0
    assert len(check_public_topic(published, ledger)["slow"]) == 1
    during = [h for h, released in progress if released == 0]
    print(
        f"slow learner: handled went {during[0]} -> {during[-1]} while the window was learned "
        f"({len(during)} samples); health {sorted({s[2] for s in sampler.samples})}"
    )
    assert during[-1] > during[0] >= window, "ingestion stalled while the learner ran"
    assert {s[2] for s in sampler.samples} == {200}
