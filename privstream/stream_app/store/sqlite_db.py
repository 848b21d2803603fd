"""What the SQLite stores share: a connection, serialised transactions, busy retries, schema versions.

:class:`SqliteDatabase` wraps one connection to one file (or ``":memory:"``) and runs each
operation of a store as one transaction, :meth:`SqliteDatabase.run`:

* ``write`` transactions start with ``BEGIN IMMEDIATE``: they take the file's write lock up front,
  so what a transaction reads and what it writes are one atomic step across processes (several
  workers of one host share the file; the busy timeout is how long one waits for the lock);
* ``read`` and ``snapshot`` transactions start with ``BEGIN DEFERRED``: in WAL mode they see one
  consistent snapshot and never block writers;
* threads sharing the object are serialised by a lock; an ``sqlite3`` error leaves as the
  store's own error (``translate``).

**Schema versions.** ``PRAGMA user_version`` is the number of the last migration applied
(:mod:`.migrations`); :meth:`SqliteDatabase.migrate` applies the missing ones under the write
lock, in one transaction with the version change.

>>> db = SqliteDatabase.connect(":memory:", translate=lambda message, error: RuntimeError(message))
>>> from privstream.stream_app.store.migrations import Migration
>>> [m.version for m in db.migrate((Migration(1, "t", ("CREATE TABLE t (x)",)),))]
[1]
>>> db.run(lambda cur: cur.execute("INSERT INTO t VALUES (1)").rowcount), db.pragma("user_version")
(1, 1)
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from privstream.stream_app.store.dialect import Dialect, Mode
from privstream.stream_app.store.migrations import Migration, pending
from privstream.stream_app.store.private_files import private_database_file

__all__ = ["SqliteDatabase", "sqlite_dialect"]

log = logging.getLogger(__name__)
T = TypeVar("T")
#: Makes a store's exception from a message and the ``sqlite3`` error (None: the store is closed).
Translate = Callable[[str, sqlite3.Error | None], Exception]


def sqlite_dialect(tables: Sequence[str]) -> Dialect:
    """The SQLite spelling of portable statements over ``tables`` (see :mod:`.dialect`)."""
    return Dialect(
        "sqlite",
        "?",
        tuple(tables),
        greatest="max",
        for_update="",
        binary="BINARY",
        types={
            "bigint": "INTEGER",
            "smallint": "INTEGER",
            "real": "REAL",
            "blob": "BLOB",
            "time": "TEXT",
            "entry_id": "INTEGER PRIMARY KEY AUTOINCREMENT",  # AUTOINCREMENT: ids are never reused
            "row_id": "INTEGER PRIMARY KEY",
            "compact": " WITHOUT ROWID",
        },
    )


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says another connection held a lock."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc)


class SqliteDatabase:
    """One connection to one SQLite file, shared by threads (see the module docstring)."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        display: str,
        *,
        busy_timeout: float,
        translate: Translate,
    ) -> None:
        self.connection = connection
        self.display = display
        self.busy_timeout = busy_timeout
        self._translate = translate
        self._lock = threading.RLock()
        self._closed = False

    @classmethod
    def connect(
        cls, target: str, *, display: str | None = None, busy_timeout: float = 10.0, translate: Translate
    ) -> SqliteDatabase:
        """Connect to ``target`` (a path, a ``file:`` URI or ``":memory:"``) in autocommit mode;
        ``translate(message, error)`` makes the store's exception of an ``sqlite3`` error (or of
        ``None``: the store is closed)."""
        private_database_file(target)  # 0600 whatever the umask (its WAL and -shm files follow)
        connection = sqlite3.connect(
            target,
            uri=target.startswith("file:"),
            timeout=busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        return cls(connection, display or target, busy_timeout=busy_timeout, translate=translate)

    def run(self, body: Callable[[sqlite3.Cursor], T], *, mode: Mode = "write") -> T:
        """Run ``body`` in one transaction; its own errors propagate after the rollback, an
        ``sqlite3`` error as the store's (``translate``)."""
        try:
            return self.transaction(body, mode=mode)
        except sqlite3.Error as exc:
            raise self._translate(f"{self.display}: {exc}", exc) from exc

    def transaction(self, body: Callable[[sqlite3.Cursor], T], *, mode: Mode = "write") -> T:
        """:meth:`run`, letting ``sqlite3`` errors through."""
        with self._lock:
            if self._closed:
                raise self._translate(f"{self.display}: closed", None)
            cur = self.connection.cursor()
            cur.execute("BEGIN IMMEDIATE" if mode == "write" else "BEGIN DEFERRED")
            try:
                result = body(cur)
                cur.execute("COMMIT")
                return result
            except BaseException:
                if self.connection.in_transaction:
                    self.connection.execute("ROLLBACK")
                raise

    def retry_busy(self, action: Callable[[], T]) -> T:
        """Run ``action``, again while another process holds a lock, up to the busy timeout.

        SQLite answers "busy" at once, without its busy handler, where waiting could deadlock:
        converting a new file to WAL mode, or changing the schema while several workers open a
        new file together.
        """
        deadline = time.monotonic() + self.busy_timeout
        delay = 0.001
        while True:
            try:
                return action()
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(2 * delay, 0.05)

    def pragma(self, name: str) -> int:
        with self._lock:
            return int(self.connection.execute(f"PRAGMA {name}").fetchone()[0])

    def migrate(
        self, migrations: Sequence[Migration], check: Callable[[sqlite3.Cursor, int], None] | None = None
    ) -> list[Migration]:
        """Apply the migrations the file lacks and stamp its ``user_version``, under the write lock.

        ``check(cursor, version)`` runs first, under the lock (another process may have migrated
        the file meanwhile), and may refuse a file that is not the store's. Returns the
        migrations applied.
        """

        def run(cur: sqlite3.Cursor) -> list[Migration]:
            version = int(cur.execute("PRAGMA user_version").fetchone()[0])
            if check is not None:
                check(cur, version)
            steps = pending(version, migrations)
            for migration in steps:
                for statement in migration.statements:  # not executescript(): it would COMMIT
                    cur.execute(statement)
                log.info(
                    "%s: applied migration %d (%s)", self.display, migration.version, migration.description
                )
            if steps:
                cur.execute(f"PRAGMA user_version = {steps[-1].version}")
            return steps

        try:
            return self.retry_busy(lambda: self.transaction(run))
        except sqlite3.Error as exc:
            raise self._translate(f"{self.display}: {exc}", exc) from exc

    def close(self) -> None:
        """Close the connection (idempotent); later transactions raise the store's error."""
        with self._lock:
            self._closed = True
            self.connection.close()
