"""Partition leases (store/leases.py) over both backends: ownership, epochs, and the fence a charge
runs in its own transaction, serialised with takeovers."""

from __future__ import annotations

import threading
import time

import pytest

from privstream.agents.interfaces import LeaseLostError
from privstream.agents.ledger_port import NodeRange
from privstream.stream_app.store import leases as leases_module
from privstream.stream_app.store.leases import LeaseStoreError, PostgresLeases, SqliteLeases
from privstream.stream_app.store.migrations import Migration

from .backends import LedgerBackend


def leases_of(backend: LedgerBackend, owner: str, source: str = "examples"):
    if backend.name == "sqlite":
        return SqliteLeases(backend.path, source, owner=owner)  # type: ignore[attr-defined]
    return PostgresLeases(backend.config, source, owner=owner)  # type: ignore[attr-defined]


@pytest.fixture
def ledger(ledger_backend):
    ledger = ledger_backend.open(create=True, budgets={"s": (10.0, 0.0)})
    yield ledger
    ledger.close()


def test_take_makes_the_owner_and_only_a_takeover_raises_the_epoch(ledger_backend, ledger):
    old, new = leases_of(ledger_backend, "old"), leases_of(ledger_backend, "new")
    assert old.take({0, 1}) == {0: 1, 1: 1}
    assert old.take({0, 1}) == {0: 1, 1: 1}  # held already: work in flight stays valid
    assert new.take({1}) == {1: 2}
    assert new.holders() == {0: ("old", 1), 1: ("new", 2)}
    old.check({0})
    new.check({1})
    with pytest.raises(LeaseLostError, match="partition 1 of examples is held by new"):
        old.check({0, 1})
    assert old.take({1}) == {1: 3}  # given back by the group
    with pytest.raises(LeaseLostError):
        new.check({1})
    other_topic = leases_of(ledger_backend, "new", source="other-examples")
    assert other_topic.take({0}) == {0: 1}  # leases are per topic
    old.check({0})


def test_a_fenced_charge_writes_nothing_and_the_owner_charges(ledger_backend, ledger):
    old, new = leases_of(ledger_backend, "old"), leases_of(ledger_backend, "new")
    old.take({0})
    new.take({0})
    with pytest.raises(LeaseLostError):
        ledger.charge("s", "w0", "learner:generic", 1.0, 0.0, b"old", fence=old.fence({0}))
    assert ledger.entries("s") == [] and ledger.spent("s").epsilon == 0.0 and ledger.refusals("s") == 0
    charge = ledger.charge("s", "w0", "learner:generic", 1.0, 0.0, b"new", fence=new.fence({0}))
    assert charge.release == b"new" and ledger.spent("s").epsilon == 1.0
    with pytest.raises(LeaseLostError):  # not even a replay of the new owner's charge
        ledger.charge("s", "w0", "learner:generic", 1.0, 0.0, b"old", fence=old.fence({0}))
    with pytest.raises(LeaseLostError):  # a lease never taken fences too
        ledger.charge("s", "w1", "learner:generic", 1.0, 0.0, b"x", fence=old.fence({5}))


def test_a_fenced_reservation_writes_nothing_and_the_owner_reserves(ledger_backend, ledger):
    """The release path (reserve, then complete) runs the fence inside reserve's transaction."""
    old, new = leases_of(ledger_backend, "old"), leases_of(ledger_backend, "new")
    old.take({0})
    new.take({0})
    node = NodeRange.of(0, 0)
    with pytest.raises(LeaseLostError):
        ledger.reserve("s", "c2-L0-0", "learner:generic", 1.0, 0.0, node, fence=old.fence({0}))
    assert ledger.incomplete("s") == [] and ledger.lifetime("s").spent_per_example.epsilon == 0.0
    reservation = ledger.reserve("s", "c2-L0-0", "learner:generic", 1.0, 0.0, node, fence=new.fence({0}))
    assert ledger.incomplete("s") == [reservation]
    with pytest.raises(LeaseLostError):  # a stale owner gets not even the reservation's seed
        ledger.reserve("s", "c2-L0-0", "learner:generic", 1.0, 0.0, node, fence=old.fence({0}))


def test_a_stream_spread_over_two_workers_partitions_is_charged_by_either(ledger_backend, ledger):
    # Producers should key a stream's examples by its id (one partition); if they do not, each
    # worker owning one of its partitions may release it, and a stale one still may not.
    first, second = leases_of(ledger_backend, "first"), leases_of(ledger_backend, "second")
    first.take({0})
    second.take({1})
    ledger.charge("s", "w0", "learner:generic", 1.0, 0.0, b"a", fence=first.fence({0, 1}))
    ledger.charge("s", "w1", "learner:generic", 1.0, 0.0, b"b", fence=second.fence({0, 1}))
    second.take({0})
    with pytest.raises(LeaseLostError, match="partition 0"):
        ledger.charge("s", "w2", "learner:generic", 1.0, 0.0, b"c", fence=first.fence({0, 1}))
    assert [c.window_id for c in ledger.entries("s")] == ["w0", "w1"]


def test_a_charge_in_flight_holds_off_the_takeover_until_it_commits(ledger_backend, ledger):
    old, new = leases_of(ledger_backend, "old"), leases_of(ledger_backend, "new")
    old.take({0})
    inside, go = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def release_bytes(receipt) -> bytes:  # runs inside the charge's transaction, after the fence
        inside.set()
        assert go.wait(30)
        return b"old"

    def charge() -> None:
        outcome["charge"] = ledger.charge(
            "s", "w0", "learner:generic", 1.0, 0.0, release_bytes, fence=old.fence({0})
        )

    def takeover() -> None:
        outcome["takeover"] = new.take({0})

    charging = threading.Thread(target=charge)
    charging.start()
    assert inside.wait(30)
    taking = threading.Thread(target=takeover)
    taking.start()
    time.sleep(0.5)
    assert "takeover" not in outcome  # waits for the charge's transaction
    go.set()
    charging.join(30)
    taking.join(30)
    assert outcome["takeover"] == {0: 2}
    assert outcome["charge"].release == b"old"  # committed before the takeover: valid
    with pytest.raises(LeaseLostError):  # and nothing after it
        ledger.charge("s", "w1", "learner:generic", 1.0, 0.0, b"old", fence=old.fence({0}))


def test_the_leases_schema_is_its_own_component(ledger_backend, ledger, monkeypatch):
    leases_of(ledger_backend, "a").take({0})
    again = leases_of(ledger_backend, "b")  # reopening applies nothing and keeps the rows
    assert again.holders() == {0: ("a", 1)}
    ledger_backend.open().close()  # the ledger still opens: its own schema is untouched
    with monkeypatch.context() as later:  # a later privstream adds a migration: it is applied
        step = Migration(2, "from a later privstream", ("CREATE TABLE later (x INTEGER)",))
        later.setattr(leases_module, "MIGRATIONS", (*leases_module.MIGRATIONS, step))
        assert leases_of(ledger_backend, "c").holders() == {0: ("a", 1)}
    with pytest.raises(LeaseStoreError, match="newer"):
        leases_of(ledger_backend, "d")  # a newer schema than this code: an error, never a reset
