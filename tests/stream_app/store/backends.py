"""The storage backends as the contract suites see them: open a store, and reach under it.

A contract test gets a :class:`LedgerBackend` (or :class:`StateBackend`) for SQLite or for
PostgreSQL and asserts the same behaviour on both. The few things a test must do *under* the
store's API (tamper with a spend, drop a table, read the budget history) are done here, once per
backend, in the backend's own SQL.

Child processes (concurrency and crash tests) open the same store from a JSON ``spec``
(:meth:`LedgerBackend.spec`, :func:`open_ledger_from_spec`), passed through a pipe or the
environment, never the command line (it holds the test server's password).
"""

from __future__ import annotations

import json
import os
import sqlite3
from fractions import Fraction
from pathlib import Path
from typing import Any

from privstream.stream_app.store.pg_server import PostgresServer
from privstream.stream_app.store.postgres_db import PostgresConfig
from privstream.stream_app.store.postgres_ledger import MIGRATIONS as POSTGRES_LEDGER_MIGRATIONS
from privstream.stream_app.store.postgres_ledger import PostgresLedger
from privstream.stream_app.store.postgres_state import MIGRATIONS as POSTGRES_STATE_MIGRATIONS
from privstream.stream_app.store.postgres_state import PostgresStateStore
from privstream.stream_app.store.sqlite_ledger import APPLICATION_ID as SQLITE_APPLICATION_ID
from privstream.stream_app.store.sqlite_ledger import MIGRATIONS as SQLITE_LEDGER_MIGRATIONS
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.store.sqlite_state import MIGRATIONS as SQLITE_STATE_MIGRATIONS
from privstream.stream_app.store.sqlite_state import SqliteStateStore

SPEC_ENV = "PRIVSTREAM_TEST_LEDGER_SPEC"
BACKENDS = ("sqlite", "postgresql")


class LedgerBackend:
    """Where one test's ledger lives, and how to open it and reach under it."""

    name: str
    location: str  # what error messages name: the file's path, the database's URL

    def open(self, *, create: bool = False, budgets: dict[str, tuple[float, float]] | None = None) -> Any:
        raise NotImplementedError

    def spec(self) -> str:
        """A JSON description a child process turns back into an open ledger."""
        raise NotImplementedError

    # --- under the API ------------------------------------------------------------------------
    def budget_history(self) -> list[str]:
        """The epsilon budgets recorded in the budget-change audit table, oldest first."""
        raise NotImplementedError

    def set_spend(self, stream_id: str, epsilon: str) -> None:
        """Overwrite a stream's stored epsilon spend (a hand "reset" of the budget)."""
        raise NotImplementedError

    def drop_table(self, table: str) -> None:
        """Drop one of the ledger's tables (named as in SQLite: 'refusals', ...)."""
        raise NotImplementedError

    def set_version(self, version: int) -> None:
        """Record another schema version than the code's."""
        raise NotImplementedError

    def make_foreign(self) -> None:
        """Fill the empty location with another application's table named like a ledger table."""
        raise NotImplementedError

    def write_version_1(self, stream_id: str, budget: str, charges: list[tuple[str, str]]) -> None:
        """Write a ledger as privstream's schema version 1 did (its own SQL, not today's code):
        one stream with an epsilon ``budget`` and completed, unpublished charges
        ``(window_id, epsilon)`` (rationals as text)."""
        raise NotImplementedError


class SqliteLedgerBackend(LedgerBackend):
    name = "sqlite"

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "ledger.sqlite3"
        self.location = str(self.path)

    def open(self, *, create: bool = False, budgets: dict[str, tuple[float, float]] | None = None) -> Any:
        return SqliteLedger.open(self.path, create_if_missing=create, budgets=budgets)

    def spec(self) -> str:
        return json.dumps({"kind": "sqlite", "path": str(self.path)})

    def _execute(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.path) as raw:
            rows = raw.execute(statement, params).fetchall()
        raw.close()
        return rows

    def budget_history(self) -> list[str]:
        return [r[0] for r in self._execute("SELECT epsilon_budget FROM budget_changes ORDER BY change_id")]

    def set_spend(self, stream_id: str, epsilon: str) -> None:
        self._execute("UPDATE streams SET epsilon_spent = ? WHERE stream_id = ?", (epsilon, stream_id))

    def drop_table(self, table: str) -> None:
        self._execute(f"DROP TABLE {table}")

    def set_version(self, version: int) -> None:
        self._execute(f"PRAGMA user_version = {version}")

    def make_foreign(self) -> None:
        self._execute("CREATE TABLE streams (stream_id TEXT PRIMARY KEY, other TEXT)")

    def write_version_1(self, stream_id: str, budget: str, charges: list[tuple[str, str]]) -> None:
        spent = sum((Fraction(eps) for _, eps in charges), Fraction(0))
        with sqlite3.connect(self.path) as raw:
            for statement in SQLITE_LEDGER_MIGRATIONS[0].statements:
                raw.execute(statement)
            raw.execute(f"PRAGMA application_id = {SQLITE_APPLICATION_ID}")
            raw.execute("PRAGMA user_version = 1")
            raw.execute("INSERT INTO streams VALUES (?, ?, '0', ?, '0')", (stream_id, budget, str(spent)))
            raw.execute(
                "INSERT INTO budget_changes (stream_id, epsilon_budget, delta_budget, changed_at) "
                "VALUES (?, ?, '0', '2026-01-02T03:04:05.000000+00:00')",
                (stream_id, budget),
            )
            raw.executemany(
                "INSERT INTO charges (stream_id, window_id, mechanism, epsilon, delta, release, charged_at) "
                "VALUES (?, ?, 'laplace', ?, '0', ?, '2026-01-02T03:04:06.000000+00:00')",
                [(stream_id, window, eps, window.encode()) for window, eps in charges],
            )
        raw.close()


class PostgresLedgerBackend(LedgerBackend):
    name = "postgresql"

    def __init__(self, server: PostgresServer, database: str) -> None:
        self.server = server
        self.url = server.create_database(database)
        self.database = database
        self.location = self.url

    @property
    def config(self) -> PostgresConfig:
        return PostgresConfig(self.url, password=self.server.password)

    def open(self, *, create: bool = False, budgets: dict[str, tuple[float, float]] | None = None) -> Any:
        return PostgresLedger.open(self.config, create_if_missing=create, budgets=budgets)

    def spec(self) -> str:
        return json.dumps({"kind": "postgresql", "url": self.url, "password": self.server.password})

    def _execute(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.server.connect(self.database) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else []

    def budget_history(self) -> list[str]:
        rows = self._execute("SELECT epsilon_budget FROM ledger_budget_changes ORDER BY change_id")
        return [r[0] for r in rows]

    def set_spend(self, stream_id: str, epsilon: str) -> None:
        self._execute(
            "UPDATE ledger_streams SET epsilon_spent = %s WHERE stream_id = %s", (epsilon, stream_id)
        )

    def drop_table(self, table: str) -> None:
        self._execute(f"DROP TABLE ledger_{table}")

    def set_version(self, version: int) -> None:
        self._execute("DELETE FROM privstream_migrations WHERE component = 'ledger'")
        self._execute(
            "INSERT INTO privstream_migrations (component, version, description) VALUES ('ledger', %s, 'x')",
            (version,),
        )

    def make_foreign(self) -> None:
        self._execute("CREATE TABLE ledger_streams (stream_id TEXT PRIMARY KEY, other TEXT)")

    def write_version_1(self, stream_id: str, budget: str, charges: list[tuple[str, str]]) -> None:
        spent = sum((Fraction(eps) for _, eps in charges), Fraction(0))
        self._execute(
            "CREATE TABLE privstream_migrations (component TEXT NOT NULL, version INTEGER NOT NULL, "
            "description TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now(), "
            "PRIMARY KEY (component, version))"
        )
        for statement in POSTGRES_LEDGER_MIGRATIONS[0].statements:
            self._execute(statement)
        self._execute(
            "INSERT INTO privstream_migrations (component, version, description) "
            "VALUES ('ledger', 1, 'streams, charges (with the outbox), refusals, budget changes')"
        )
        self._execute(
            "INSERT INTO ledger_streams VALUES (%s, %s, '0', %s, '0')", (stream_id, budget, str(spent))
        )
        self._execute(
            "INSERT INTO ledger_budget_changes (stream_id, epsilon_budget, delta_budget, "
            "changed_at) VALUES (%s, %s, '0', '2026-01-02T03:04:05+00:00')",
            (stream_id, budget),
        )
        for window, eps in charges:
            self._execute(
                "INSERT INTO ledger_charges (stream_id, window_id, mechanism, epsilon, delta, release, "
                "charged_at) VALUES (%s, %s, 'laplace', %s, '0', %s, '2026-01-02T03:04:06+00:00')",
                (stream_id, window, eps, window.encode()),
            )


def open_ledger_from_spec(
    spec: str | None = None, *, create: bool = False, budgets: dict[str, tuple[float, float]] | None = None
) -> Any:
    """In a child process: open the ledger a :meth:`LedgerBackend.spec` describes (by default
    the one in ``$PRIVSTREAM_TEST_LEDGER_SPEC``)."""
    where = json.loads(spec if spec is not None else os.environ[SPEC_ENV])
    if where["kind"] == "sqlite":
        return SqliteLedger.open(where["path"], create_if_missing=create, budgets=budgets)
    config = PostgresConfig(where["url"], password=where["password"])
    return PostgresLedger.open(config, create_if_missing=create, budgets=budgets)


# --------------------------------------------------------------------------- state stores


class StateBackend:
    """Where one test's state store lives."""

    name: str

    def open(self) -> Any:
        raise NotImplementedError

    def write_version_1(self, generation: str, examples: list[tuple[int, int]]) -> None:
        """Build a store of schema version 1 (before the release tree) and fill it as that version's
        code did: a generation, and examples ``(offset, x)`` of stream "a", partition 0."""
        raise NotImplementedError


class SqliteStateBackend(StateBackend):
    name = "sqlite"

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "state.sqlite3"

    def open(self) -> Any:
        return SqliteStateStore(self.path)

    def write_version_1(self, generation: str, examples: list[tuple[int, int]]) -> None:
        with sqlite3.connect(self.path) as raw:
            for statement in SQLITE_STATE_MIGRATIONS[0].statements:
                raw.execute(statement)
            raw.execute("PRAGMA user_version = 1")
            raw.execute("INSERT INTO meta VALUES ('generation', ?)", (generation,))
            raw.execute("INSERT INTO stream_seq VALUES ('a', ?)", (len(examples),))
            raw.execute("INSERT INTO positions VALUES ('a', 0, ?)", (examples[-1][0] + 1,))
            raw.executemany(
                "INSERT INTO examples VALUES ('a', ?, 0, ?, 0, ?, 1, NULL, NULL)",
                [(seq, offset, x) for seq, (offset, x) in enumerate(examples)],
            )
        raw.close()


class PostgresStateBackend(StateBackend):
    name = "postgresql"

    def __init__(self, server: PostgresServer, database: str) -> None:
        self.server = server
        self.url = server.create_database(database)
        self.database = database

    def open(self) -> Any:
        return PostgresStateStore(PostgresConfig(self.url, password=self.server.password))

    def write_version_1(self, generation: str, examples: list[tuple[int, int]]) -> None:
        with self.server.connect(self.database) as conn:
            conn.execute(
                "CREATE TABLE privstream_migrations (component TEXT NOT NULL, version INTEGER NOT NULL, "
                "description TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now(), "
                "PRIMARY KEY (component, version))"
            )
            for statement in POSTGRES_STATE_MIGRATIONS[0].statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO privstream_migrations (component, version, description) "
                "VALUES ('state', 1, 'v1')"
            )
            conn.execute("INSERT INTO state_meta VALUES ('generation', %s)", (generation,))
            conn.execute("INSERT INTO state_stream_seq VALUES ('a', %s)", (len(examples),))
            conn.execute("INSERT INTO state_positions VALUES ('a', 0, %s)", (examples[-1][0] + 1,))
            for seq, (offset, x) in enumerate(examples):
                conn.execute(
                    "INSERT INTO state_examples (stream_id, seq, part, kafka_offset, item, x, y) "
                    "VALUES ('a', %s, 0, %s, 0, %s, 1)",
                    (seq, offset, x),
                )
