"""Private releases end to end on the embedded broker: windows, budget, crash, two workers, audit
of the public topic. Each test uses its own app id, consumer group and topics."""

from __future__ import annotations

import json
import signal
import urllib.request
from collections import defaultdict

import numpy as np
import pytest
from aiokafka.partitioner import murmur2
from pydantic import SecretStr

from privstream.learning.online import make_online_learner
from privstream.schemas import HypothesisRelease, VectorPredictionBatch
from privstream.stream_app.embedded.broker import free_listener_ports
from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.sdk import Release
from privstream.stream_app.settings import ReleaseConfig, StreamConfig, WindowConfig
from privstream.stream_app.sources.synthetic import synthetic_examples
from privstream.stream_app.store.factory import open_ledger
from privstream.stream_app.store.sqlite_ledger import SqliteLedger

from .conftest import consume_all, run, start_worker, wait_until

pytestmark = pytest.mark.live

CLASS = "thresholds:4096"


def releasing_stream(name: str, window: int, epsilon: float, budget: float, levels: int = 0) -> StreamConfig:
    return StreamConfig(
        name=name,
        hypothesis_class=CLASS,
        release=ReleaseConfig(
            window=WindowConfig(size=window), epsilon=epsilon, epsilon_budget=budget, top_level=levels
        ),
    )


def stream_records(name: str, n: int, seed: int):
    batch = synthetic_examples(CLASS, n, seed=seed)
    return batch, [(name, m) for m in batch.messages(name)]


def check_public_topic(records, ledger) -> dict[str, list[HypothesisRelease]]:
    """Every message on the public topic is a charged release, byte for byte as in the ledger.

    Returns the distinct releases per stream. A release may appear more than once (at-least-once
    publication after a crash) but only as the identical bytes of one ledger entry.
    """
    by_entry: dict[str, bytes] = {}
    streams: dict[str, list[HypothesisRelease]] = defaultdict(list)
    for record in records:
        release = HypothesisRelease.model_validate_json(record.value)
        # Nothing else is there: every field, at every depth, is one the release schema defines
        # (it ignores unknown ones on reading), whichever optional parts (evaluations) it carries.
        assert json.loads(record.value) == release.model_dump(mode="json")
        entry = release.certificate.ledger_entry_id
        assert entry is not None
        if entry in by_entry:
            assert by_entry[entry] == record.value
            continue
        by_entry[entry] = record.value
        charges = {c.public_id: c for c in ledger.entries(release.stream_id)}
        assert charges[entry].release == record.value  # published bytes = the charged bytes
        streams[release.stream_id].append(release)
    return streams


def test_windows_lifetime_budget_tree_and_public_topic(unique_settings, tmp_path):
    settings = unique_settings.model_copy(
        update={
            "streams": [
                releasing_stream("big", 2000, 0.5, 10.0),
                releasing_stream("small", 500, 1.0, 2.0, levels=1),
            ],
            "ledger_create_if_missing": True,
        }
    )
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    try:
        big, big_records = stream_records("big", 20_000, seed=1)
        _, small_records = stream_records("small", 3000, seed=2)
        run(produce_json(settings, settings.topic("examples"), big_records + small_records))

        def budget(stream: str) -> dict:
            return fetch_json(f"{worker.public_url}/streams/{stream}/budget") or {}

        wait_until(
            lambda: budget("small").get("releases") == 9 and budget("big").get("releases") == 10,
            180,
            what="10 + 9 releases",
        )
        records = run(consume_all(settings, settings.topic("hypotheses"), 19))
        ledger = SqliteLedger.open(settings.resolved_ledger_path)
        streams = check_public_topic(records, ledger)

        # 20,000 examples in windows of 2,000: exactly 10 releases; each example is in one window, so
        # its lifetime ε is 0.5 (parallel composition), however many windows the stream releases.
        assert len(streams["big"]) == 10
        assert ledger.spent("big").epsilon == pytest.approx(0.5)
        fresh = synthetic_examples(CLASS, 2000, seed=1, target=big.target)
        for release in streams["big"]:
            c = release.certificate
            assert c.sample_size == 2000 and c.epsilon == 0.5 and c.randomness == "secure"
            assert c.window.kind == "count" and c.window.end - c.window.start == 2000
            sdk = Release.from_json(release.model_dump_json())
            # The SDK's predict reproduces the released function, scalar and vectorised.
            assert [sdk.predict(int(x)) for x in fresh.xs[:50]] == list(sdk.predict(fresh.xs[:50]))
            assert sdk.error_on(fresh.xs, fresh.ys) < 0.05
        # The tree: six windows and three level-1 nodes, none refused; lifetime ε 1 + 1 per example.
        assert [r.certificate.level for r in streams["small"]] == [0, 0, 1, 0, 0, 1, 0, 0, 1]
        assert ledger.spent("small").epsilon == pytest.approx(2.0) and ledger.refusals("small") == 0
        assert {r.certificate.lifetime.epsilon for r in streams["small"]} == {2.0}
        text = urllib.request.urlopen(f"{worker.operator_url}/metrics").read().decode()
        assert 'privstream_release_refusals_total{stream="small"} 0.0' in text
        assert 'privstream_releases_total{stream="big"} 10.0' in text
        assert 'privstream_releases_by_level_total{level="1",stream="small"} 3.0' in text
        assert 'privstream_privacy_lifetime_epsilon_spent{stream="small"} 2.0' in text
        status = fetch_json(f"{worker.operator_url}/status")
        assert status["streams"]["small"]["examples"] == 3000
        latest = fetch_json(f"{worker.public_url}/streams/big/releases/latest")
        assert latest["certificate"]["ledger_entry_id"] == streams["big"][-1].certificate.ledger_entry_id
    finally:
        assert worker.stop() == 0


def test_sigkill_during_a_window_then_restart(unique_settings, tmp_path):
    settings = unique_settings.model_copy(
        update={
            "streams": [releasing_stream("s", 1000, 1.0, 100.0)],
            "ledger_create_if_missing": True,
        }
    )
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    _, records = stream_records("s", 6000, seed=3)
    run(produce_json(settings, settings.topic("examples"), records))
    budget_url = f"{worker.public_url}/streams/s/budget"
    wait_until(lambda: (fetch_json(budget_url) or {}).get("releases", 0) >= 2, 120, what="two releases")
    worker.process.send_signal(signal.SIGKILL)  # mid-stream: windows open, offsets uncommitted
    worker.process.wait(10)

    restarted = start_worker(settings.model_copy(update={"ledger_create_if_missing": False}), tmp_path)
    try:
        budget_of_restarted = f"{restarted.public_url}/streams/s/budget"
        wait_until(
            lambda: (fetch_json(budget_of_restarted) or {}).get("releases") == 6,
            180,
            what="all six windows released after the restart",
        )
        published = run(consume_all(settings, settings.topic("hypotheses"), 6))
        ledger = SqliteLedger.open(settings.resolved_ledger_path)
        streams = check_public_topic(published, ledger)
        windows = [r.certificate.window.window_id for r in streams["s"]]
        assert len(windows) == len(set(windows)) == 6  # no window released twice
        assert len(ledger.entries("s")) == 6  # no window charged twice
        # each example is in one window: its lifetime ε is one window's, whatever the crash
        assert ledger.spent("s").epsilon == pytest.approx(1.0)
        assert ledger.unpublished("s") == []
    finally:
        assert restarted.stop() == 0


def names_on_distinct_partitions(partitions: int) -> list[str]:
    """Stream names whose keys land on every partition (the producer's murmur2 partitioner)."""
    chosen: dict[int, str] = {}
    i = 0
    while len(chosen) < partitions:
        name = f"p{i}"
        chosen.setdefault((murmur2(name.encode()) & 0x7FFFFFFF) % partitions, name)
        i += 1
    return [chosen[p] for p in range(partitions)]


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_two_workers_share_streams_by_partition(unique_settings, tmp_path, store, request):
    names = names_on_distinct_partitions(4)
    if store == "sqlite":  # two processes on one host sharing the files
        shared = {"store_url": f"sqlite:///{tmp_path}/shared"}
        (tmp_path / "shared").mkdir()
    else:  # as workers on several hosts would: one PostgreSQL database
        server = request.getfixturevalue("pg_server")
        shared = {
            "store_url": request.getfixturevalue("pg_database"),
            "store_password": SecretStr(server.password),
        }
    base = unique_settings.model_copy(
        update={
            "topic_partitions": 4,
            "streams": [releasing_stream(n, 1000, 1.0, 100.0) for n in names],
            "ledger_create_if_missing": True,
            **shared,
        }
    )
    run(ensure_topics(base))
    first = start_worker(base.model_copy(update={"data_dir": tmp_path / "w1"}), tmp_path)
    second = start_worker(
        base.model_copy(update={"data_dir": tmp_path / "w2", **free_listener_ports()}), tmp_path
    )
    try:
        wait_until(
            lambda: all(
                fetch_json(f"{w.operator_url}/readyz") == {"status": "ready", "reason": "ok"}
                for w in (first, second)
            ),
            120,
            what="both workers ready",
        )
        records = []
        for i, name in enumerate(names):
            records += stream_records(name, 2000, seed=10 + i)[1]
        run(produce_json(base, base.topic("examples"), records))
        ledger = open_ledger(base)
        wait_until(lambda: all(len(ledger.entries(n)) == 2 for n in names), 180, what="2 releases per stream")
        published = run(consume_all(base, base.topic("hypotheses"), 8))
        streams = check_public_topic(published, ledger)
        for name in names:
            windows = [r.certificate.window.window_id for r in streams[name]]
            assert len(windows) == len(set(windows)) == 2
            assert ledger.spent(name).epsilon == pytest.approx(1.0)  # per example: one window each
        handled = [fetch_json(f"{w.operator_url}/status")["handled"] for w in (first, second)]
        assert sum(handled) == len(records)
        assert all(h > 0 for h in handled), f"one worker got no partition: {handled}"
    finally:
        assert first.stop() == 0
        assert second.stop() == 0


def test_subscribe_prints_releases(unique_settings, tmp_path):
    """`privstream subscribe STREAM --json` prints each release as one JSON line."""
    import os
    import subprocess
    import sys

    settings = unique_settings.model_copy(
        update={
            "streams": [releasing_stream("s", 500, 1.0, 10.0)],
            "ledger_create_if_missing": True,
        }
    )
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
        env.update(
            PRIVSTREAM_KAFKA_BOOTSTRAP=settings.kafka_bootstrap,
            PRIVSTREAM_TOPIC_PREFIX=settings.topic_prefix,
            PRIVSTREAM_KEYS_URL=f"{worker.public_url}/keys",
        )
        subscriber = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "privstream",
                "subscribe",
                "s",
                "--json",
                "--count",
                "2",
                "--timeout",
                "150",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _, records = stream_records("s", 1000, seed=5)
        run(produce_json(settings, settings.topic("examples"), records))
        out, err = subscriber.communicate(timeout=170)
        assert subscriber.returncode == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
        assert len(lines) == 2
        assert all(line["stream_id"] == "s" and line["certificate"]["epsilon"] == 1.0 for line in lines)
        assert np.all([Release.from_json(line).predict(0) in (0, 1) for line in lines])
    finally:
        assert worker.stop() == 0


def test_a_stream_of_feature_vectors_releases_through_the_same_pipeline(unique_settings, tmp_path):
    """Vector examples -> the online Perceptron (predictions, its margin bound) and windows -> the
    Bayes-consistent learner -> ledger -> hypotheses."""
    stream = StreamConfig(
        name="vec",
        features=2,
        feature_bounds=[(0.0, 1.0), (0.0, 1.0)],
        online_learner="perceptron",
        online_params={"margin": 0.1},
        release=ReleaseConfig(
            learner="bayes-consistent", window=WindowConfig(size=1000), epsilon=1.0, epsilon_budget=5.0
        ),
    )
    settings = unique_settings.model_copy(update={"streams": [stream], "ledger_create_if_missing": True})
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    try:
        rng = np.random.default_rng(11)
        points = rng.random((2000, 2))
        labels = (points[:, 0] + points[:, 1] > 1).astype(int)
        records = [
            ("vec", {"stream_id": "vec", "x": p.tolist(), "y": int(y)})
            for p, y in zip(points, labels, strict=True)
        ]
        records.append(("vec", {"stream_id": "vec", "x": 3, "y": 1}))  # an integer: wrong kind of point
        run(produce_json(settings, settings.topic("examples"), records))
        published = run(consume_all(settings, settings.topic("hypotheses"), 2))
        ledger = SqliteLedger.open(settings.resolved_ledger_path)
        streams = check_public_topic(published, ledger)
        assert len(streams["vec"]) == 2
        for release in streams["vec"]:
            assert release.certificate.sample_size == 1000 and release.certificate.epsilon == 1.0
            sdk = Release.from_json(release.model_dump_json())
            assert sdk.error_on(points, labels) < 0.3  # a private grid rule on 1000 points
        dead = run(consume_all(settings, settings.topic("examples.dlq"), 1))
        assert dict(dead[0].headers)["error.reason"] == b"wrong_type"
        # The online side: every example predicted before its label was learned, in order.
        predicted = run(
            consume_all(
                settings,
                settings.topic("predictions"),
                2000,
                weight=lambda r: len(json.loads(r.value)["predictions"]),
            )
        )
        batches = [VectorPredictionBatch.model_validate_json(r.value) for r in predicted]
        reference = make_online_learner("perceptron", [[0, 1], [0, 1]], margin=0.1)
        assert [p for b in batches for p in b.predictions] == reference.learn_many(points, labels).tolist()
        last = batches[-1]
        assert last.mistakes == reference.mistakes <= last.mistake_bound == 300  # ⌊(sqrt(3)/0.1)²⌋
        assert last.realizable is True
        status = fetch_json(f"{worker.operator_url}/status")["streams"]["vec"]
        assert status["examples"] == 2000 and status["mistakes"] == reference.mistakes
        assert status["online"]["learner"] == "perceptron" and status["mistake_bound"] == 300
        metrics = urllib.request.urlopen(f"{worker.operator_url}/metrics").read().decode()
        assert 'privstream_examples_learned_total{stream="vec"} 2000.0' in metrics
    finally:
        assert worker.stop() == 0
