"""The privacy ledger in PostgreSQL: one ledger shared by workers on several hosts.

The ledger's rules are :class:`~.ledger.SqlLedger`'s, the same as on SQLite (one contract suite,
``tests/stream_app/store/test_ledger_contract.py``, runs over both); this module is the
database: its schema, its connections (:mod:`.postgres_db`) and the statements PostgreSQL spells
its own way (:class:`PostgresLedgerBackend`).

>>> config = PostgresConfig("postgresql://privstream@db/privstream", password="...")  # doctest: +SKIP
>>> ledger = PostgresLedger.open(config, create_if_missing=True, budgets={"s1": (1, 0)})  # doctest: +SKIP
>>> ledger.charge("s1", "w0", "laplace", 0.3, 0.0, b"release-0").entry_id  # doctest: +SKIP
1

**Check-and-spend: a row lock on the stream.** A charge runs in one READ COMMITTED transaction
that first takes ``SELECT ... FOR UPDATE`` on the stream's row, then looks the key up, checks the
budget, stores the charge with its release and adds it to the spend. Every charge of a stream
writes that one row, so charges of one stream are serialised whatever the isolation level; the
row lock queues them (each waits for the previous commit and then reads the committed spend),
where SERIALIZABLE would let them all run and abort all but one, to be retried: under 16
concurrent writers that is mostly wasted work. Charges of different streams do not wait for each
other. A replay of a charged key is answered before any lock is taken. The unique key (stream,
window, mechanism) backs the idempotency up in the schema itself. A lock held longer than
``lock_timeout`` raises :class:`LedgerBusyError`.

**A dropped connection.** PostgreSQL rolls back a transaction whose connection dies, so a charge
is stored whole or not at all. The ledger then runs the charge again on a fresh connection (see
:mod:`.postgres_db`), which is safe because a charge is idempotent: if the first attempt did
commit (the connection died during COMMIT), the rerun finds the key and returns the stored
charge. When the database stays unreachable for ``retry_seconds``, the caller gets
:class:`LedgerUnavailableError` and nothing it has not been told about was spent twice.

**Creating.** ``create_if_missing`` creates the ledger's tables in an existing database (the
database itself is the administrator's: a missing one is :class:`LedgerMissingError`, like the
SQLite ledger's missing directory). Without it, a database without the ledger's schema is
:class:`LedgerMissingError`; tables without a recorded version, a foreign ``privstream_migrations``
table, a newer schema version or a spend that disagrees with the charges is
:class:`LedgerCorruptError`. Tables are created unqualified, so they go to the first schema of
the connection's ``search_path`` (``public`` unless the URL says ``options=-csearch_path=...``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import psycopg

from privstream.agents.ledger_port import (
    LedgerBusyError,
    LedgerCorruptError,
    LedgerError,
    LedgerMissingError,
    LedgerUnavailableError,
)
from privstream.stream_app.store.dialect import Mode
from privstream.stream_app.store.ledger import TABLES as PORTABLE_TABLES
from privstream.stream_app.store.ledger import SqlLedger
from privstream.stream_app.store.ledger_rules import Spend
from privstream.stream_app.store.migrations import latest
from privstream.stream_app.store.postgres_db import Database, PostgresConfig, StoreErrors, postgres_dialect
from privstream.stream_app.store.schema import LEDGER, render

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresConfig", "PostgresLedger", "PostgresLedgerBackend"]

_DIALECT = postgres_dialect(PORTABLE_TABLES, "ledger_")
#: The ledger's schema (:data:`.schema.LEDGER`) in PostgreSQL's spelling (component ``ledger``
#: in ``privstream_migrations``).
MIGRATIONS = render(LEDGER, _DIALECT)
SCHEMA_VERSION = latest(MIGRATIONS)
TABLES = frozenset(f"ledger_{table}" for table in PORTABLE_TABLES)
#: The advisory lock that serialises user-level reservations (the per-user spends are one budget
#: for every stream of the deployment). ASCII "PSUS".
_USER_SPENDS_LOCK = 0x50535553
_ERRORS = StoreErrors(
    base=LedgerError,
    missing=LedgerMissingError,
    corrupt=LedgerCorruptError,
    busy=LedgerBusyError,
    unavailable=LedgerUnavailableError,
)

Cursor = psycopg.Cursor[Any]


def _copy_text(values: list[str]) -> str:
    """One text column in COPY's text format: a line per value, ``\\``, newline, carriage return
    and tab escaped (values hold no NUL: ledger_rules.check_users). Built with a few C-speed
    passes over one joined string instead of a Python call per value."""
    joined = "\x00".join(values)
    for raw, escaped in (("\\", "\\\\"), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
        joined = joined.replace(raw, escaped)
    return joined.replace("\x00", "\n") + "\n"


class PostgresLedgerBackend:
    """The PostgreSQL side of the ledger (:class:`~.ledger.LedgerBackend`): a pool of connections."""

    dialect = _DIALECT

    def __init__(self, db: Database) -> None:
        self.db = db

    @property
    def where(self) -> str:
        return self.db.where

    @property
    def location(self) -> str:
        """The database's URL, without password or parameters."""
        return self.db.config.display

    def run(self, body: Callable[[Cursor], Any], *, mode: Mode = "write") -> Any:
        return self.db.transaction(body, snapshot=mode == "snapshot")

    def raise_entry_ids(self, cur: Cursor, floor: int) -> None:
        cur.execute(
            "SELECT setval(s, greatest(%s, nextval(s) - 1)) "
            "FROM pg_get_serial_sequence('ledger_charges', 'entry_id') AS s",
            (floor,),
        )

    def close(self) -> None:
        self.db.close()

    # The individual filter in bulk: the users go to the server once (COPY into a temporary
    # table); what a user's spend becomes depends only on the spend, so the server groups the
    # users by spend, ``decide`` runs per distinct spend, and the server applies the decisions to
    # every user with a join. Only excluded users come back.

    def charge_users(
        self, cur: Cursor, users: list[str], decide: Callable[[Spend], Spend | None]
    ) -> list[str]:
        # One budget for every stream: two streams must not both read a user's old spend.
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_USER_SPENDS_LOCK,))
        cur.execute("CREATE TEMPORARY TABLE reserve_users (user_id TEXT NOT NULL) ON COMMIT DROP")
        with cur.copy("COPY reserve_users (user_id) FROM STDIN") as copy:
            copy.write(_copy_text(users))
        groups = cur.execute(
            "SELECT coalesce(s.epsilon, '0'), coalesce(s.delta, '0') FROM reserve_users r "
            "LEFT JOIN ledger_user_spends s USING (user_id) GROUP BY 1, 2"
        ).fetchall()
        decisions = {(eps, dlt): decide((eps, dlt)) for eps, dlt in groups}
        charged = [(old, new) for old, new in decisions.items() if new is not None]
        cur.execute(
            "CREATE TEMPORARY TABLE reserve_included ON COMMIT DROP AS "
            "SELECT r.user_id, d.new_epsilon, d.new_delta FROM reserve_users r "
            "LEFT JOIN ledger_user_spends s USING (user_id) "
            "JOIN unnest(%s::text[], %s::text[], %s::text[], %s::text[]) "
            "AS d (old_epsilon, old_delta, new_epsilon, new_delta) "
            "ON d.old_epsilon = coalesce(s.epsilon, '0') AND d.old_delta = coalesce(s.delta, '0')",
            (
                [o[0] for o, _ in charged],
                [o[1] for o, _ in charged],
                [n[0] for _, n in charged],
                [n[1] for _, n in charged],
            ),
        )
        cur.execute(
            "INSERT INTO ledger_user_spends (user_id, epsilon, delta) SELECT * FROM reserve_included "
            "ON CONFLICT (user_id) DO UPDATE SET epsilon = excluded.epsilon, delta = excluded.delta"
        )
        excluded: set[str] = set()
        if len(charged) < len(decisions):  # typically a few users: those whose budget this would pass
            excluded = {
                user
                for (user,) in cur.execute(
                    "SELECT r.user_id FROM reserve_users r LEFT JOIN reserve_included i USING (user_id) "
                    "WHERE i.user_id IS NULL"
                ).fetchall()
            }
        cur.execute("DROP TABLE reserve_users, reserve_included")
        return [user for user in users if user not in excluded] if excluded else users


class PostgresLedger(SqlLedger):
    """The privacy ledger in a PostgreSQL database; implements :class:`PrivacyLedger`.

    Build it with :meth:`open`. Thread-safe: each call takes a connection of the pool.
    """

    _backend: PostgresLedgerBackend

    @classmethod
    def open(
        cls,
        config: PostgresConfig | str,
        *,
        create_if_missing: bool = False,
        budgets: Mapping[str, tuple[float, float]] | None = None,
    ) -> PostgresLedger:
        """Connect, check (or, if allowed, create) the schema, and apply ``budgets``.

        ``budgets`` maps stream ids to (epsilon_budget, delta_budget), as :meth:`set_budget`.
        """
        db = Database.connect(config, _ERRORS, what="privacy ledger")
        with db.closed_on_error():
            db.migrate("ledger", MIGRATIONS, TABLES, create=create_if_missing)
            ledger = cls(PostgresLedgerBackend(db))
            ledger._prepare(budgets)
        return ledger
