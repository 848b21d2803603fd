"""A worker's wiring to its store: /healthz and /readyz (readiness also from the store), and the
partition leases taken on assignment."""

from __future__ import annotations

import asyncio

from aiokafka import TopicPartition

from privstream.stream_app import service
from privstream.stream_app.service import ServiceProbes
from privstream.stream_app.store.leases import LeaseStoreError
from privstream.stream_app.store.probe import StoreProbe


class Ingest:
    def __init__(self, ready: bool) -> None:
        self.ready = ready

    def health(self) -> tuple[bool, str]:
        return True, "ok"

    def readiness(self) -> tuple[bool, str]:
        return (True, "ok") if self.ready else (False, "no partitions of the examples topic assigned yet")


def unreachable() -> None:
    raise OSError("connection refused")


def test_ready_only_with_partitions_and_a_store_that_answers():
    answering, down = StoreProbe(lambda: None), StoreProbe(unreachable)
    answering.check()
    down.check()
    assert ServiceProbes(Ingest(True), answering).readiness() == (True, "ok")  # type: ignore[arg-type]
    assert ServiceProbes(Ingest(False), answering).readiness()[1].startswith("no partitions")  # type: ignore[arg-type]
    ready, reason = ServiceProbes(Ingest(True), down).readiness()  # type: ignore[arg-type]
    assert not ready and "connection refused" in reason
    assert ServiceProbes(Ingest(True), down).health() == (True, "ok")  # type: ignore[arg-type]  # not restarted


class FlakyLeases:
    """Refuses the first ``failures`` takes, as a store that does not answer."""

    def __init__(self, failures: int) -> None:
        self.failures, self.taken = failures, []

    def take(self, partitions):
        if self.failures:
            self.failures -= 1
            raise LeaseStoreError("the store does not answer")
        self.taken.append(set(partitions))
        return {p: 1 for p in partitions}


class Assignment:
    def __init__(self, partitions) -> None:
        self.partitions = partitions

    def assignment(self):
        return {TopicPartition("examples", p) for p in self.partitions}


async def test_leases_the_store_refused_are_taken_in_the_background_while_the_assignment_holds(monkeypatch):
    monkeypatch.setattr(service, "LEASE_RETRY_SECONDS", 0.01)
    leases = FlakyLeases(failures=2)
    await service.take_leases(leases, {0, 1}, Assignment({0, 1}))  # type: ignore[arg-type]
    assert leases.taken == []  # did not wait for the store
    for _ in range(200):
        await asyncio.sleep(0.01)
        if leases.taken:
            break
    assert leases.taken == [{0, 1}]
    moved = FlakyLeases(failures=1)
    await service.take_leases(moved, {0}, Assignment({1}))  # type: ignore[arg-type]  # reassigned meanwhile
    await asyncio.sleep(0.1)
    assert moved.taken == []  # that assignment takes its own
