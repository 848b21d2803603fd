"""Unit tests of the privacy ledger (real SQLite files in tmp_path; nothing mocked)."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from privstream.stream_app.store.sqlite_ledger import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    BudgetExhaustedError,
    Charge,
    LedgerCorruptError,
    LedgerError,
    LedgerMissingError,
    PrivacyCost,
    PrivacyLedger,
    SqliteLedger,
    UnknownEntryError,
    UnknownStreamError,
)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.sqlite3"


@pytest.fixture
def ledger(path: Path):
    with SqliteLedger.open(path, create_if_missing=True, budgets={"s1": (1.0, 1e-5)}) as opened:
        yield opened


def _make_ledger_with_entries(path: Path, n: int = 40) -> None:
    with SqliteLedger.open(path, create_if_missing=True, budgets={"s1": (1000.0, 0.0)}) as ledger:
        for i in range(n):
            ledger.charge("s1", f"w{i}", "laplace", 1.0, 0.0, bytes([i % 256]) * 500)


def test_sqlite_ledger_satisfies_the_protocol(ledger: SqliteLedger) -> None:
    assert isinstance(ledger, PrivacyLedger)


# ----------------------------------------------------------------------------- charging


def test_charge_stores_the_charge_and_the_release(ledger: SqliteLedger) -> None:
    charge = ledger.charge("s1", "w0", "laplace", 0.25, 1e-6, b"\x00release\xff")

    assert isinstance(charge, Charge)
    assert (charge.stream_id, charge.window_id, charge.mechanism) == ("s1", "w0", "laplace")
    assert charge.cost == PrivacyCost(0.25, 1e-6)
    assert charge.release == b"\x00release\xff"
    assert not charge.published
    assert ledger.entries("s1") == [charge]
    assert ledger.lookup("s1", "w0", "laplace") == charge
    assert ledger.lookup("s1", "w1", "laplace") is None


def test_entry_ids_are_distinct_and_increasing(ledger: SqliteLedger) -> None:
    ids = [ledger.charge("s1", f"w{i}", "laplace", 0.1, 0.0, b"r").entry_id for i in range(5)]
    assert ids == sorted(set(ids))


def test_recharging_a_key_returns_the_stored_entry_and_bytes(ledger: SqliteLedger) -> None:
    first = ledger.charge("s1", "w0", "laplace", 0.25, 1e-6, b"first noise")

    # A replay recomputes the release with fresh noise (and here even a different cost).
    again = ledger.charge("s1", "w0", "laplace", 0.25, 1e-6, b"fresh noise")
    different_cost = ledger.charge("s1", "w0", "laplace", 0.5, 0.0, b"other noise")

    assert again == first
    assert different_cost == first
    assert again.release == b"first noise"
    assert ledger.entries("s1") == [first]
    assert ledger.spent("s1") == (0.25, 1e-6)


def test_the_key_includes_the_mechanism(ledger: SqliteLedger) -> None:
    a = ledger.charge("s1", "w0", "learner", 0.25, 0.0, b"hypothesis")
    b = ledger.charge("s1", "w0", "sanitizer", 0.25, 0.0, b"sanitized")
    assert a.entry_id != b.entry_id
    assert ledger.spent("s1") == (0.5, 0.0)


def test_refused_charge_raises_a_clear_error_and_is_counted(ledger: SqliteLedger) -> None:
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


def test_delta_budget_is_enforced_too(ledger: SqliteLedger) -> None:
    ledger.charge("s1", "w0", "gaussian", 0.1, 6e-6, b"r0")
    with pytest.raises(BudgetExhaustedError, match="delta"):
        ledger.charge("s1", "w1", "gaussian", 0.1, 6e-6, b"r1")
    assert ledger.refusals("s1") == 1


def test_a_refusal_does_not_block_a_smaller_charge(ledger: SqliteLedger) -> None:
    with pytest.raises(BudgetExhaustedError):
        ledger.charge("s1", "big", "laplace", 1.5, 0.0, b"r")
    ledger.charge("s1", "small", "laplace", 1.0, 0.0, b"r")
    assert ledger.remaining("s1") == (0.0, 1e-5)


def test_refusals_are_durable(path: Path, ledger: SqliteLedger) -> None:
    for window in ("w0", "w1"):
        with pytest.raises(BudgetExhaustedError):
            ledger.charge("s1", window, "laplace", 2.0, 0.0, b"r")
    ledger.close()
    with SqliteLedger.open(path) as reopened:
        assert reopened.refusals("s1") == 2


# ----------------------------------------------------------------------------- spent / remaining


def test_spent_and_remaining_are_exact_decimal_sums(path: Path) -> None:
    with SqliteLedger.open(
        path, create_if_missing=True, budgets={"a": (0.3, 0.0), "b": (1.0, 0.0)}
    ) as ledger:
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


def test_exact_and_numpy_numbers_are_accepted(ledger: SqliteLedger) -> None:
    ledger.charge("s1", "w0", "laplace", Fraction(1, 10), Decimal("1e-6"), b"r")
    ledger.charge("s1", "w1", "laplace", np.float64(0.2), np.int64(0), b"r")
    ledger.charge("s1", "w2", "laplace", 0, 0, b"r")
    assert ledger.spent("s1") == (0.3, 1e-6)
    assert all(type(c.epsilon) is float for c in ledger.entries("s1"))


def test_streams_are_accounted_separately(ledger: SqliteLedger) -> None:
    ledger.set_budget("s2", 2.0, 0.0)
    ledger.charge("s1", "w0", "laplace", 0.5, 1e-6, b"r")
    ledger.charge("s2", "w0", "laplace", 1.5, 0.0, b"r")
    assert ledger.spent("s1") == (0.5, 1e-6)
    assert ledger.spent("s2") == (1.5, 0.0)
    assert ledger.remaining("s1") == (0.5, 9e-6)
    assert ledger.remaining("s2") == (0.5, 0.0)
    assert ledger.streams() == ["s1", "s2"]
    assert [c.window_id for c in ledger.entries("s2")] == ["w0"]


def test_unknown_stream_is_a_clear_error(ledger: SqliteLedger) -> None:
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
def test_invalid_costs_are_rejected(
    ledger: SqliteLedger, epsilon: object, delta: object, error: type
) -> None:
    with pytest.raises(error):
        ledger.charge("s1", "w0", "laplace", epsilon, delta, b"r")  # type: ignore[arg-type]
    assert ledger.entries("s1") == []
    assert ledger.refusals("s1") == 0


def test_invalid_keys_and_release_are_rejected(ledger: SqliteLedger) -> None:
    with pytest.raises(TypeError):
        ledger.charge("s1", "", "laplace", 0.1, 0.0, b"r")
    with pytest.raises(TypeError):
        ledger.charge("s1", 3, "laplace", 0.1, 0.0, b"r")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ledger.charge("s1", "w0", "laplace", 0.1, 0.0, "not bytes")  # type: ignore[arg-type]
    assert ledger.entries("s1") == []


# ----------------------------------------------------------------------------- outbox


def test_outbox_lists_unpublished_until_marked(ledger: SqliteLedger) -> None:
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


def test_recharging_a_published_key_returns_it_published(ledger: SqliteLedger) -> None:
    charge = ledger.charge("s1", "w0", "laplace", 0.1, 0.0, b"r0")
    ledger.mark_published(charge.entry_id)
    again = ledger.charge("s1", "w0", "laplace", 0.1, 0.0, b"new")
    assert again.entry_id == charge.entry_id and again.published and again.release == b"r0"
    assert ledger.unpublished() == []


def test_mark_published_of_an_unknown_entry_raises(ledger: SqliteLedger) -> None:
    with pytest.raises(UnknownEntryError, match="12345"):
        ledger.mark_published(12345)


def test_state_survives_reopening(path: Path, ledger: SqliteLedger) -> None:
    c0 = ledger.charge("s1", "w0", "laplace", 0.25, 1e-6, b"r0")
    c1 = ledger.charge("s1", "w1", "laplace", 0.25, 0.0, b"r1")
    ledger.mark_published(c0.entry_id)
    entries = ledger.entries("s1")
    ledger.close()

    with SqliteLedger.open(path) as reopened:
        assert reopened.entries("s1") == entries
        assert [c.entry_id for c in reopened.unpublished()] == [c1.entry_id]
        assert reopened.spent("s1") == (0.5, 1e-6)
        assert reopened.budget("s1") == (1.0, 1e-5)
        # The next entry id is new, never a reused one.
        c2 = reopened.charge("s1", "w2", "laplace", 0.25, 0.0, b"r2")
        assert c2.entry_id > c1.entry_id


# ----------------------------------------------------------------------------- budget changes


def test_raising_the_budget_keeps_the_spend(ledger: SqliteLedger) -> None:
    ledger.charge("s1", "w0", "laplace", 1.0, 0.0, b"r")
    with pytest.raises(BudgetExhaustedError):
        ledger.charge("s1", "w1", "laplace", 0.5, 0.0, b"r")
    ledger.set_budget("s1", 2.0, 1e-5)
    assert ledger.spent("s1") == (1.0, 0.0)
    assert ledger.remaining("s1") == (1.0, 1e-5)
    ledger.charge("s1", "w1", "laplace", 0.5, 0.0, b"r")
    assert ledger.spent("s1") == (1.5, 0.0)


def test_lowering_the_budget_below_the_spend_exhausts_the_stream(ledger: SqliteLedger) -> None:
    first = ledger.charge("s1", "w0", "laplace", 0.6, 0.0, b"r0")
    ledger.set_budget("s1", 0.5, 1e-5)

    assert ledger.spent("s1") == (0.6, 0.0)
    assert ledger.remaining("s1") == (0.0, 1e-5)
    with pytest.raises(BudgetExhaustedError):
        ledger.charge("s1", "w1", "laplace", 0.0, 0.0, b"r1")
    # A replay of a window charged before the change still gets its stored release.
    assert ledger.charge("s1", "w0", "laplace", 0.6, 0.0, b"fresh") == first


def test_reopening_with_another_configured_budget_never_resets_the_spend(path: Path) -> None:
    with SqliteLedger.open(path, create_if_missing=True, budgets={"s1": (1.0, 0.0)}) as ledger:
        ledger.charge("s1", "w0", "laplace", 0.75, 0.0, b"r")

    with SqliteLedger.open(path, budgets={"s1": (5.0, 0.0)}) as ledger:
        assert ledger.budget("s1") == (5.0, 0.0)
        assert ledger.spent("s1") == (0.75, 0.0)
    with SqliteLedger.open(path, create_if_missing=True, budgets={"s1": (0.5, 0.0)}) as ledger:
        assert ledger.spent("s1") == (0.75, 0.0)
        assert ledger.remaining("s1") == (0.0, 0.0)
    with SqliteLedger.open(path, budgets={"s1": (0.5, 0.0)}) as ledger:
        pass  # the same configuration again: no new history row

    with sqlite3.connect(path) as raw:
        history = raw.execute("SELECT epsilon_budget FROM budget_changes ORDER BY change_id").fetchall()
    assert history == [("1",), ("5",), ("1/2",)]


# ----------------------------------------------------------------------------- opening the file


def test_opening_a_missing_file_without_create_is_an_error(path: Path) -> None:
    with pytest.raises(LedgerMissingError, match=str(path)):
        SqliteLedger.open(path)
    assert not path.exists()


def test_creating_needs_an_existing_directory(tmp_path: Path) -> None:
    target = tmp_path / "not-mounted" / "ledger.sqlite3"
    with pytest.raises(LedgerMissingError, match="directory"):
        SqliteLedger.open(target, create_if_missing=True)
    assert not target.parent.exists()


def test_a_created_ledger_is_marked_and_in_wal_mode(path: Path) -> None:
    SqliteLedger.open(path, create_if_missing=True).close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # Once created, it opens without create_if_missing.
    SqliteLedger.open(path).close()


def test_garbage_file_is_corrupt_and_left_untouched(path: Path) -> None:
    garbage = bytes(range(256)) * 32
    path.write_bytes(garbage)
    for create in (False, True):
        with pytest.raises(LedgerCorruptError, match=str(path)):
            SqliteLedger.open(path, create_if_missing=create)
    assert path.read_bytes() == garbage


def test_empty_file_is_corrupt_unless_creating(path: Path) -> None:
    path.touch()
    with pytest.raises(LedgerCorruptError, match="empty"):
        SqliteLedger.open(path)
    assert path.stat().st_size == 0
    # An empty file is what a crash during creation leaves; creating may finish the job.
    with SqliteLedger.open(path, create_if_missing=True, budgets={"s1": (1.0, 0.0)}) as ledger:
        assert ledger.spent("s1") == (0.0, 0.0)


def test_another_applications_database_is_corrupt(path: Path) -> None:
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE streams (stream_id TEXT PRIMARY KEY, other TEXT)")
        raw.execute("INSERT INTO streams VALUES ('s1', 'x')")
    raw.close()
    for create in (False, True):
        with pytest.raises(LedgerCorruptError, match=rf"{path}.*application_id"):
            SqliteLedger.open(path, create_if_missing=create)


def test_wrong_schema_version_is_corrupt(path: Path) -> None:
    SqliteLedger.open(path, create_if_missing=True).close()
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(LedgerCorruptError, match=rf"{path}.*schema version {SCHEMA_VERSION + 1}"):
        SqliteLedger.open(path)


def test_missing_ledger_tables_are_corrupt(path: Path) -> None:
    SqliteLedger.open(path, create_if_missing=True).close()
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE refusals")
    raw.close()
    with pytest.raises(LedgerCorruptError, match="refusals"):
        SqliteLedger.open(path)


def test_a_spend_that_disagrees_with_the_charges_is_corrupt(path: Path) -> None:
    _make_ledger_with_entries(path, n=3)
    with sqlite3.connect(path) as raw:  # someone "resets" the budget by hand
        raw.execute("UPDATE streams SET epsilon_spent = '0'")
    raw.close()
    with pytest.raises(
        LedgerCorruptError, match=r"'s1' records a spend of \(0, 0\) but its charges sum to \(3, 0\)"
    ):
        SqliteLedger.open(path)


def test_damaged_pages_fail_the_integrity_check(path: Path) -> None:
    _make_ledger_with_entries(path)
    data = bytearray(path.read_bytes())
    page_size = 4096
    assert len(data) > 4 * page_size  # closing checkpointed the WAL into the file
    # Overwrite the b-tree pages after the header page with garbage.
    for offset in range(page_size, len(data), page_size):
        data[offset : offset + 64] = b"\xa5" * 64
    path.write_bytes(bytes(data))
    with pytest.raises(LedgerCorruptError, match=str(path)):
        SqliteLedger.open(path)


# ----------------------------------------------------------------------------- in memory, threads


def test_in_memory_ledgers_are_private_and_behave_the_same() -> None:
    a = SqliteLedger.open(":memory:", budgets={"s1": (1.0, 0.0)})
    b = SqliteLedger.open(":memory:", budgets={"s1": (1.0, 0.0)})
    a.charge("s1", "w0", "laplace", 1.0, 0.0, b"r")
    with pytest.raises(BudgetExhaustedError):
        a.charge("s1", "w1", "laplace", 1.0, 0.0, b"r")
    assert b.spent("s1") == (0.0, 0.0)
    assert a.path == ":memory:"


def test_threads_sharing_one_ledger_never_overspend(ledger: SqliteLedger) -> None:
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


def test_a_closed_ledger_raises_a_ledger_error(path: Path) -> None:
    ledger = SqliteLedger.open(path, create_if_missing=True, budgets={"s1": (1.0, 0.0)})
    ledger.close()
    with pytest.raises(LedgerError):
        ledger.spent("s1")


def test_release_built_from_its_receipt_states_entry_and_remaining_budget():
    """A release may be a function of its charge, so its certificate can name both exactly."""
    from privstream.stream_app.store.sqlite_ledger import ChargeReceipt

    ledger = SqliteLedger.open(":memory:", budgets={"s": (1.0, 0.0)})
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
