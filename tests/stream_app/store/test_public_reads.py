"""The ledger's reads for the public pages, on both backends: counts by mechanism and level in one
aggregate query, and a bounded page of published releases (newest first in SQL, oldest first out)."""

from __future__ import annotations

from privstream.agents.ledger_port import NodeRange
from tests.stream_app.store.backends import LedgerBackend


def test_release_counts_and_pages_of_published_releases(ledger_backend: LedgerBackend) -> None:
    ledger = ledger_backend.open(create=True, budgets={"s": (10.0, 0.0), "other": (1.0, 0.0)})
    try:
        entries = []
        for w in range(5):
            reservation = ledger.reserve("s", f"L0-{w}", "learner:generic", 0.5, 0.0, NodeRange.of(0, w))
            ledger.complete(reservation.entry_id, f"release {w}".encode())
            entries.append(reservation.entry_id)
        node = ledger.reserve("s", "L1-0", "learner:generic", 0.5, 0.0, NodeRange.of(1, 0))
        ledger.complete(node.entry_id, b"release L1")
        ledger.reserve("s", "L1-1", "learner:generic", 0.5, 0.0, NodeRange.of(1, 1))  # not completed
        ledger.charge("s", "w0", "sanitizer:mwem", 0.1, 0.0, b"sanitized")  # no node
        ledger.charge("other", "w0", "learner:generic", 0.1, 0.0, b"another stream")
        for entry in [*entries[:4], node.entry_id]:  # entry 5 stays in the outbox
            ledger.mark_published(entry)

        assert ledger.release_counts("s") == {
            ("learner:generic", 0): 5,
            ("learner:generic", 1): 1,
            ("sanitizer:mwem", None): 1,
        }
        newest = ledger.published_page("s", 2)
        assert [c.release for c in newest] == [b"release 3", b"release L1"]
        older = ledger.published_page("s", 2, before=newest[0].entry_id)
        assert [c.release for c in older] == [b"release 1", b"release 2"]
        assert [c.release for c in ledger.published_page("s", 10, before=older[0].entry_id)] == [b"release 0"]
        assert ledger.published_page("other", 5) == []  # charged, never published
    finally:
        ledger.close()
