"""A stalled old owner cannot charge or publish after the group gave its partition to another
worker: two release agents on one shared store, fenced by their leases (stream_app/fencing.py),
over both backends."""

from __future__ import annotations

import asyncio
import threading
import zlib

import numpy as np
import pytest

from privstream.agents.interfaces import LeaseLostError
from privstream.agents.ledger_port import NodeRange
from privstream.agents.releases import Product, ReleaseAgent, ReleasePolicy
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners import make_learner
from privstream.learning.randomness import seeded
from privstream.stream_app.fencing import FencedLedger, fenced_publisher
from privstream.stream_app.store.postgres_db import PostgresConfig
from privstream.stream_app.store.postgres_state import PostgresStateStore
from privstream.stream_app.store.sqlite_state import SqliteStateStore
from tests.agents.test_releases import Published, RecordingMetrics

from .test_leases_contract import leases_of

CLASS = parse_class_spec("thresholds:1024")


class PausedLearner:
    """The generic learner, stalled inside ``fit`` until ``resume`` is set (a GC pause, SIGSTOP)."""

    def __init__(self) -> None:
        self.inner = make_learner("generic")
        self.name = self.inner.name
        self.entered, self.resume = threading.Event(), threading.Event()

    def fit(self, *args, **kwargs):
        self.entered.set()
        assert self.resume.wait(60)
        return self.inner.fit(*args, **kwargs)


class PausedPublisher:
    """Stalls every publication (before the lease check) until ``resume`` is set."""

    def __init__(self, publish) -> None:
        self.publish = publish
        self.entered, self.resume = asyncio.Event(), asyncio.Event()

    async def __call__(self, topic: str, stream_id: str, release: bytes, *, timestamp_ms=None) -> None:
        self.entered.set()
        await self.resume.wait()
        await self.publish(topic, stream_id, release, timestamp_ms=timestamp_ms)


def shared_store(ledger_backend):
    if ledger_backend.name == "sqlite":
        return SqliteStateStore(ledger_backend.path.parent / "state.sqlite3")
    return PostgresStateStore(PostgresConfig(ledger_backend.url, password=ledger_backend.server.password))


def worker(ledger_backend, owner: str, learner, wrap_publish=None, fence_publish=True):
    """One worker's release agent: its own ledger connection, leases and publisher (fenced unless
    ``fence_publish`` is false: then only the charge's fence stands in the way)."""
    ledger = ledger_backend.open(budgets={"s": (10.0, 0.0)})
    store = shared_store(ledger_backend)
    leases = leases_of(ledger_backend, owner)
    published = Published()
    publish = fenced_publisher(published, leases, store.partitions) if fence_publish else published
    policy = ReleasePolicy(
        stream_id="s",
        hypothesis_class=CLASS,
        window_size=100,
        products=(Product("hypotheses", learner, 1.0),),
    )
    agent = ReleaseAgent(
        {"s": policy},
        store,
        FencedLedger(ledger, leases, store.partitions),
        wrap_publish(publish) if wrap_publish else publish,
        RecordingMetrics(),
        library_version="test",
        rng_factory=lambda w: seeded(zlib.crc32(w.encode())),
    )
    return agent, leases, published, ledger


def observe(agent, n: int) -> None:
    xs = np.random.default_rng(0).integers(0, 1024, n)
    agent.observe_batch(
        "s",
        0,
        list(range(n)),
        xs.tolist(),
        (xs >= 600).astype(int).tolist(),
        [None] * n,
        [None] * n,
        [None] * n,
    )


async def test_a_owner_stalled_in_its_learner_cannot_release_after_the_takeover(ledger_backend):
    # The release path reserves (charges) before the learner runs, so the stall comes after the
    # reservation: the new owner completes it from the same seed; the old one publishes nothing.
    ledger_backend.open(create=True, budgets={"s": (10.0, 0.0)}).close()
    stalled = PausedLearner()
    old, old_leases, old_published, ledger = worker(ledger_backend, "old", stalled)
    new, new_leases, new_published, _ = worker(ledger_backend, "new", make_learner("generic"))
    old_leases.take({0})
    observe(old, 100)  # window 0 closes; the old owner's learner starts, then stalls
    assert await asyncio.to_thread(stalled.entered.wait, 30)

    new_leases.take({0})  # the group gave partition 0 to the new worker
    new.on_partitions_assigned({0})
    await new.drain()
    assert len(new_published.messages) == 1  # the new owner released window 0 from the store

    stalled.resume.set()  # the old owner wakes up and tries to charge
    await old.drain()
    assert old_published.messages == []  # refused: not even a copy of the new owner's release
    [entry] = ledger.entries("s")
    assert entry.release == new_published.messages[0][1] and ledger.spent("s").epsilon == 1.0


async def test_a_stalled_owner_cannot_publish_after_the_takeover(ledger_backend):
    ledger_backend.open(create=True, budgets={"s": (10.0, 0.0)}).close()
    paused: list[PausedPublisher] = []

    def pause(publish):
        paused.append(PausedPublisher(publish))
        return paused[0]

    old, old_leases, old_published, ledger = worker(ledger_backend, "old", make_learner("generic"), pause)
    new, new_leases, new_published, _ = worker(ledger_backend, "new", make_learner("generic"))
    old_leases.take({0})
    observe(old, 100)
    await asyncio.wait_for(paused[0].entered.wait(), 30)  # charged; stalls before publishing
    assert len(ledger.entries("s")) == 1 and ledger.unpublished("s")

    new_leases.take({0})
    new.on_partitions_assigned({0})
    await new.drain()  # the new owner publishes the old owner's charged release from the outbox
    assert [m[1] for m in new_published.messages] == [ledger.entries("s")[0].release]

    paused[0].resume.set()
    await old.drain()
    assert old_published.messages == []  # the stalled owner's publication is refused
    assert len(ledger.entries("s")) == 1 and ledger.unpublished("s") == []


def test_a_reservation_is_refused_to_a_worker_that_lost_the_partition(ledger_backend):
    plain = ledger_backend.open(create=True, budgets={"s": (10.0, 0.0)})
    old, new = leases_of(ledger_backend, "old"), leases_of(ledger_backend, "new")
    old.take({0})
    new.take({0})
    stale, owner = FencedLedger(plain, old, lambda s: {0}), FencedLedger(plain, new, lambda s: {0})
    with pytest.raises(LeaseLostError):
        stale.reserve("s", "w0", "learner:generic", 1.0, 0.0, NodeRange.of(0, 0))
    assert owner.reserve("s", "w0", "learner:generic", 1.0, 0.0, NodeRange.of(0, 0)).entry_id
