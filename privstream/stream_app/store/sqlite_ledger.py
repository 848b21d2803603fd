"""The privacy ledger in one SQLite file, shared by the processes of one host.

The ledger's rules are :class:`~.ledger.SqlLedger`'s; this module is the file: opening and
checking it, its schema, and the statements SQLite spells its own way (:class:`SqliteLedgerBackend`).

>>> ledger = SqliteLedger.open(":memory:", budgets={"s1": (1.0, 0.0)})
>>> ledger.charge("s1", "w0", "laplace", 0.25, 0.0, b"release").entry_id, ledger.spent("s1")
(1, PrivacyCost(epsilon=0.25, delta=0.0))

**First start vs. restart.** A missing or invalid ledger file is an error, never a fresh budget:
``SqliteLedger.open(path)`` raises :class:`LedgerMissingError` if the file does not exist and
:class:`LedgerCorruptError` if it is not a valid ledger. Creating one is explicit:
``create_if_missing=True``, which the service's settings should set only for a deliberate first
start (and the parent directory must exist, so an unmounted volume is an error, not a new ledger).
The schema is versioned (``PRAGMA user_version``, the migrations in :data:`MIGRATIONS`): a file
of an older version is upgraded when opened, one of a newer version is :class:`LedgerCorruptError`.

**Processes and threads.** Several processes may share one file (WAL mode, ``BEGIN IMMEDIATE``
write transactions, a busy timeout, ``synchronous=FULL``). One :class:`SqliteLedger` may be used from
several threads (calls are serialised); calls block on disk I/O (an fsync per write), so async
code should call them through ``asyncio.to_thread``. ``":memory:"`` gives a private, non-durable
ledger with exactly the same code (for tests and offline runs).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from privstream.agents.ledger_port import (
    BudgetExhaustedError,
    LedgerBusyError,
    LedgerCorruptError,
    LedgerError,
    LedgerMissingError,
    PrivacyCost,
)
from privstream.stream_app.store.dialect import Mode
from privstream.stream_app.store.ledger import TABLES, SqlLedger
from privstream.stream_app.store.ledger_rules import Spend, filter_users
from privstream.stream_app.store.migrations import SchemaTooNewError, latest, pending
from privstream.stream_app.store.schema import LEDGER, render
from privstream.stream_app.store.sqlite_db import SqliteDatabase, sqlite_dialect

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "BudgetExhaustedError",
    "LedgerCorruptError",
    "LedgerMissingError",
    "PrivacyCost",
    "SqliteLedger",
    "SqliteLedgerBackend",
]

#: ``PRAGMA application_id`` of a privstream ledger file (ASCII "PSLG"), so that another
#: application's SQLite file is never mistaken for a ledger.
APPLICATION_ID = 0x50534C47
_DIALECT = sqlite_dialect(TABLES)
T = TypeVar("T")

#: The schema (:data:`.schema.LEDGER`) in SQLite's spelling; ``PRAGMA user_version`` is the
#: number of the last migration applied.
MIGRATIONS = render(LEDGER, _DIALECT)
#: ``PRAGMA user_version`` of the schema this module reads and writes.
SCHEMA_VERSION = latest(MIGRATIONS)
#: Rows per statement when reading many users' spends (below SQLite's 32766 variables).
_USER_BATCH = 10_000


def _file_id(path: str) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino


def _translate(path: str) -> Callable[[str, sqlite3.Error | None], LedgerError]:
    """The ledger's error for an ``sqlite3`` error on the file at ``path``."""

    def translate(message: str, exc: sqlite3.Error | None) -> LedgerError:
        name = getattr(exc, "sqlite_errorname", "") or ""
        if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
            return LedgerCorruptError(f"{path} is not a valid privacy ledger: {exc}")
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return LedgerBusyError(f"{path}: the ledger stayed locked by another process: {exc}")
        return LedgerError(message)

    return translate


class SqliteLedgerBackend:
    """The SQLite side of the ledger (:class:`~.ledger.LedgerBackend`): one file's connection."""

    dialect = _DIALECT

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db
        # The file this connection writes to: a write after it was deleted or replaced would go to
        # an unlinked file and be lost with the process, so it is refused (see run).
        self._file = None if db.display == ":memory:" else _file_id(db.display)

    def run(self, body: Callable[[sqlite3.Cursor], T], *, mode: Mode = "write") -> T:
        if mode == "write" and self._file is not None:
            try:
                current = _file_id(self.db.display)
            except FileNotFoundError:
                current = None
            if current != self._file:
                raise LedgerError(
                    f"{self.db.display}: the ledger file was deleted or replaced under this worker; "
                    "nothing more is charged to it (restore it and restart the worker)"
                )
        return self.db.run(body, mode=mode)

    @property
    def where(self) -> str:
        return self.db.display

    location = where

    def charge_users(
        self, cur: sqlite3.Cursor, users: list[str], decide: Callable[[Spend], Spend | None]
    ) -> list[str]:
        # The write lock of the transaction serialises this with every other reservation.
        stored: dict[str, Spend] = {}
        for start in range(0, len(users), _USER_BATCH):
            batch = users[start : start + _USER_BATCH]
            marks = ",".join("?" * len(batch))
            statement = f"SELECT user_id, epsilon, delta FROM user_spends WHERE user_id IN ({marks})"
            stored.update((user, (eps, dlt)) for user, eps, dlt in cur.execute(statement, batch))
        chosen = filter_users(users, stored, decide)
        cur.executemany(
            "INSERT INTO user_spends (user_id, epsilon, delta) VALUES (?, ?, ?) "
            "ON CONFLICT (user_id) DO UPDATE SET epsilon = excluded.epsilon, delta = excluded.delta",
            chosen.spends,
        )
        return chosen.included

    def raise_entry_ids(self, cur: sqlite3.Cursor, floor: int) -> None:
        # AUTOINCREMENT keeps the highest id ever given in sqlite_sequence (a row once charges has one).
        cur.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'charges'", (floor,))
        if cur.rowcount == 0:
            cur.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('charges', ?)", (floor,))

    def close(self) -> None:
        self.db.close()

    # ----------------------------------------------------------------- opening

    def prepare(self, *, create: bool) -> None:
        """Validate the file, bring its schema up to date (or, if allowed and empty, create it),
        and set the connection up (the busy timeout is already set by ``connect``)."""
        conn = self.db.connection
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            # Validate before the first write: a foreign or damaged file must not be modified.
            empty = self._is_empty()
            if empty and not create:
                raise LedgerCorruptError(
                    f"{self.where} is an empty database, not an initialised privacy ledger "
                    "(pass create_if_missing=True to initialise it)"
                )
            if not empty:
                self._check_header()
                problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
                if problems != ["ok"]:
                    raise LedgerCorruptError(f"{self.where} failed its integrity check: {problems[:5]}")
            # Converting a new file to WAL needs an exclusive lock (see SqliteDatabase.retry_busy).
            mode = self.db.retry_busy(lambda: str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]))
            if mode.lower() not in ("wal", "memory"):
                raise LedgerError(f"{self.where}: cannot enable WAL mode (journal_mode is {mode!r})")
            conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise _translate(self.where)(str(exc), exc) from exc
        if self.db.pragma("user_version") != SCHEMA_VERSION:
            self.db.migrate(MIGRATIONS, self._stamp)
        self._check_header()
        tables = {
            row[0]
            for row in self.db.run(lambda cur: cur.execute("SELECT name FROM sqlite_master").fetchall())
        }
        if missing := set(TABLES) - tables:
            raise LedgerCorruptError(f"{self.where} lacks ledger tables {sorted(missing)}")

    def _stamp(self, cur: sqlite3.Cursor, version: int) -> None:
        """Before migrating, under the write lock: mark a new file as a ledger, check an old one."""
        if self._is_empty():
            cur.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        else:
            self._check_header()

    def _is_empty(self) -> bool:
        (objects,) = self.db.connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return objects == 0 and self.db.pragma("application_id") == 0 and self.db.pragma("user_version") == 0

    def _check_header(self) -> None:
        """The file is a privstream ledger of a schema version this code can read or upgrade."""
        app_id = self.db.pragma("application_id")
        if app_id != APPLICATION_ID:
            raise LedgerCorruptError(
                f"{self.where} is not a privstream privacy ledger "
                f"(application_id {app_id:#x}, expected {APPLICATION_ID:#x})"
            )
        version = self.db.pragma("user_version")
        try:
            pending(version, MIGRATIONS)
        except (SchemaTooNewError, ValueError) as exc:
            raise LedgerCorruptError(
                f"{self.where} has ledger schema version {version}; this privstream reads version "
                f"{SCHEMA_VERSION} ({exc})"
            ) from None


class SqliteLedger(SqlLedger):
    """The privacy ledger in one SQLite file; implements :class:`PrivacyLedger`. Build it with
    :meth:`open`."""

    _backend: SqliteLedgerBackend

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        create_if_missing: bool = False,
        budgets: Mapping[str, tuple[float, float]] | None = None,
        busy_timeout: float = 10.0,
    ) -> SqliteLedger:
        """Open the ledger at ``path`` (``":memory:"`` for a private in-memory one).

        ``create_if_missing`` must be passed explicitly to create a new ledger; otherwise a missing
        file raises :class:`LedgerMissingError`. A file that is not a valid ledger raises
        :class:`LedgerCorruptError` (never a reset). ``budgets`` maps stream ids to
        (epsilon_budget, delta_budget) and is applied with :meth:`set_budget`. ``busy_timeout`` is
        how long, in seconds, to wait for another process's write lock.
        """
        memory = os.fspath(path) == ":memory:"
        display = ":memory:" if memory else str(Path(path).absolute())
        if memory:
            target = ":memory:"
        else:
            file = Path(display)
            if not file.exists():
                if not create_if_missing:
                    raise LedgerMissingError(
                        f"privacy ledger {display} does not exist; refusing to start with a fresh budget "
                        "(pass create_if_missing=True only when creating the ledger is intended)"
                    )
                if not file.parent.is_dir():
                    raise LedgerMissingError(
                        f"cannot create privacy ledger {display}: directory {file.parent} does not exist"
                    )
            # mode=rw never creates the file, closing the race between the check above and here.
            target = f"{file.as_uri()}?mode={'rwc' if create_if_missing else 'rw'}"
        try:
            db = SqliteDatabase.connect(
                target, display=display, busy_timeout=busy_timeout, translate=_translate(display)
            )
        except sqlite3.Error as exc:
            if not memory and not Path(display).exists():
                raise LedgerMissingError(f"privacy ledger {display} does not exist") from exc
            raise LedgerError(f"cannot open privacy ledger {display}: {exc}") from exc
        backend = SqliteLedgerBackend(db)
        try:
            backend.prepare(create=create_if_missing or memory)
            ledger = cls(backend)
            ledger._prepare(budgets)
        except BaseException:
            db.close()
            raise
        return ledger

    @property
    def path(self) -> str:
        """The absolute path of the ledger file (or ``":memory:"``)."""
        return self._backend.where
