"""What only the PostgreSQL ledger has: a server that can go away, connections that can be cut,
logins, TLS options, row locks. The behaviour both backends share is in ``test_ledger_contract.py``.

The server is real (``conftest.py``); connections are cut with ``pg_terminate_backend`` and the
server is crashed with SIGKILL and restarted on the same data, as an outage would.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from privstream.agents.ledger_port import (
    ChargeReceipt,
    LedgerBusyError,
    LedgerCorruptError,
    LedgerError,
    LedgerMissingError,
    LedgerUnavailableError,
)
from privstream.stream_app.store.pg_server import PostgresServer
from privstream.stream_app.store.postgres_db import PostgresConfig
from privstream.stream_app.store.postgres_ledger import PostgresLedger
from privstream.stream_app.store.postgres_state import PostgresStateStore, StateStoreError


def _config(server: PostgresServer, url: str, **options: object) -> PostgresConfig:
    return PostgresConfig(url, password=server.password, **options)  # type: ignore[arg-type]


def _terminate_privstream_connections(server: PostgresServer, database: str) -> int:
    """Cut every connection privstream holds to ``database`` (an administrator's kill, a proxy reset)."""
    with server.connect() as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND application_name = 'privstream'",
            (database,),
        ).fetchall()
    return len(rows)


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A server of this test's own, to crash and restart without disturbing the others."""
    from privstream.stream_app.store.pg_server import PostgresUnavailableError

    server = PostgresServer(durable=False)
    try:
        server.start()
    except PostgresUnavailableError as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


# ----------------------------------------------------------------------------- connections cut


def test_a_connection_cut_mid_charge_leaves_one_whole_charge(pg_server: PostgresServer, pg_database: str):
    database = pg_database.rsplit("/", 1)[1]
    ledger = PostgresLedger.open(
        _config(pg_server, pg_database), create_if_missing=True, budgets={"s": (1.0, 0.0)}
    )
    calls: list[int] = []

    def release(receipt: ChargeReceipt) -> bytes:
        calls.append(receipt.entry_id)
        if len(calls) == 1:  # inside the transaction, after the row lock: cut the connection
            assert _terminate_privstream_connections(pg_server, database) >= 1
        return f"entry {receipt.entry_id}".encode()

    charge = ledger.charge("s", "w0", "laplace", 0.25, 0.0, release)

    assert len(calls) == 2  # the transaction ran again on a fresh connection
    assert charge.release == f"entry {charge.entry_id}".encode() and charge.entry_id == calls[1]
    assert [c.entry_id for c in ledger.entries("s")] == [charge.entry_id]
    assert ledger.spent("s") == (0.25, 0.0)
    ledger.close()
    with PostgresLedger.open(_config(pg_server, pg_database)) as reopened:  # and the check at open agrees
        assert reopened.spent("s") == (0.25, 0.0)


def test_without_retries_a_cut_connection_is_a_clear_error_and_nothing_is_stored(
    pg_server: PostgresServer, pg_database: str
):
    database = pg_database.rsplit("/", 1)[1]
    ledger = PostgresLedger.open(
        _config(pg_server, pg_database, retry_seconds=0), create_if_missing=True, budgets={"s": (1.0, 0.0)}
    )

    def cut(receipt: ChargeReceipt) -> bytes:
        _terminate_privstream_connections(pg_server, database)
        return b"never stored"

    with pytest.raises(LedgerUnavailableError, match=re.escape(pg_database)):
        ledger.charge("s", "w0", "laplace", 0.25, 0.0, cut)
    assert ledger.entries("s") == [] and ledger.spent("s") == (0.0, 0.0)  # nothing half-done
    assert ledger.charge("s", "w0", "laplace", 0.25, 0.0, b"ok").release == b"ok"  # the key is free
    ledger.close()


def test_pooled_connections_cut_while_idle_are_replaced(pg_server: PostgresServer, pg_database: str):
    database = pg_database.rsplit("/", 1)[1]
    ledger = PostgresLedger.open(
        _config(pg_server, pg_database), create_if_missing=True, budgets={"s": (1.0, 0.0)}
    )
    store = PostgresStateStore(_config(pg_server, pg_database))
    ledger.charge("s", "w0", "laplace", 0.25, 0.0, b"r0")
    store.append("s", 0, 0, 5, 1, None, None)
    assert _terminate_privstream_connections(pg_server, database) >= 2

    assert ledger.charge("s", "w1", "laplace", 0.25, 0.0, b"r1").release == b"r1"
    assert ledger.spent("s") == (0.5, 0.0)
    assert store.append("s", 0, 1, 6, 0, None, None) == 1
    assert store.count_window("s", 0, 2).xs.tolist() == [5, 6]
    ledger.close()
    store.close()


# ----------------------------------------------------------------------------- the server goes away


def test_a_server_crash_mid_charge_loses_nothing_once_it_is_back(own_server: PostgresServer):
    url = own_server.create_database("ledger")
    ledger = PostgresLedger.open(
        _config(own_server, url, retry_seconds=60), create_if_missing=True, budgets={"s": (1.0, 0.0)}
    )
    before = ledger.charge("s", "w0", "laplace", 0.25, 0.0, b"committed before the crash")
    restarted = threading.Event()

    def crash_then_restart() -> None:
        time.sleep(1.0)
        own_server.start()  # same data directory, same port
        restarted.set()

    calls: list[int] = []

    def release(receipt: ChargeReceipt) -> bytes:
        calls.append(receipt.entry_id)
        if len(calls) == 1:  # mid-transaction: the server dies (SIGKILL), and comes back later
            own_server.kill()
            threading.Thread(target=crash_then_restart, daemon=True).start()
        return b"the release"

    charge = ledger.charge("s", "w1", "laplace", 0.25, 0.0, release)

    assert restarted.wait(60) and len(calls) >= 2
    assert charge.release == b"the release"
    entries = ledger.entries("s")
    assert [(c.window_id, c.release) for c in entries] == [
        ("w0", b"committed before the crash"),
        ("w1", b"the release"),
    ]
    assert entries[0] == before
    assert ledger.spent("s") == (0.5, 0.0)
    ledger.close()


def test_a_server_down_longer_than_the_retry_time_is_a_clear_error(own_server: PostgresServer):
    url = own_server.create_database("ledger")
    ledger = PostgresLedger.open(
        _config(own_server, url, retry_seconds=1.0, connect_timeout=1),
        create_if_missing=True,
        budgets={"s": (1.0, 0.0)},
    )
    ledger.charge("s", "w0", "laplace", 0.25, 0.0, b"r0")

    def crash(receipt: ChargeReceipt) -> bytes:
        own_server.kill()
        return b"never stored"

    with pytest.raises(LedgerUnavailableError, match="unreachable"):
        ledger.charge("s", "w1", "laplace", 0.25, 0.0, crash)
    with pytest.raises(LedgerUnavailableError):
        ledger.spent("s")
    with pytest.raises(LedgerUnavailableError, match="cannot connect"):  # a worker starting now
        PostgresLedger.open(_config(own_server, url))

    own_server.start()
    # The same ledger object works again once its pool has reconnected (no restart needed).
    deadline = time.monotonic() + 60
    while True:
        try:
            entries = ledger.entries("s")
            break
        except LedgerUnavailableError:
            assert time.monotonic() < deadline, "the ledger did not reconnect to the restarted server"
    # Whole or nothing: the interrupted charge left no trace, the one before is intact.
    assert [c.window_id for c in entries] == ["w0"]
    assert ledger.spent("s") == (0.25, 0.0)
    assert ledger.charge("s", "w1", "laplace", 0.25, 0.0, b"r1").release == b"r1"
    ledger.close()


# ----------------------------------------------------------------------------- opening


def test_a_missing_database_is_a_missing_ledger_even_with_create(pg_server: PostgresServer):
    url = pg_server.url("no_such_database")
    for create in (False, True):
        with pytest.raises(LedgerMissingError, match=r"no_such_database.*database does not exist"):
            PostgresLedger.open(_config(pg_server, url), create_if_missing=create)


def test_a_wrong_password_is_a_clear_error(pg_server: PostgresServer, pg_database: str):
    with pytest.raises(LedgerError, match="password authentication failed") as failed:
        PostgresLedger.open(PostgresConfig(pg_database, password="wrong"))
    assert not isinstance(failed.value, LedgerUnavailableError)  # a retry would not help
    assert "password=" not in str(failed.value)  # the secret is not echoed


def test_a_password_in_the_url_is_refused(pg_server: PostgresServer, pg_database: str):
    with pytest.raises(ValueError, match="not in the URL"):
        PostgresConfig(pg_database.replace("privstream@", f"privstream:{pg_server.password}@"))


def test_tls_options_reach_the_connection(pg_server: PostgresServer, pg_database: str):
    # The test server speaks no TLS: demanding it must fail, naming TLS, not silently connect.
    with pytest.raises(LedgerError, match="SSL"):
        PostgresLedger.open(_config(pg_server, pg_database, sslmode="require"))
    with pytest.raises(LedgerError, match="SSL"):
        PostgresLedger.open(_config(pg_server, pg_database + "?sslmode=require"))
    # The setting overrides the URL's mode.
    PostgresLedger.open(
        _config(pg_server, pg_database + "?sslmode=require", sslmode="disable"), create_if_missing=True
    ).close()


def test_a_foreign_migrations_table_is_corrupt(pg_server: PostgresServer, pg_database: str):
    with pg_server.connect(pg_database.rsplit("/", 1)[1]) as conn:
        conn.execute("CREATE TABLE privstream_migrations (id SERIAL PRIMARY KEY, name TEXT)")
    with pytest.raises(LedgerCorruptError, match="privstream_migrations is not privstream's"):
        PostgresLedger.open(_config(pg_server, pg_database), create_if_missing=True)


def test_the_ledger_and_the_state_share_a_database_and_its_version_table(
    pg_server: PostgresServer, pg_database: str
):
    PostgresLedger.open(_config(pg_server, pg_database), create_if_missing=True).close()
    PostgresStateStore(_config(pg_server, pg_database)).close()
    with pg_server.connect(pg_database.rsplit("/", 1)[1]) as conn:
        rows = conn.execute("SELECT component, version FROM privstream_migrations ORDER BY 1, 2").fetchall()
    assert rows == [
        ("ledger", 1),
        ("ledger", 2),
        ("ledger", 3),
        ("ledger", 4),
        ("ledger", 5),
        ("ledger", 6),
        ("ledger", 7),
        ("state", 1),
        ("state", 2),
        ("state", 3),
        ("state", 4),
        ("state", 5),
    ]


def test_a_state_store_with_foreign_tables_is_an_error(pg_server: PostgresServer, pg_database: str):
    with pg_server.connect(pg_database.rsplit("/", 1)[1]) as conn:
        conn.execute("CREATE TABLE state_examples (id INTEGER)")
    with pytest.raises(StateStoreError, match="state_examples"):
        PostgresStateStore(_config(pg_server, pg_database))


# ----------------------------------------------------------------------------- locks


def test_a_stream_locked_too_long_is_a_busy_error(pg_server: PostgresServer, pg_database: str):
    ledger = PostgresLedger.open(
        _config(pg_server, pg_database, lock_timeout=0.3),
        create_if_missing=True,
        budgets={"s": (1.0, 0.0), "other": (1.0, 0.0)},
    )
    with psycopg.connect(pg_database, password=pg_server.password) as holder:  # a hung worker's transaction
        holder.execute("SELECT * FROM ledger_streams WHERE stream_id = 's' FOR UPDATE")
        with pytest.raises(LedgerBusyError, match="locked"):
            ledger.charge("s", "w0", "laplace", 0.25, 0.0, b"r")
        # Another stream's charges do not wait for that lock.
        assert ledger.charge("other", "w0", "laplace", 0.25, 0.0, b"r").release == b"r"
    assert ledger.charge("s", "w0", "laplace", 0.25, 0.0, b"r").release == b"r"
    ledger.close()


def test_a_worker_frozen_inside_a_transaction_loses_its_locks(pg_server: PostgresServer, pg_database: str):
    """A worker stopped (SIGSTOP, a long GC pause, a cut network) between two statements of a
    transaction: the server ends its session after ``idle_in_transaction_timeout`` and another
    worker's charge goes through instead of waiting for ever."""
    config = _config(pg_server, pg_database, lock_timeout=5.0, idle_in_transaction_timeout=0.5)
    frozen = PostgresLedger.open(config, create_if_missing=True, budgets={"s": (1.0, 0.0)})
    other = PostgresLedger.open(config)
    with frozen._backend.db._pool.connection() as conn:  # the frozen worker's own pooled session
        assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0] == "500ms"
        # its session is ended by the server: the frozen worker's next statement fails
        with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout), conn.transaction():
            conn.execute("SELECT * FROM ledger_streams WHERE stream_id = 's' FOR UPDATE")
            time.sleep(1.5)  # frozen, holding the stream's row lock
            started = time.monotonic()
            assert other.charge("s", "w0", "laplace", 0.25, 0.0, b"r").release == b"r"
            assert time.monotonic() - started < 5.0  # not a busy error: the lock was gone
            conn.execute("SELECT 1")
    assert frozen.spent("s").epsilon == 0.25
    # The frozen worker wakes up inside its own charge: the server ended that session, the
    # transaction is run again on another connection, and the charge is made once.
    attempts = []

    def freezes_once(cur: object) -> None:  # the fence runs inside the charge's transaction
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            time.sleep(1.5)

    frozen.charge("s", "w1", "laplace", 0.25, 0.0, b"r", fence=freezes_once)
    assert len(attempts) == 2
    assert [e.window_id for e in frozen.entries("s")] == ["w0", "w1"] and frozen.spent("s").epsilon == 0.5
    frozen.close()
    other.close()
