"""What only the SQLite ledger has: a file (its header, WAL mode, damage), a directory, memory.

The behaviour both backends share is in ``test_ledger_contract.py``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from privstream.stream_app.store.sqlite_ledger import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    BudgetExhaustedError,
    LedgerCorruptError,
    LedgerMissingError,
    SqliteLedger,
)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.sqlite3"


def _make_ledger_with_entries(path: Path, n: int = 40) -> None:
    with SqliteLedger.open(path, create_if_missing=True, budgets={"s1": (1000.0, 0.0)}) as ledger:
        for i in range(n):
            ledger.charge("s1", f"w{i}", "laplace", 1.0, 0.0, bytes([i % 256]) * 500)


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


def test_in_memory_ledgers_are_private_and_behave_the_same() -> None:
    a = SqliteLedger.open(":memory:", budgets={"s1": (1.0, 0.0)})
    b = SqliteLedger.open(":memory:", budgets={"s1": (1.0, 0.0)})
    a.charge("s1", "w0", "laplace", 1.0, 0.0, b"r")
    with pytest.raises(BudgetExhaustedError):
        a.charge("s1", "w1", "laplace", 1.0, 0.0, b"r")
    assert b.spent("s1") == (0.0, 0.0)
    assert a.path == ":memory:"


# The schema of version 1 exactly as privstream 0.1.0 wrote it (before migrations were listed):
# frozen here, so that a change of the current schema cannot silently stop old files opening.
VERSION_1_FILE = """
PRAGMA application_id = 1347636295;
PRAGMA user_version = 1;
CREATE TABLE streams (stream_id TEXT PRIMARY KEY, epsilon_budget TEXT NOT NULL, delta_budget TEXT NOT NULL,
    epsilon_spent TEXT NOT NULL, delta_spent TEXT NOT NULL);
CREATE TABLE charges (entry_id INTEGER PRIMARY KEY AUTOINCREMENT,
    stream_id TEXT NOT NULL REFERENCES streams (stream_id), window_id TEXT NOT NULL, mechanism TEXT NOT NULL,
    epsilon TEXT NOT NULL, delta TEXT NOT NULL, release BLOB NOT NULL, charged_at TEXT NOT NULL,
    published_at TEXT, UNIQUE (stream_id, window_id, mechanism));
CREATE INDEX charges_outbox ON charges (entry_id) WHERE published_at IS NULL;
CREATE TABLE refusals (refusal_id INTEGER PRIMARY KEY, stream_id TEXT NOT NULL REFERENCES streams (stream_id),
    window_id TEXT NOT NULL, mechanism TEXT NOT NULL, epsilon TEXT NOT NULL, delta TEXT NOT NULL,
    refused_at TEXT NOT NULL);
CREATE INDEX refusals_by_stream ON refusals (stream_id);
CREATE TABLE budget_changes (change_id INTEGER PRIMARY KEY,
    stream_id TEXT NOT NULL REFERENCES streams (stream_id), epsilon_budget TEXT NOT NULL,
    delta_budget TEXT NOT NULL, changed_at TEXT NOT NULL);
INSERT INTO streams VALUES ('s1', '1', '0', '3/10', '0');
INSERT INTO budget_changes VALUES (1, 's1', '1', '0', '2026-11-01T00:00:00+00:00');
INSERT INTO charges VALUES (7, 's1', 'w0', 'laplace', '3/10', '0', X'0102', '2026-11-01T00:00:01+00:00',
    NULL);
INSERT INTO refusals VALUES (1, 's1', 'w1', 'laplace', '1', '0', '2026-11-01T00:00:02+00:00');
"""


def test_a_ledger_file_made_by_privstream_0_1_opens_with_its_history(path: Path) -> None:
    raw = sqlite3.connect(path)
    raw.executescript(VERSION_1_FILE)
    raw.close()
    assert APPLICATION_ID == 1347636295

    with SqliteLedger.open(path, budgets={"s1": (1.0, 0.0)}) as ledger:
        assert ledger.spent("s1") == (0.3, 0.0)
        assert ledger.refusals("s1") == 1
        [charge] = ledger.unpublished()
        assert (charge.entry_id, charge.release) == (7, b"\x01\x02")
        assert ledger.charge("s1", "w0", "laplace", 0.3, 0.0, b"fresh").release == b"\x01\x02"
        assert ledger.charge("s1", "w2", "laplace", 0.7, 0.0, b"r").entry_id > 7
        with pytest.raises(BudgetExhaustedError):
            ledger.charge("s1", "w3", "laplace", 0.1, 0.0, b"r")
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    raw.close()
