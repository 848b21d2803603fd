"""/healthz and /readyz of a worker: liveness from the ingest consumer, readiness also from the store."""

from __future__ import annotations

from privstream.stream_app.service import ServiceProbes
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
