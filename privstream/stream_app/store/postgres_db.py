"""What the PostgreSQL stores share: connection settings, a pool, retried transactions, schema versions.

:class:`PostgresConfig` says where the database is and how to log in (the password never sits
in the URL); :class:`Database` holds a ``psycopg_pool`` pool of connections to it and runs every
operation of a store as one transaction, :meth:`Database.transaction`:

* a transaction that fails because the connection broke (the server restarted, a network cut,
  an administrator's ``pg_terminate_backend``) or because PostgreSQL aborted it (serialization
  failure, deadlock) is rolled back by the server and **run again** on another connection until
  ``retry_seconds`` have passed, then the store's "unavailable" error is raised. So every
  transaction body must be idempotent: running it twice, the first perhaps committed without
  our knowing (the connection broke during COMMIT), must be as running it once. The ledger's
  operations are (a charge is keyed by (stream, window, mechanism), a budget change compares
  with the stored budget, publication is marked once);
* waiting longer than ``lock_timeout`` for a row lock raises the store's "busy" error;
* a session that sits inside a transaction doing nothing for ``idle_in_transaction_timeout``
  (a worker frozen or cut off between two statements) is ended by the server, which rolls the
  transaction back and releases its row locks: a stalled worker cannot hold a stream's charges
  or a partition's lease rows for ever (the frozen worker's next statement fails and is retried);
* after an outage, the same store object works again once the server is back (the pool
  reconnects within a few seconds; no worker restart is needed).

**Schema versions.** Each store (a *component*: ``ledger``, ``state``) lists its schema as
ordered :class:`~.migrations.Migration` steps; the table ``privstream_migrations`` records the
steps applied to the database, one row per (component, version). :meth:`Database.migrate` runs
under a transaction-scoped advisory lock, so workers starting together migrate once. A
component without a row is missing (created only when asked, and only if none of its tables
exist: tables without a version are someone else's or a damaged install); one with a version
newer than the code is an error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from privstream.stream_app.store.migrations import Migration, SchemaTooNewError, pending

__all__ = ["MIGRATIONS_TABLE", "Database", "PostgresConfig", "StoreErrors"]

log = logging.getLogger(__name__)
T = TypeVar("T")

MIGRATIONS_TABLE = "privstream_migrations"
#: Key of the advisory lock that serialises schema migrations (any constant unlikely elsewhere).
_MIGRATION_LOCK = 0x7072_6976_7374_726D & 0x7FFF_FFFF_FFFF_FFFF  # "privstrm"
#: SQLSTATEs after which PostgreSQL has rolled the transaction back and a rerun may succeed.
_ROLLED_BACK = frozenset({"40001", "40P01"})  # serialization_failure, deadlock_detected
#: SQLSTATEs of a connection that is gone (class 08, the server shutting a backend down, and the
#: server ending a session left idle inside a transaction: ``idle_in_transaction_timeout``).
_CONNECTION_GONE = frozenset({"57P01", "57P02", "57P03", "25P03"})
_LOCK_NOT_AVAILABLE = "55P03"
_RECONNECT_GIVE_UP_SECONDS = 4.0
_POOL_WAIT_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class PostgresConfig:
    """Where the database is and how to reach it.

    ``url`` is a libpq URL (``postgresql://user@host:port/db?sslmode=verify-full``) without a
    password: the password comes from ``password`` (a secret setting), or libpq's own
    ``PGPASSWORD``/``~/.pgpass``. ``sslmode``/``sslrootcert`` override the URL's.

    >>> PostgresConfig("postgresql://app@db.example:5432/privstream?sslmode=verify-full").display
    'postgresql://app@db.example:5432/privstream'
    >>> PostgresConfig("postgresql://app:hunter2@db.example/privstream")
    Traceback (most recent call last):
    ...
    ValueError: put the PostgreSQL password in a secret setting (store_password or ...), not in the URL
    """

    url: str
    password: str | None = None
    sslmode: str | None = None
    sslrootcert: str | None = None
    pool_size: int = 4
    connect_timeout: float = 10.0
    retry_seconds: float = 30.0
    lock_timeout: float = 10.0
    idle_in_transaction_timeout: float = 60.0

    def __post_init__(self) -> None:
        try:
            params = conninfo_to_dict(self.url)
        except psycopg.ProgrammingError as exc:
            raise ValueError(f"not a PostgreSQL URL: {exc}") from None
        if "password" in params:
            raise ValueError(
                "put the PostgreSQL password in a secret setting (store_password or "
                "store_password_file), not in the URL"
            )
        if self.pool_size < 1:
            raise ValueError("pool_size must be >= 1")

    @property
    def display(self) -> str:
        """The URL without its query: names the database in messages, never a secret."""
        return self.url.split("?", 1)[0]

    def conninfo(self) -> str:
        """The URL with the password and TLS overrides added (the settings win over the URL)."""
        extra: dict[str, Any] = {}
        params = conninfo_to_dict(self.url)
        if self.password is not None:
            extra["password"] = self.password
        if self.sslmode is not None:
            extra["sslmode"] = self.sslmode
        if self.sslrootcert is not None:
            extra["sslrootcert"] = self.sslrootcert
        if "connect_timeout" not in params:
            extra["connect_timeout"] = max(1, round(self.connect_timeout))
        if "application_name" not in params:
            extra["application_name"] = "privstream"
        return make_conninfo(self.url, **extra)


@dataclass(frozen=True, slots=True)
class StoreErrors:
    """The exception classes a store raises for each kind of database failure."""

    base: type[Exception]
    missing: type[Exception]
    corrupt: type[Exception]
    busy: type[Exception]
    unavailable: type[Exception]


class Database:
    """A pool of connections to one PostgreSQL database, for one store (see the module docstring)."""

    def __init__(self, config: PostgresConfig, errors: StoreErrors, *, what: str) -> None:
        self.config = config
        self.errors = errors
        self.what = what  # "privacy ledger", "state store": for messages
        self._pool: ConnectionPool | None = None

    @property
    def where(self) -> str:
        return f"{self.what} {self.config.display}"

    # ----------------------------------------------------------------- connections

    def open(self) -> None:
        """Connect (one probe connection first, for a clear error), then start the pool."""
        conninfo = self.config.conninfo()
        try:
            psycopg.connect(conninfo).close()
        except psycopg.OperationalError as exc:
            message = str(exc).strip()
            if "does not exist" in message and "database" in message:
                raise self.errors.missing(
                    f"{self.where}: the database does not exist (create it; privstream creates its "
                    f"tables, not databases): {message}"
                ) from None
            if "authentication" in message or "password" in message or "SSL" in message:
                # Configuration, not an outage: retrying will not help.
                raise self.errors.base(f"{self.where}: cannot log in: {message}") from None
            raise self.errors.unavailable(f"{self.where}: cannot connect: {message}") from None
        self._pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=self.config.pool_size,
            kwargs={"autocommit": True},
            configure=self._configure,
            timeout=self.config.connect_timeout,
            # The pool reconnects after an outage with doubling delays (1, 2, 4, ... s) until it
            # gives up; giving up early makes the next request start a fresh attempt, so a
            # server that is back is used within seconds, not after a minute-long delay.
            reconnect_timeout=_RECONNECT_GIVE_UP_SECONDS,
            name=self.what,
            open=False,
        )
        self._pool.open(wait=True, timeout=self.config.connect_timeout)

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        # UTC timestamps whatever the server's default; a bounded wait for row locks; locks of a
        # transaction left idle (a frozen worker) released by the server.
        conn.execute(
            "SELECT set_config('TimeZone', 'UTC', false), set_config('lock_timeout', %s, false), "
            "set_config('idle_in_transaction_session_timeout', %s, false)",
            (
                f"{round(self.config.lock_timeout * 1000)}ms",
                f"{round(self.config.idle_in_transaction_timeout * 1000)}ms",
            ),
        )

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    @property
    def closed(self) -> bool:
        return self._pool is None

    # ----------------------------------------------------------------- transactions

    def transaction(self, body: Callable[[psycopg.Cursor[Any]], T], *, snapshot: bool = False) -> T:
        """Run ``body`` in one transaction, again after a broken connection or a rollback by the
        server (so ``body`` must be idempotent), until ``retry_seconds`` have passed.

        ``snapshot=True`` runs it REPEATABLE READ, READ ONLY: every statement sees one snapshot.
        Errors raised by ``body`` itself (the store's own) propagate after the rollback.
        """
        pool = self._pool
        if pool is None:
            raise self.errors.base(f"{self.where}: closed")
        deadline = time.monotonic() + self.config.retry_seconds
        delay = 0.02
        attempt = 0
        while True:
            attempt += 1
            conn = None
            try:
                # Short waits: a new request is what makes the pool try to connect again.
                wait = min(_POOL_WAIT_SECONDS, max(0.1, deadline - time.monotonic()))
                with (
                    pool.connection(timeout=wait) as conn,
                    conn.transaction(),
                    conn.cursor() as cur,
                ):
                    if snapshot:
                        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    return body(cur)
            except PoolClosed as exc:
                raise self.errors.base(f"{self.where}: closed") from exc
            except PoolTimeout as exc:
                last: Exception = exc
            except psycopg.Error as exc:
                state = exc.sqlstate or ""
                if state == _LOCK_NOT_AVAILABLE:
                    raise self.errors.busy(
                        f"{self.where}: a row stayed locked by another worker for more than "
                        f"{self.config.lock_timeout:g} s: {exc}"
                    ) from exc
                lost = (
                    conn is None
                    or conn.closed
                    or conn.broken
                    or state.startswith("08")
                    or state in _CONNECTION_GONE
                )
                if not (lost or state in _ROLLED_BACK):
                    raise self.errors.base(f"{self.where}: {exc}") from exc
                last = exc
            if time.monotonic() + delay > deadline:
                raise self.errors.unavailable(
                    f"{self.where}: the database was unreachable or the connection kept breaking "
                    f"for {self.config.retry_seconds:g} s ({attempt} attempts): {last}"
                ) from last
            log.warning("%s: transaction failed (%s); retrying", self.where, str(last).strip())
            time.sleep(delay)
            delay = min(2 * delay, 1.0)

    # ----------------------------------------------------------------- schema versions

    def migrate(
        self, component: str, migrations: Sequence[Migration], tables: frozenset[str], *, create: bool
    ) -> int:
        """Bring ``component``'s schema to the latest version; the version found (0: created).

        ``tables`` are the component's tables in its latest version; they must all exist after.
        """

        def run(cur: psycopg.Cursor[Any]) -> int:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            current = self._version(cur, component)
            if current == 0:
                if found := sorted(tables & self._existing(cur, tables)):
                    raise self.errors.corrupt(
                        f"{self.where} has tables {found} but no record of a privstream {component} "
                        f"schema in {MIGRATIONS_TABLE}: not a privstream {self.what}, or a damaged one"
                    )
                if not create:
                    raise self.errors.missing(
                        f"{self.where} has no privstream {component} schema; refusing to start "
                        "with a fresh one (create it only for a deliberate first start)"
                    )
                cur.execute(
                    f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
                    "component TEXT NOT NULL, version INTEGER NOT NULL, description TEXT NOT NULL, "
                    "applied_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (component, version))"
                )
            try:
                steps = pending(current, migrations)
            except SchemaTooNewError as exc:
                raise self.errors.corrupt(f"{self.where}: {component} {exc}") from None
            for migration in steps:
                for statement in migration.statements:
                    cur.execute(statement)
                cur.execute(
                    f"INSERT INTO {MIGRATIONS_TABLE} (component, version, description) VALUES (%s, %s, %s)",
                    (component, migration.version, migration.description),
                )
                log.info(
                    "%s: applied %s migration %d (%s)",
                    self.where,
                    component,
                    migration.version,
                    migration.description,
                )
            if missing := sorted(tables - self._existing(cur, tables)):
                raise self.errors.corrupt(f"{self.where} lacks {component} tables {missing}")
            return current

        return self.transaction(run)

    def _version(self, cur: psycopg.Cursor[Any], component: str) -> int:
        """The component's recorded version; 0 when it has none (or no table records any)."""
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (MIGRATIONS_TABLE,))
        if not cur.fetchone()[0]:  # type: ignore[index]
            return 0
        try:
            cur.execute(
                sql.SQL("SELECT max(version) FROM {} WHERE component = %s").format(
                    sql.Identifier(MIGRATIONS_TABLE)
                ),
                (component,),
            )
        except psycopg.errors.UndefinedColumn as exc:
            raise self.errors.corrupt(
                f"{self.where}: table {MIGRATIONS_TABLE} is not privstream's: {exc}"
            ) from None
        version = cur.fetchone()[0]  # type: ignore[index]
        return 0 if version is None else int(version)

    @staticmethod
    def _existing(cur: psycopg.Cursor[Any], tables: frozenset[str]) -> set[str]:
        """Which of ``tables`` exist in the schema unqualified names resolve to."""
        cur.execute(
            "SELECT name FROM unnest(%s::text[]) AS name WHERE to_regclass(name) IS NOT NULL",
            (sorted(tables),),
        )
        return {row[0] for row in cur.fetchall()}
