"""A stream spread over partitions: its producers' keys, a shard learner per partition, and time
windows gathered from every shard by the one owner of the stream's key partition."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from privstream.agents.online import OnlineLearners, OnlineStream, VectorStream
from privstream.learning.soa import SOA
from privstream.stream_app.cli.common import UserError
from privstream.stream_app.cli.produce import example_key
from privstream.stream_app.metrics import ServiceMetrics
from privstream.stream_app.settings import Settings
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.store.sqlite_state import SqliteStateStore
from tests.agents.test_releases import (
    CLASS,
    TARGET,
    Published,
    RecordingMetrics,
    examples,
    make_agent,
    policy,
    timed,
)
from tests.agents.twins import T0, FakeClock


def stream_settings(**stream):
    return Settings.model_validate(
        {"streams": [{"name": "s", "hypothesis_class": "thresholds:1024", **stream}]}
    )


def test_partitioned_streams_take_time_windows_only():
    time_window = {"epsilon_budget": 1.0, "expected_size": 50, "window": {"kind": "time", "seconds": 60}}
    assert stream_settings(partition_by="user", release=time_window).streams[0].partitioned
    assert not stream_settings().streams[0].partitioned  # by default keyed by the stream's name
    with pytest.raises(ValueError, match="partition_by 'example' needs time windows"):
        stream_settings(partition_by="example", release={"epsilon_budget": 1.0})


def test_producers_key_examples_by_id_or_user():
    assert example_key("stream", "s", {"id": "e1", "user_id": "u"}) == "s"
    assert example_key("example", "s", {"id": "e1", "user_id": "u"}) == "e1"
    assert example_key("user", "s", {"id": "e1", "user_id": "u"}) == "u"
    with pytest.raises(UserError, match="needs a user_id"):
        example_key("user", "s", {"id": "e1"})


def learn(learners, partition, xs, stream="s"):
    ys = [int(x >= TARGET) for x in xs]
    return learners.learn_batch(stream, partition, list(range(len(xs))), [0] * len(xs), xs, ys)


def gauge(metrics, name, **labels):
    return metrics.registry.get_sample_value(name, labels)


def test_each_partition_has_a_learner_of_its_own_within_its_bound_saved_per_shard():
    store = SqliteStateStore(":memory:")
    metrics = ServiceMetrics(["s"], registry=CollectorRegistry())
    stream = OnlineStream("s", CLASS, partitions=6)
    learners = OnlineLearners({"s": stream}, metrics, store)
    ldim = SOA(CLASS).mistake_bound  # the class's Littlestone dimension
    assert gauge(metrics, "privstream_soa_mistake_bound", stream="s") == 6 * ldim  # sum of the shards'
    rng = np.random.default_rng(3)
    for partition in range(6):
        batch = learn(learners, partition, rng.integers(0, 1024, 400).tolist())
        assert batch.source_partition == partition and batch.mistake_bound == ldim
    shards = learners.shards("s")
    assert sorted(shards) == list(range(6))
    assert all(0 < soa.mistakes <= ldim and soa.examples_seen == 400 for soa in shards.values())
    # Each shard learned alone (one SOA for all would have stopped erring after its first 10).
    assert sum(soa.mistakes for soa in shards.values()) > max(soa.mistakes for soa in shards.values())
    for partition, soa in shards.items():
        assert (
            gauge(metrics, "privstream_shard_mistakes", stream="s", partition=str(partition)) == soa.mistakes
        )
    total = gauge(metrics, "privstream_soa_mistakes_total", stream="s")
    assert total == sum(soa.mistakes for soa in shards.values())
    # Saved per shard: another worker taking partition 4 continues its shard, not another's.
    assert store.load_soa("s") is None and store.load_soa("s#p4") is not None
    other = OnlineLearners({"s": stream}, ServiceMetrics(["s"], registry=CollectorRegistry()), store)
    assert other.shards("s") == {}  # loaded when the partition's examples come
    assert other.soa("s", 4).state_dict() == shards[4].state_dict()
    with pytest.raises(ValueError, match="name the shard's partition"):
        other.soa("s")


def test_a_vector_streams_shards_skip_their_own_replays():
    store = SqliteStateStore(":memory:")
    stream = VectorStream("v", ((0.0, 1.0), (0.0, 1.0)), partitions=3)
    learners = OnlineLearners({"v": stream}, ServiceMetrics([], registry=CollectorRegistry()), store)
    X = np.random.default_rng(1).random((100, 2)).tolist()
    ys = [int(a + b > 1) for a, b in X]
    for partition in (0, 1):
        learners.learn_batch("v", partition, list(range(100)), [0] * 100, X, ys)
    replay = learners.learn_batch("v", 1, list(range(100)), [0] * 100, X, ys)
    assert replay.predictions == []  # shard 1 had learned them
    assert (
        learners.vector_learner("v", 0).examples_seen == learners.vector_learner("v", 1).examples_seen == 100
    )
    assert store.load_soa("v#p0") is not None and store.load_soa("v#p2") is None


def observe_on(agent, batch, partition):
    agent.observe_batch(
        "s",
        partition,
        [o for _, _, o in batch],
        [e.x for e, _, _ in batch],
        [e.y for e, _, _ in batch],
        [e.user_id for e, _, _ in batch],
        [e.event_time for e, _, _ in batch],
        [None] * len(batch),
    )


async def test_one_owner_releases_each_window_with_every_shards_examples(tmp_path):
    # Two workers share the store and the ledger; the stream's key partition is 0. Worker A holds
    # partitions 0-2, B holds 3-5: each stores its shards' rows, only A closes and releases.
    clock = FakeClock(T0)
    p = policy(window_kind="time", window_seconds=60.0, expected_size=50, partitioned=True)
    ledger_path = tmp_path / "ledger.sqlite3"
    budgets = {"s": (10.0, 0.0)}
    ledgers = [SqliteLedger.open(ledger_path, budgets=budgets, create_if_missing=w == 0) for w in range(2)]
    stores = [SqliteStateStore(tmp_path / "state.sqlite3") for _ in range(2)]
    outputs = [Published(), Published()]
    metrics = [RecordingMetrics(), RecordingMetrics()]
    a, b = (
        make_agent(
            {"s": p}, ledger=ledgers[w], store=stores[w], publish=outputs[w], metrics=metrics[w], clock=clock
        )
        for w in (0, 1)
    )
    for agent, parts in ((a, {0, 1, 2}), (b, {3, 4, 5})):
        agent._partition_of = lambda stream_id: 0
        agent.on_partitions_assigned(parts)
    rows = timed(examples(120), T0, step=0.25)  # 0..30 s: window 0
    for k, partition in enumerate(range(6)):
        observe_on(a if partition < 3 else b, rows[20 * k : 20 * (k + 1)], partition)
    clock.now = T0 + 60
    await a.tick()
    await b.tick()
    await a.drain()
    await b.drain()
    assert outputs[1].messages == [] and len(outputs[0].messages) == 1
    assert metrics[0].window_sizes == [120]  # one node: all six shards' examples
    assert [e.window_id for e in ledgers[0].entries("s")] == [f"t60-L0-{int(T0 // 60)}"]
    # B's late rows of the closed window are counted late, stored nowhere; its next window's kept.
    observe_on(b, timed(examples(10, start=1000), T0 + 30), 3)
    observe_on(b, timed(examples(10, start=2000), T0 + 70), 4)
    assert metrics[1].events["late"] == 10
    # A dies; B takes every partition and releases window 1 with A's rows of it too.
    observe_on(a, timed(examples(5, start=3000), T0 + 80), 0)
    b.on_partitions_assigned(set(range(6)))
    clock.now = T0 + 120
    await b.tick()
    await b.drain()
    assert len(outputs[1].messages) == 1 and metrics[1].window_sizes == [15]
    assert [e.window_id for e in ledgers[1].entries("s")][-1] == f"t60-L0-{int(T0 // 60) + 1}"
