"""The fault benchmark's audit of the public topic against the ledger: it must catch what it counts."""

from __future__ import annotations

import json
from typing import NamedTuple

from privstream.agents.ledger_port import public_entry_id
from privstream.stream_app.bench.faults import audit_releases, targets_met
from privstream.stream_app.store.sqlite_ledger import SqliteLedger


class Record(NamedTuple):
    value: bytes


def release(stream: str, window: str, entry: str, noise: int, epsilon: float = 0.5) -> bytes:
    return json.dumps(
        {
            "stream_id": stream,
            "hypothesis": {"noise": noise},
            "certificate": {
                "ledger_entry_id": entry,
                "window": {"window_id": window},
                "epsilon": epsilon,
            },
        }
    ).encode()


def charged(ledger: SqliteLedger, stream: str, window: str, noise: int) -> bytes:
    c = ledger.charge(
        stream,
        window,
        "learner:generic",
        0.5,
        0.0,
        lambda receipt: release(stream, window, public_entry_id(stream, window, "learner:generic"), noise),
    )
    ledger.mark_published(c.entry_id)
    return c.release


def test_a_clean_run_meets_the_targets_and_copies_are_not_duplicates():
    ledger = SqliteLedger.open(":memory:", budgets={"s": (10.0, 0.0)})
    records = [Record(charged(ledger, "s", f"w{i}", i)) for i in range(3)]
    audit = audit_releases([*records, records[0]], ledger, ["s"], {"s": 3})  # one identical copy
    assert audit == {
        "windows_released": 3,
        "duplicate_releases": 0,
        "double_charges": 0,
        "ledger_matches_certificates": True,
        "republished_copies": 1,
        "ledger_entries": 3,
    }
    assert targets_met({**audit, "windows_expected": 3, "examples_sent": 9, "examples_learned": 9})


def test_a_window_released_with_fresh_noise_is_a_duplicate_and_a_double_charge():
    ledger = SqliteLedger.open(":memory:", budgets={"s": (10.0, 0.0)})
    records = [Record(charged(ledger, "s", "w0", 0)), Record(charged(ledger, "s", "w1", 1))]
    # A broken worker re-released window w0 under another ledger key (fresh noise, charged again).
    again = ledger.charge(
        "s", "w0", "learner:generic#2", 0.5, 0.0, lambda r: release("s", "w0", "s/w0/learner:generic#2", 99)
    )
    ledger.mark_published(again.entry_id)
    audit = audit_releases([*records, Record(again.release)], ledger, ["s"], {"s": 2})
    assert audit["duplicate_releases"] == 1
    assert audit["double_charges"] == 1  # three charges for two windows
    assert not targets_met({**audit, "windows_expected": 2, "examples_sent": 2, "examples_learned": 2})


def test_bytes_the_ledger_does_not_hold_or_a_charge_never_published_break_the_match():
    ledger = SqliteLedger.open(":memory:", budgets={"s": (10.0, 0.0)})
    good = Record(charged(ledger, "s", "w0", 0))
    forged = Record(release("s", "w1", "s/w1/learner:generic", 1))  # on the topic, not in the ledger
    assert audit_releases([good, forged], ledger, ["s"], {"s": 2})["ledger_matches_certificates"] is False
    charged(ledger, "s", "w2", 2)  # charged and marked, but not on the topic
    assert audit_releases([good], ledger, ["s"], {"s": 2})["ledger_matches_certificates"] is False
