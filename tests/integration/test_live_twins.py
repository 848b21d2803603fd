"""Live twin runs: two real workers on time windows, one stream with no example and the same stream
with 20,000 examples for a learner that is slow in n; and an integer-class stream capped at 2,000
examples per node, given 2,000 examples in one run and 300,000 in the other.

Each worker runs on the wall clock with 2-second windows (level 0 only: the tree's nodes are
aligned to absolute window indexes, so two streams registered at different phases have different
first nodes; the unit twins in ``tests/agents`` cover the tree on a simulated clock) and a slot
of 2 s. The learner is ``halfspaces`` on feature vectors, whose fit on 20,000 examples takes some
0.6 s against a few milliseconds on none. The first releases are compared apart from the DP
outputs and the absolute time (the windows are anchored at each stream's registration in its
ledger, so ids and times are compared relative to the first window): the certificates, the ledger
entry ids, and each record's timestamp must be identical, and each record must land on the topic
within its public slot (after its deadline, before the slot's end), whatever the learner did.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
import urllib.request
import uuid
from datetime import datetime

import pytest
from aiokafka import AIOKafkaConsumer

from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger

from .conftest import run, start_worker, wait_until

pytestmark = pytest.mark.live

RELEASES = 8
SECONDS = 2.0  # a window
SLOT = 2.0  # publish_delay_seconds


class Arrivals(threading.Thread):
    """Reads a topic while the worker runs, noting when each record arrived (the wall clock)."""

    def __init__(self, settings: Settings, topic: str):
        super().__init__(daemon=True)
        self.settings, self.topic = settings, topic
        self.records: list[tuple[float, object]] = []
        self.ready, self.stop = threading.Event(), threading.Event()

    def run(self) -> None:
        asyncio.run(self._consume())

    async def _consume(self) -> None:
        consumer = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.settings.kafka_bootstrap,
            group_id=f"arrivals-{uuid.uuid4().hex}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=50,  # the embedded broker waits all of it: keep the observer prompt
        )
        await consumer.start()
        self.ready.set()
        try:
            while not self.stop.is_set():
                batch = await consumer.getmany(timeout_ms=50)
                now = time.time()
                self.records += [(now, record) for messages in batch.values() for record in messages]
        finally:
            await consumer.stop()


def public_view(record, first_window: int, ledger_id: str) -> dict:
    """A release without its DP outputs, with window indexes and times relative to the first
    window, the record's timestamp beside it (relative too), and the ledger named relative to the
    run (each run is a deployment: its ledger has its own id)."""
    release = json.loads(record.value)
    release.pop("hypothesis", None)
    certificate = release["certificate"]
    certificate.pop("dp_outputs")
    start = first_window * SECONDS
    if certificate["ledger_id"] == ledger_id:
        certificate["ledger_id"] = "the run's ledger"
    window = certificate["window"]
    family, level, index = window["window_id"].rsplit("-", 2)
    window["window_id"] = f"{family}-{level}-{int(index) - (first_window >> int(level[1:]))}"
    certificate["ledger_entry_id"] = certificate["ledger_entry_id"].replace(
        index, window["window_id"].rsplit("-")[-1]
    )
    window["first_window"] -= first_window
    window["last_window"] -= first_window
    for key in ("start", "end"):
        window[key] = datetime.fromisoformat(window[key]).timestamp() - start
    publication = certificate.get("publication") or {}
    if "scheduled_at" in publication:
        publication["scheduled_at"] = datetime.fromisoformat(publication["scheduled_at"]).timestamp() - start
    return {"release": release, "timestamp": record.timestamp / 1000 - start}


def vector_stream() -> StreamConfig:
    return StreamConfig(
        name="s",
        features=2,
        feature_bounds=[[0.0, 1.0], [0.0, 1.0]],
        release=ReleaseConfig(
            learner="halfspaces",
            window=WindowConfig(kind="time", seconds=SECONDS, publish_delay_seconds=SLOT),
            epsilon_budget=1.0,
            expected_size=5000,
        ),
    )


def vector_batches(examples: int) -> list[dict]:
    return [
        {
            "stream_id": "s",
            "xs": [[(0.37 * i) % 1, (0.61 * i) % 1] for i in range(k, k + 1000)],
            "ys": [1] * 1000,
        }
        for k in range(0, examples, 1000)
    ]


def defaults_released(worker) -> float:
    """The worker's ``privstream_release_defaults_total``, every reason summed (operator metrics)."""
    with urllib.request.urlopen(f"{worker.operator_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("privstream_release_defaults_total{")
    )


def one_run(
    unique_settings,
    tmp_path,
    examples: int,
    stream=vector_stream,
    batches=vector_batches,
    produce=None,
    defaults: list[float] | None = None,
) -> list[tuple[float, dict]]:
    """A worker's first releases. ``produce(settings)`` produces the examples once the worker
    publishes (else ``batches(examples)`` at once); ``defaults`` is given the defaults the worker
    released from then on."""
    settings = unique_settings.model_copy(
        update={
            "streams": [stream()],
            "ledger_create_if_missing": True,
            "data_dir": tmp_path / f"run-{examples}",
        }
    )
    run(ensure_topics(settings))
    arrivals = Arrivals(settings, settings.topic("hypotheses"))
    arrivals.start()
    assert arrivals.ready.wait(60)
    worker = start_worker(settings, tmp_path)
    try:
        # Once the worker publishes (the windows that closed while it started went out late, as
        # their deadlines passed before it could), the examples arrive.
        wait_until(lambda: arrivals.records, 120, what="the worker's first release")
        if defaults is not None:  # the windows that closed while it started are caught up first
            wait_until(
                lambda: any(arrived < r.timestamp / 1000 + SLOT for arrived, r in arrivals.records),
                120,
                what="a release on time",
            )
            before = defaults_released(worker)
        if produce is not None:
            produce(settings)
        else:
            run(produce_json(settings, settings.topic("examples"), [("s", b) for b in batches(examples)]))
        ledger = SqliteLedger.open(settings.resolved_ledger_path)
        wait_until(lambda: len(arrivals.records) >= RELEASES, 120, what="a few windows released")
        if defaults is not None:
            defaults.append(defaults_released(worker) - before)
    finally:
        arrivals.stop.set()
        arrivals.join(30)
        assert worker.stop() == 0
    assert len(ledger.entries("s")) >= RELEASES
    records = arrivals.records[:RELEASES]
    # The stream's first window: the one holding its registration in the ledger.
    first = json.loads(records[0][1].value)["certificate"]["window"]["first_window"]
    return [
        (arrived - first * SECONDS, public_view(record, first, ledger.ledger_id))
        for arrived, record in records
    ]


def test_live_workers_publish_the_same_records_at_the_same_times_whatever_a_slow_learner_did(
    unique_settings, tmp_path
):
    without = one_run(unique_settings, tmp_path, examples=0)
    other = unique_settings.model_copy(
        update={"app_id": unique_settings.app_id + "-b", "topic_prefix": unique_settings.topic_prefix + "b."}
    )
    with_data = one_run(other, tmp_path, examples=20_000)
    assert_live_twins(without, with_data)


def integer_stream() -> StreamConfig:
    return StreamConfig(
        name="s",
        hypothesis_class="thresholds:65536",
        release=ReleaseConfig(
            learner="generic",
            window=WindowConfig(kind="time", seconds=SECONDS, publish_delay_seconds=SLOT),
            epsilon_budget=1.0,
            expected_size=1000,
            max_node_examples=2000,
        ),
    )


def integer_batches(examples: int) -> list[dict]:
    return [
        {
            "stream_id": "s",
            "xs": [(7919 * i) % 65536 for i in range(k, k + min(1000, examples - k))],
            "ys": [int((7919 * i) % 65536 >= 30000) for i in range(k, k + min(1000, examples - k))],
        }
        for k in range(0, examples, 1000)
    ]


@pytest.mark.slow
def test_live_time_windows_of_2000_and_300000_examples_publish_alike_at_their_deadlines(
    unique_settings, tmp_path
):
    """The cap at ingest, live: a capped integer-class time window keeps a bottom-k sample as its
    examples arrive, so 300,000 examples (150 times the cap) cost its close what 2,000 do."""
    small = one_run(unique_settings, tmp_path, 2000, integer_stream, integer_batches)
    other = unique_settings.model_copy(
        update={"app_id": unique_settings.app_id + "-b", "topic_prefix": unique_settings.topic_prefix + "b."}
    )
    large = one_run(other, tmp_path, 300_000, integer_stream, integer_batches)
    assert_live_twins(small, large)


def flood_at_the_close(flood: int):
    """Produce 2,000 examples into a time window, and ``flood`` examples more at its close (one
    batch of 1,000 examples a message, all produced at once), while its release is in its slot."""

    def produce(settings: Settings) -> None:
        topic = settings.topic("examples")
        run(produce_json(settings, topic, [("s", b) for b in integer_batches(2000)]))
        close = (math.floor(time.time() / SECONDS) + 1) * SECONDS  # lateness 0: the window's end
        time.sleep(max(0.0, close - time.time()))
        if flood:
            run(produce_json(settings, topic, [("s", b) for b in integer_batches(flood)]))

    return produce


@pytest.mark.slow
def test_live_a_flood_at_a_close_leaves_the_release_its_kind_and_its_landing(unique_settings, tmp_path):
    """A time window of 2,000 examples (the cap) closes; 300,000 examples arrive at that moment in
    one run and none in the other. Ingest works in chunks and keeps out of the way of deadlines, so
    both runs publish the same records at the same timestamps, each landing within its slot, and no
    default in either."""
    defaults: list[float] = []
    small = one_run(
        unique_settings, tmp_path, 0, integer_stream, produce=flood_at_the_close(0), defaults=defaults
    )
    other = unique_settings.model_copy(
        update={"app_id": unique_settings.app_id + "-b", "topic_prefix": unique_settings.topic_prefix + "b."}
    )
    large = one_run(
        other, tmp_path, 300_000, integer_stream, produce=flood_at_the_close(300_000), defaults=defaults
    )
    assert_live_twins(small, large)
    assert defaults == [0, 0]


def assert_live_twins(without, with_data) -> None:
    views = [[view for _, view in runs] for runs in (without, with_data)]
    assert [v["release"]["certificate"]["window"]["window_id"] for v in views[0]] == [
        f"t2-L0-{i}" for i in range(RELEASES)
    ]
    for i, (a, b) in enumerate(zip(*views, strict=True)):
        assert a == b, f"release {i}: {json.dumps(a, sort_keys=True)} != {json.dumps(b, sort_keys=True)}"
        # stamped with its deadline: the window's end plus one slot
        assert (
            a["timestamp"]
            == a["release"]["certificate"]["publication"]["scheduled_at"]
            == (i + 1) * SECONDS + SLOT
        )
    for runs in (without, with_data):  # on the topic within its public slot, once the worker was up
        up = runs[0][0]
        on_time = [(arrived, view["timestamp"]) for arrived, view in runs if view["timestamp"] > up]
        assert len(on_time) >= 3, on_time
        assert all(deadline <= arrived < deadline + SLOT for arrived, deadline in on_time), on_time
