"""The privacy ledger's contract, asserted once and run on every backend (SQLite, PostgreSQL).

Real stores only: SQLite files in tmp_path, a fresh database on a real PostgreSQL server
(``conftest.py``); nothing mocked. What only one backend has (files, WAL, a server that goes
away) is in ``test_sqlite_ledger.py`` and ``test_postgres_ledger.py``.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from privstream.agents.ledger_port import (
    BudgetExhaustedError,
    Charge,
    ChargeReceipt,
    LedgerCorruptError,
    LedgerError,
    LedgerMissingError,
    PrivacyCost,
    PrivacyLedger,
    UnknownEntryError,
    UnknownStreamError,
)
from privstream.stream_app.store.sqlite_ledger import SCHEMA_VERSION
from tests.stream_app.store.backends import LedgerBackend


@pytest.fixture
def ledger(ledger_backend: LedgerBackend):
    with ledger_backend.open(create=True, budgets={"s1": (1.0, 1e-5)}) as opened:
        yield opened


def _make_ledger_with_entries(backend: LedgerBackend, n: int = 40) -> None:
    with backend.open(create=True, budgets={"s1": (1000.0, 0.0)}) as ledger:
        for i in range(n):
            ledger.charge("s1", f"w{i}", "laplace", 1.0, 0.0, bytes([i % 256]) * 500)


def test_the_ledger_satisfies_the_protocol(ledger) -> None:
    assert isinstance(ledger, PrivacyLedger)


# ----------------------------------------------------------------------------- charging


def test_charge_stores_the_charge_and_the_release(ledger) -> None:
    charge = ledger.charge("s1", "w0", "laplace", 0.25, 1e-6, b"\x00release\xff")

    assert isinstance(charge, Charge)
    assert (charge.stream_id, charge.window_id, charge.mechanism) == ("s1", "w0", "laplace")
    assert charge.cost == PrivacyCost(0.25, 1e-6)
    assert charge.release == b"\x00release\xff"
    assert not charge.published
    assert ledger.entries("s1") == [charge]
    assert ledger.lookup("s1", "w0", "laplace") == charge
    assert ledger.lookup("s1", "w1", "laplace") is None


def test_entry_ids_are_distinct_and_increasing(ledger) -> None:
    ids = [ledger.charge("s1", f"w{i}", "laplace", 0.1, 0.0, b"r").entry_id for i in range(5)]
    assert ids == sorted(set(ids))


def test_recharging_a_key_returns_the_stored_entry_and_bytes(ledger) -> None:
    first = ledger.charge("s1", "w0", "laplace", 0.25, 1e-6, b"first noise")

    # A replay recomputes the release with fresh noise (and here even a different cost).
    again = ledger.charge("s1", "w0", "laplace", 0.25, 1e-6, b"fresh noise")
    different_cost = ledger.charge("s1", "w0", "laplace", 0.5, 0.0, b"other noise")

    assert again == first
    assert different_cost == first
    assert again.release == b"first noise"
    assert ledger.entries("s1") == [first]
    assert ledger.spent("s1") == (0.25, 1e-6)


def test_the_key_includes_the_mechanism(ledger) -> None:
    a = ledger.charge("s1", "w0", "learner", 0.25, 0.0, b"hypothesis")
    b = ledger.charge("s1", "w0", "sanitizer", 0.25, 0.0, b"sanitized")
    assert a.entry_id != b.entry_id
    assert ledger.spent("s1") == (0.5, 0.0)


def test_refused_charge_raises_a_clear_error_and_is_counted(ledger) -> None:
    ledger.charge("s1", "w0", "laplace", 0.75, 0.0, b"r0")

    with pytest.raises(BudgetExhaustedError) as refused:
        ledger.charge("s1", "w1", "laplace", 0.5, 0.0, b"r1")

    message = str(refused.value)
    assert "'s1'" in message and "'w1'" in message and "exceed" in message
    assert "epsilon=0.5" in message and "spent epsilon=0.75 of 1" in message
    assert isinstance(refused.value, LedgerError)
    assert refused.value.requested == (0.5, 0.0)
    assert refused.value.spent == (0.75, 0.0)
    assert refused.value.budget == (1.0, 1e-5)
    assert ledger.refusals("s1") == 1
    assert ledger.spent("s1") == (0.75, 0.0)
    assert ledger.lookup("s1", "w1", "laplace") is None
    assert [c.window_id for c in ledger.unpublished()] == ["w0"]


def test_delta_budget_is_enforced_too(ledger) -> None:
    ledger.charge("s1", "w0", "gaussian", 0.1, 6e-6, b"r0")
    with pytest.raises(BudgetExhaustedError, match="delta"):
        ledger.charge("s1", "w1", "gaussian", 0.1, 6e-6, b"r1")
    assert ledger.refusals("s1") == 1


def test_a_refusal_does_not_block_a_smaller_charge(ledger) -> None:
    with pytest.raises(BudgetExhaustedError):
        ledger.charge("s1", "big", "laplace", 1.5, 0.0, b"r")
    ledger.charge("s1", "small", "laplace", 1.0, 0.0, b"r")
    assert ledger.remaining("s1") == (0.0, 1e-5)


def test_refusals_are_durable(ledger_backend: LedgerBackend, ledger) -> None:
    for window in ("w0", "w1"):
        with pytest.raises(BudgetExhaustedError):
            ledger.charge("s1", window, "laplace", 2.0, 0.0, b"r")
    ledger.close()
    with ledger_backend.open() as reopened:
        assert reopened.refusals("s1") == 2


# ----------------------------------------------------------------------------- spent / remaining


def test_spent_and_remaining_are_exact_decimal_sums(ledger_backend: LedgerBackend) -> None:
    with ledger_backend.open(create=True, budgets={"a": (0.3, 0.0), "b": (1.0, 0.0)}) as ledger:
        # In floats 0.1 + 0.2 > 0.3; the ledger reads both as decimals and must accept.
        ledger.charge("a", "w0", "laplace", 0.1, 0.0, b"r")
        ledger.charge("a", "w1", "laplace", 0.2, 0.0, b"r")
        assert ledger.spent("a") == (0.3, 0.0)
        assert ledger.remaining("a") == (0.0, 0.0)

        for i in range(10):
            ledger.charge("b", f"w{i}", "laplace", 0.1, 0.0, b"r")
        assert ledger.spent("b") == (1.0, 0.0)
        with pytest.raises(BudgetExhaustedError):
            ledger.charge("b", "w10", "laplace", 0.1, 0.0, b"r")
        # A zero-cost charge still fits a budget that is spent exactly.
        ledger.charge("b", "free", "identity", 0, 0, b"r")
        assert len(ledger.entries("b")) == 11


def test_exact_and_numpy_numbers_are_accepted(ledger) -> None:
    ledger.charge("s1", "w0", "laplace", Fraction(1, 10), Decimal("1e-6"), b"r")
    ledger.charge("s1", "w1", "laplace", np.float64(0.2), np.int64(0), b"r")
    ledger.charge("s1", "w2", "laplace", 0, 0, b"r")
    assert ledger.spent("s1") == (0.3, 1e-6)
    assert all(type(c.epsilon) is float for c in ledger.entries("s1"))


def test_streams_are_accounted_separately(ledger) -> None:
    ledger.set_budget("s2", 2.0, 0.0)
    ledger.charge("s1", "w0", "laplace", 0.5, 1e-6, b"r")
    ledger.charge("s2", "w0", "laplace", 1.5, 0.0, b"r")
    assert ledger.spent("s1") == (0.5, 1e-6)
    assert ledger.spent("s2") == (1.5, 0.0)
    assert ledger.remaining("s1") == (0.5, 9e-6)
    assert ledger.remaining("s2") == (0.5, 0.0)
    assert ledger.streams() == ["s1", "s2"]
    assert [c.window_id for c in ledger.entries("s2")] == ["w0"]


def test_unknown_stream_is_a_clear_error(ledger) -> None:
    for call in (
        lambda: ledger.charge("nope", "w0", "laplace", 0.1, 0.0, b"r"),
        lambda: ledger.spent("nope"),
        lambda: ledger.remaining("nope"),
        lambda: ledger.entries("nope"),
        lambda: ledger.refusals("nope"),
    ):
        with pytest.raises(UnknownStreamError, match="'nope'"):
            call()


@pytest.mark.parametrize(
    ("epsilon", "delta", "error"),
    [
        (-0.1, 0.0, ValueError),
        (float("nan"), 0.0, ValueError),
        (float("inf"), 0.0, ValueError),
        (0.1, 1.5, ValueError),
        (0.1, -1e-9, ValueError),
        (True, 0.0, TypeError),
        ("0.1", 0.0, TypeError),
    ],
)
def test_invalid_costs_are_rejected(ledger, epsilon: object, delta: object, error: type) -> None:
    with pytest.raises(error):
        ledger.charge("s1", "w0", "laplace", epsilon, delta, b"r")  # type: ignore[arg-type]
    assert ledger.entries("s1") == []
    assert ledger.refusals("s1") == 0


def test_invalid_keys_and_release_are_rejected(ledger) -> None:
    with pytest.raises(TypeError):
        ledger.charge("s1", "", "laplace", 0.1, 0.0, b"r")
    with pytest.raises(TypeError):
        ledger.charge("s1", 3, "laplace", 0.1, 0.0, b"r")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ledger.charge("s1", "w0", "laplace", 0.1, 0.0, "not bytes")  # type: ignore[arg-type]
    assert ledger.entries("s1") == []


# ----------------------------------------------------------------------------- outbox


def test_outbox_lists_unpublished_until_marked(ledger) -> None:
    ledger.set_budget("s2", 1.0, 0.0)
    c0 = ledger.charge("s1", "w0", "laplace", 0.1, 0.0, b"r0")
    c1 = ledger.charge("s2", "w0", "laplace", 0.1, 0.0, b"r1")
    c2 = ledger.charge("s1", "w1", "laplace", 0.1, 0.0, b"r2")

    assert [c.entry_id for c in ledger.unpublished()] == [c0.entry_id, c1.entry_id, c2.entry_id]
    assert [c.release for c in ledger.unpublished("s1")] == [b"r0", b"r2"]

    ledger.mark_published(c0.entry_id)
    assert [c.entry_id for c in ledger.unpublished()] == [c1.entry_id, c2.entry_id]
    ledger.mark_published(c1.entry_id)
    ledger.mark_published(c2.entry_id)
    assert ledger.unpublished() == []

    published = ledger.lookup("s1", "w0", "laplace")
    assert published is not None and published.published
    # Marking again is harmless and keeps the first publication time.
    ledger.mark_published(c0.entry_id)
    assert ledger.lookup("s1", "w0", "laplace") == published
    # Publication does not change the spend.
    assert ledger.spent("s1") == (0.2, 0.0)


def test_recharging_a_published_key_returns_it_published(ledger) -> None:
    charge = ledger.charge("s1", "w0", "laplace", 0.1, 0.0, b"r0")
    ledger.mark_published(charge.entry_id)
    again = ledger.charge("s1", "w0", "laplace", 0.1, 0.0, b"new")
    assert again.entry_id == charge.entry_id and again.published and again.release == b"r0"
    assert ledger.unpublished() == []


def test_mark_published_of_an_unknown_entry_raises(ledger) -> None:
    with pytest.raises(UnknownEntryError, match="12345"):
        ledger.mark_published(12345)


def test_state_survives_reopening(ledger_backend: LedgerBackend, ledger) -> None:
    c0 = ledger.charge("s1", "w0", "laplace", 0.25, 1e-6, b"r0")
    c1 = ledger.charge("s1", "w1", "laplace", 0.25, 0.0, b"r1")
    ledger.mark_published(c0.entry_id)
    entries = ledger.entries("s1")
    ledger.close()

    with ledger_backend.open() as reopened:
        assert reopened.entries("s1") == entries
        assert [c.entry_id for c in reopened.unpublished()] == [c1.entry_id]
        assert reopened.spent("s1") == (0.5, 1e-6)
        assert reopened.budget("s1") == (1.0, 1e-5)
        # The next entry id is new, never a reused one.
        c2 = reopened.charge("s1", "w2", "laplace", 0.25, 0.0, b"r2")
        assert c2.entry_id > c1.entry_id


# ----------------------------------------------------------------------------- budget changes


def test_raising_the_budget_keeps_the_spend(ledger) -> None:
    ledger.charge("s1", "w0", "laplace", 1.0, 0.0, b"r")
    with pytest.raises(BudgetExhaustedError):
        ledger.charge("s1", "w1", "laplace", 0.5, 0.0, b"r")
    ledger.set_budget("s1", 2.0, 1e-5)
    assert ledger.spent("s1") == (1.0, 0.0)
    assert ledger.remaining("s1") == (1.0, 1e-5)
    ledger.charge("s1", "w1", "laplace", 0.5, 0.0, b"r")
    assert ledger.spent("s1") == (1.5, 0.0)


def test_lowering_the_budget_below_the_spend_exhausts_the_stream(ledger) -> None:
    first = ledger.charge("s1", "w0", "laplace", 0.6, 0.0, b"r0")
    ledger.set_budget("s1", 0.5, 1e-5)

    assert ledger.spent("s1") == (0.6, 0.0)
    assert ledger.remaining("s1") == (0.0, 1e-5)
    with pytest.raises(BudgetExhaustedError):
        ledger.charge("s1", "w1", "laplace", 0.0, 0.0, b"r1")
    # A replay of a window charged before the change still gets its stored release.
    assert ledger.charge("s1", "w0", "laplace", 0.6, 0.0, b"fresh") == first


def test_reopening_with_another_configured_budget_never_resets_the_spend(
    ledger_backend: LedgerBackend,
) -> None:
    with ledger_backend.open(create=True, budgets={"s1": (1.0, 0.0)}) as ledger:
        ledger.charge("s1", "w0", "laplace", 0.75, 0.0, b"r")

    with ledger_backend.open(budgets={"s1": (5.0, 0.0)}) as ledger:
        assert ledger.budget("s1") == (5.0, 0.0)
        assert ledger.spent("s1") == (0.75, 0.0)
    with ledger_backend.open(create=True, budgets={"s1": (0.5, 0.0)}) as ledger:
        assert ledger.spent("s1") == (0.75, 0.0)
        assert ledger.remaining("s1") == (0.0, 0.0)
    with ledger_backend.open(budgets={"s1": (0.5, 0.0)}) as ledger:
        pass  # the same configuration again: no new history row

    assert ledger_backend.budget_history() == ["1", "5", "1/2"]


# ----------------------------------------------------------------------------- opening and checking


def test_opening_a_missing_ledger_without_create_is_an_error(ledger_backend: LedgerBackend) -> None:
    with pytest.raises(LedgerMissingError, match=re.escape(ledger_backend.location)):
        ledger_backend.open()
    # Nothing was created by the refused attempt: it is still missing.
    with pytest.raises(LedgerMissingError):
        ledger_backend.open(budgets={"s1": (1.0, 0.0)})
    with ledger_backend.open(create=True, budgets={"s1": (1.0, 0.0)}) as ledger:
        assert ledger.spent("s1") == (0.0, 0.0)
    ledger_backend.open().close()  # once created, it opens without create


def test_another_applications_tables_are_corrupt(ledger_backend: LedgerBackend) -> None:
    ledger_backend.make_foreign()
    for create in (False, True):
        with pytest.raises(LedgerCorruptError, match=re.escape(ledger_backend.location)):
            ledger_backend.open(create=create)


def test_a_newer_schema_version_is_corrupt(ledger_backend: LedgerBackend) -> None:
    ledger_backend.open(create=True).close()
    ledger_backend.set_version(SCHEMA_VERSION + 1)
    for create in (False, True):
        with pytest.raises(LedgerCorruptError, match=rf"schema version {SCHEMA_VERSION + 1}"):
            ledger_backend.open(create=create)


def test_missing_ledger_tables_are_corrupt(ledger_backend: LedgerBackend) -> None:
    ledger_backend.open(create=True).close()
    ledger_backend.drop_table("refusals")
    for create in (False, True):  # never re-created: a damaged ledger is not a new one
        with pytest.raises(LedgerCorruptError, match="refusals"):
            ledger_backend.open(create=create)


def test_a_spend_that_disagrees_with_the_charges_is_corrupt(ledger_backend: LedgerBackend) -> None:
    _make_ledger_with_entries(ledger_backend, n=3)
    ledger_backend.set_spend("s1", "0")  # someone "resets" the budget by hand
    with pytest.raises(
        LedgerCorruptError, match=r"'s1' records a spend of \(0, 0\) but its charges sum to \(3, 0\)"
    ):
        ledger_backend.open()


# ----------------------------------------------------------------------------- in memory, threads


def test_threads_sharing_one_ledger_never_overspend(ledger) -> None:
    ledger.set_budget("t", 2.0, 0.0)  # room for exactly 20 charges of 0.1

    def attempt(i: int) -> bool:
        try:
            ledger.charge("t", f"w{i}", "laplace", 0.1, 0.0, b"r")
        except BudgetExhaustedError:
            return False
        return True

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(attempt, range(50)))
    assert sum(results) == 20
    assert ledger.spent("t") == (2.0, 0.0)
    assert ledger.refusals("t") == 30


def test_a_closed_ledger_raises_a_ledger_error(ledger_backend: LedgerBackend) -> None:
    ledger = ledger_backend.open(create=True, budgets={"s1": (1.0, 0.0)})
    ledger.close()
    ledger.close()  # idempotent
    with pytest.raises(LedgerError):
        ledger.spent("s1")


def test_release_built_from_its_receipt_states_entry_and_remaining_budget(ledger) -> None:
    """A release may be a function of its charge, so its certificate can name both exactly."""
    ledger.set_budget("s", 1.0, 0.0)
    seen: list[ChargeReceipt] = []

    def release(receipt: ChargeReceipt) -> bytes:
        seen.append(receipt)
        return f"entry={receipt.entry_id} left={receipt.remaining.epsilon:.2f}".encode()

    first = ledger.charge("s", "w0", "m", 0.25, 0.0, release)
    second = ledger.charge("s", "w1", "m", 0.25, 0.0, release)
    assert first.release == f"entry={first.entry_id} left=0.75".encode()
    assert second.release == f"entry={second.entry_id} left=0.50".encode()
    # A replay of a charged key neither calls the function again nor changes the bytes.
    assert ledger.charge("s", "w0", "m", 0.25, 0.0, release).release == first.release
    assert len(seen) == 2
    assert ledger.lookup("s", "w1", "m").release == second.release


def test_latest_published_is_the_last_published_charge_of_the_mechanisms(ledger) -> None:
    assert ledger.latest_published("s1") is None
    a = ledger.charge("s1", "w0", "learner:generic", 0.1, 0.0, b"a")
    b = ledger.charge("s1", "w0", "sanitizer:mwem", 0.1, 0.0, b"b")
    c = ledger.charge("s1", "w1", "learner:generic", 0.1, 0.0, b"c")
    for charge in (a, b):
        ledger.mark_published(charge.entry_id)
    assert ledger.latest_published("s1").entry_id == b.entry_id
    assert ledger.latest_published("s1", "learner:").entry_id == a.entry_id  # c is not published
    ledger.mark_published(c.entry_id)
    assert ledger.latest_published("s1", "learner:").release == b"c"
    assert ledger.latest_published("s1", "nothing") is None
    with pytest.raises(UnknownStreamError):
        ledger.latest_published("nope")
