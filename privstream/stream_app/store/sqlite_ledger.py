"""The privacy ledger: a durable, multi-process-safe, write-ahead record of every private release.

Every release is charged here *before* it is published (DESIGN.md §4). One call,
:meth:`SqliteLedger.charge`, checks the stream's budget, spends it and stores the release
bytes (the outbox) in one SQLite transaction. A (stream, window, mechanism) key is charged at
most once: charging it again returns the stored charge and its stored bytes, so a replay after a
crash or a rebalance re-publishes the same bytes instead of drawing fresh noise.

>>> ledger = SqliteLedger.open(":memory:", budgets={"s1": (1.0, 1e-6)})
>>> c = ledger.charge("s1", "w0", "laplace", 0.3, 0.0, b"release-0")
>>> again = ledger.charge("s1", "w0", "laplace", 0.3, 0.0, b"fresh noise")  # idempotent
>>> (again.entry_id == c.entry_id, again.release)
(True, b'release-0')
>>> ledger.spent("s1"), ledger.remaining("s1")
(PrivacyCost(epsilon=0.3, delta=0.0), PrivacyCost(epsilon=0.7, delta=1e-06))
>>> [e.entry_id for e in ledger.unpublished()] == [c.entry_id]
True
>>> ledger.mark_published(c.entry_id)
>>> ledger.unpublished()
[]
>>> ledger.charge("s1", "w1", "laplace", 0.8, 0.0, b"release-1")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
privstream.agents.ledger_port.BudgetExhaustedError: stream 's1': refusing to charge window 'w1' ...
>>> ledger.refusals("s1")
1

**Accounting.** The ledger is a plain additive budget: a stream's spend is the sum of its charges
(basic sequential composition), compared against the stream's (epsilon, delta) budget. It does no
accounting theory: the caller decides what each window costs. For count windows at the example
level, disjoint windows compose in parallel (the privacy loss is the max over windows, not the
sum), so charging every window against one total budget is conservative; a tighter accountant
(advanced composition, RDP/PLD) can be layered on top by the caller choosing the per-window cost.

**Exact arithmetic.** Numbers are read as the shortest decimal that round-trips the float
(``0.1`` means 1/10) and summed as exact rationals, so ten charges of 0.1 spend exactly 1.0 and
``0.1 + 0.2`` fits a budget of ``0.3``; float rounding can neither refuse a legal spend nor let
an illegal one through. (These rules live in :mod:`.ledger_rules`, shared with the PostgreSQL
ledger, :mod:`.postgres_ledger`, which keeps this same contract for several hosts.)

**Budget changes between runs.** The configured budget is the limit; what was spent is never
reset. :meth:`SqliteLedger.set_budget` (or ``budgets=`` on open) replaces the stored limit, records
the change in an audit table and keeps the spend; a budget lowered below the spend leaves the
stream exhausted (every new charge is refused, idempotent replays still return their stored
release).

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

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import Self

from privstream.agents.ledger_port import (
    BudgetExhaustedError,
    Charge,
    ChargeReceipt,
    LedgerBusyError,
    LedgerCorruptError,
    LedgerError,
    LedgerMissingError,
    LedgerUnavailableError,
    PrivacyCost,
    PrivacyLedger,
    UnknownEntryError,
    UnknownStreamError,
)
from privstream.stream_app.store.ledger_rules import (
    ChargeRequest,
    StreamBudget,
    budget_change,
    check_spends,
    release_bytes_of,
)
from privstream.stream_app.store.migrations import Migration, SchemaTooNewError, latest, pending

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "BudgetExhaustedError",
    "Charge",
    "ChargeReceipt",
    "LedgerBusyError",
    "LedgerCorruptError",
    "LedgerError",
    "LedgerMissingError",
    "LedgerUnavailableError",
    "PrivacyCost",
    "PrivacyLedger",
    "SqliteLedger",
    "UnknownEntryError",
    "UnknownStreamError",
]

log = logging.getLogger(__name__)

#: ``PRAGMA application_id`` of a privstream ledger file (ASCII "PSLG"), so that another
#: application's SQLite file is never mistaken for a ledger.
APPLICATION_ID = 0x50534C47
#: ``PRAGMA user_version`` of the schema this module reads and writes.
SCHEMA_VERSION = 1

#: The schema, as ordered migrations (see :mod:`.migrations`); ``PRAGMA user_version`` is the
#: number of the last one applied. Append a migration to change it; never edit a released one.
MIGRATIONS = (
    Migration(1, "streams, charges (with the outbox), refusals, budget changes", (
        """CREATE TABLE streams (
            stream_id      TEXT PRIMARY KEY,
            -- budgets and spends are exact rationals as text ("3/10"), see ledger_rules.exact()
            epsilon_budget TEXT NOT NULL,
            delta_budget   TEXT NOT NULL,
            epsilon_spent  TEXT NOT NULL,
            delta_spent    TEXT NOT NULL
        )""",
        """CREATE TABLE charges (
            entry_id     INTEGER PRIMARY KEY AUTOINCREMENT,  -- AUTOINCREMENT: ids are never reused
            stream_id    TEXT NOT NULL REFERENCES streams (stream_id),
            window_id    TEXT NOT NULL,
            mechanism    TEXT NOT NULL,
            epsilon      TEXT NOT NULL,
            delta        TEXT NOT NULL,
            release      BLOB NOT NULL,
            charged_at   TEXT NOT NULL,
            published_at TEXT,
            UNIQUE (stream_id, window_id, mechanism)
        )""",
        "CREATE INDEX charges_outbox ON charges (entry_id) WHERE published_at IS NULL",
        """CREATE TABLE refusals (
            refusal_id INTEGER PRIMARY KEY,
            stream_id  TEXT NOT NULL REFERENCES streams (stream_id),
            window_id  TEXT NOT NULL,
            mechanism  TEXT NOT NULL,
            epsilon    TEXT NOT NULL,
            delta      TEXT NOT NULL,
            refused_at TEXT NOT NULL
        )""",
        "CREATE INDEX refusals_by_stream ON refusals (stream_id)",
        """CREATE TABLE budget_changes (
            change_id      INTEGER PRIMARY KEY,
            stream_id      TEXT NOT NULL REFERENCES streams (stream_id),
            epsilon_budget TEXT NOT NULL,
            delta_budget   TEXT NOT NULL,
            changed_at     TEXT NOT NULL
        )""",
    )),
)
#: ``PRAGMA user_version`` of the schema this module reads and writes.
SCHEMA_VERSION = latest(MIGRATIONS)
_TABLES = frozenset({"streams", "charges", "refusals", "budget_changes"})
_CHARGE_COLUMNS = (
    "entry_id, stream_id, window_id, mechanism, epsilon, delta, release, charged_at, published_at"
)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _to_charge(row: tuple) -> Charge:
    entry_id, stream_id, window_id, mechanism, epsilon, delta, release, charged_at, published_at = row
    return Charge(
        entry_id=entry_id,
        stream_id=stream_id,
        window_id=window_id,
        mechanism=mechanism,
        epsilon=float(Fraction(epsilon)),
        delta=float(Fraction(delta)),
        release=bytes(release),
        charged_at=datetime.fromisoformat(charged_at),
        published_at=None if published_at is None else datetime.fromisoformat(published_at),
    )


# --------------------------------------------------------------------------- the SQLite ledger


class SqliteLedger:
    """The privacy ledger in one SQLite file; implements :class:`PrivacyLedger`.

    Build it with :meth:`open` (the constructor takes an already-validated connection).
    """

    def __init__(self, connection: sqlite3.Connection, path: str, busy_timeout: float = 10.0) -> None:
        self._conn = connection
        self._path = path
        self._busy_timeout = busy_timeout
        # One connection per instance; the lock serialises threads sharing it. Processes are
        # serialised by SQLite's own write lock (BEGIN IMMEDIATE).
        self._lock = threading.RLock()
        self._closed = False

    # ----------------------------------------------------------------- opening

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
            conn = sqlite3.connect(
                target, uri=True, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            if not memory and not Path(display).exists():
                raise LedgerMissingError(f"privacy ledger {display} does not exist") from exc
            raise LedgerError(f"cannot open privacy ledger {display}: {exc}") from exc
        ledger = cls(conn, display, busy_timeout)
        try:
            ledger._prepare(create=create_if_missing or memory)
            if budgets:
                with ledger._write() as cur:
                    for stream_id, (epsilon_budget, delta_budget) in budgets.items():
                        ledger._set_budget(cur, stream_id, epsilon_budget, delta_budget)
        except BaseException:
            conn.close()
            raise
        return ledger

    def _prepare(self, *, create: bool) -> None:
        """Validate the file, bring its schema up to date (or, if allowed and empty, create it),
        and set the connection up.

        The busy timeout is already set: ``sqlite3.connect(timeout=...)`` installs it.
        """
        try:
            self._conn.execute("PRAGMA foreign_keys = ON")
            # Validate before the first write: a foreign or damaged file must not be modified.
            empty = self._is_empty()
            if empty and not create:
                raise LedgerCorruptError(
                    f"{self._path} is an empty database, not an initialised privacy ledger "
                    "(pass create_if_missing=True to initialise it)"
                )
            if not empty:
                self._check_header()
                self._check_integrity()
            mode = self._enable_wal()
            if mode.lower() not in ("wal", "memory"):
                raise LedgerError(f"{self._path}: cannot enable WAL mode (journal_mode is {mode!r})")
            self._conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc
        if self._pragma("user_version") != SCHEMA_VERSION:
            self._migrate()
        self._validate()

    def _migrate(self) -> None:
        """Apply the missing migrations and stamp the file, under the write lock."""
        with self._write() as cur:
            # Re-read under the write lock: another process may have migrated it meanwhile.
            if self._is_empty():
                cur.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            else:
                self._check_header()
            current = self._pragma("user_version")
            for migration in pending(current, MIGRATIONS):
                # Not executescript(): it would COMMIT and leave our transaction.
                for statement in migration.statements:
                    cur.execute(statement)
                log.info("%s: applied ledger migration %d (%s)", self._path, migration.version,
                         migration.description)
            cur.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _enable_wal(self) -> str:
        """Switch the file to WAL mode (persistent; a no-op once done) and return the journal mode."""
        # Converting a new file to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at once,
        # without its busy handler, when waiting could deadlock (several workers creating the same
        # ledger at once). So retry here, with backoff, up to the busy timeout.
        deadline = time.monotonic() + self._busy_timeout
        delay = 0.001
        while True:
            try:
                return str(self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                busy = (getattr(exc, "sqlite_errorname", "") or "").startswith("SQLITE_BUSY")
                if not busy or time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(2 * delay, 0.05)

    def _is_empty(self) -> bool:
        (objects,) = self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return objects == 0 and self._pragma("application_id") == 0 and self._pragma("user_version") == 0

    def _pragma(self, name: str) -> int:
        return int(self._conn.execute(f"PRAGMA {name}").fetchone()[0])

    def _check_header(self) -> None:
        """The file is a privstream ledger of a schema version this code can read or upgrade."""
        app_id = self._pragma("application_id")
        if app_id != APPLICATION_ID:
            raise LedgerCorruptError(
                f"{self._path} is not a privstream privacy ledger "
                f"(application_id {app_id:#x}, expected {APPLICATION_ID:#x})"
            )
        version = self._pragma("user_version")
        try:
            pending(version, MIGRATIONS)
        except (SchemaTooNewError, ValueError) as exc:
            raise LedgerCorruptError(
                f"{self._path} has ledger schema version {version}; this privstream reads version "
                f"{SCHEMA_VERSION} ({exc})"
            ) from None

    def _check_integrity(self) -> None:
        problems = [row[0] for row in self._conn.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise LedgerCorruptError(f"{self._path} failed its integrity check: {problems[:5]}")

    def _validate(self) -> None:
        try:
            self._check_header()
            tables = {row[0] for row in self._conn.execute("SELECT name FROM sqlite_master")}
            if missing := _TABLES - tables:
                raise LedgerCorruptError(f"{self._path} lacks ledger tables {sorted(missing)}")
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc
        with self._read() as cur:  # one snapshot: other processes may be charging meanwhile
            charges = cur.execute("SELECT stream_id, epsilon, delta FROM charges").fetchall()
            stored = cur.execute("SELECT stream_id, epsilon_spent, delta_spent FROM streams").fetchall()
        check_spends(self._path, stored, charges)

    # ----------------------------------------------------------------- transactions

    def _translate(self, exc: sqlite3.Error) -> LedgerError:
        """Map a sqlite3 error to a ledger error naming the file."""
        name = getattr(exc, "sqlite_errorname", "") or ""
        if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
            return LedgerCorruptError(f"{self._path} is not a valid privacy ledger: {exc}")
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return LedgerBusyError(f"{self._path}: the ledger stayed locked by another process: {exc}")
        return LedgerError(f"{self._path}: {exc}")

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Cursor]:
        with self._lock:
            if self._closed:
                raise LedgerError(f"{self._path}: the ledger is closed")
            try:
                cur = self._conn.cursor()
                cur.execute(begin)
                try:
                    yield cur
                    cur.execute("COMMIT")
                except BaseException:
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc

    def _write(self) -> AbstractContextManager[sqlite3.Cursor]:
        # IMMEDIATE takes the write lock up front, so the budget read and the spend are one
        # atomic step across processes (and the busy timeout applies to taking the lock).
        return self._transaction("BEGIN IMMEDIATE")

    def _read(self) -> AbstractContextManager[sqlite3.Cursor]:
        # A read transaction sees one consistent snapshot across its statements.
        return self._transaction("BEGIN DEFERRED")

    # ----------------------------------------------------------------- budgets

    def set_budget(self, stream_id: str, epsilon_budget: float, delta_budget: float) -> None:
        """Set a stream's (epsilon, delta) budget; what it has spent is kept.

        A budget lowered below the spend leaves the stream exhausted. Each change is recorded.

        >>> ledger = SqliteLedger.open(":memory:")
        >>> ledger.set_budget("s", 1.0, 0.0)
        >>> _ = ledger.charge("s", "w0", "laplace", 0.6, 0.0, b"r")
        >>> ledger.set_budget("s", 0.5, 0.0)
        >>> ledger.spent("s"), ledger.remaining("s")
        (PrivacyCost(epsilon=0.6, delta=0.0), PrivacyCost(epsilon=0.0, delta=0.0))
        """
        with self._write() as cur:
            self._set_budget(cur, stream_id, epsilon_budget, delta_budget)

    def _set_budget(
        self, cur: sqlite3.Cursor, stream_id: str, epsilon_budget: float, delta_budget: float
    ) -> None:
        old = self._find_stream(cur, stream_id)
        new = budget_change(stream_id, old, epsilon_budget, delta_budget)
        if new is None:
            return  # a restart with the same configuration changes nothing
        budget = (str(new.epsilon_budget), str(new.delta_budget))
        if old is None:
            cur.execute("INSERT INTO streams VALUES (?, ?, ?, '0', '0')", (stream_id, *budget))
        else:
            cur.execute(
                "UPDATE streams SET epsilon_budget = ?, delta_budget = ? WHERE stream_id = ?",
                (*budget, stream_id),
            )
        cur.execute(
            "INSERT INTO budget_changes (stream_id, epsilon_budget, delta_budget, changed_at) "
            "VALUES (?, ?, ?, ?)",
            (stream_id, *budget, _now()),
        )

    @staticmethod
    def _find_stream(cur: sqlite3.Cursor, stream_id: str) -> StreamBudget | None:
        row = cur.execute(
            "SELECT epsilon_budget, delta_budget, epsilon_spent, delta_spent FROM streams "
            "WHERE stream_id = ?",
            (stream_id,),
        ).fetchone()
        return None if row is None else StreamBudget.from_text(*row)

    def _stream(self, cur: sqlite3.Cursor, stream_id: str) -> StreamBudget:
        stream = self._find_stream(cur, stream_id)
        if stream is None:
            raise UnknownStreamError(
                f"stream {stream_id!r} has no privacy budget in {self._path} (set one with set_budget)"
            )
        return stream

    def streams(self) -> list[str]:
        """The ids of the streams that have a budget, sorted."""
        with self._read() as cur:
            return [row[0] for row in cur.execute("SELECT stream_id FROM streams ORDER BY stream_id")]

    def budget(self, stream_id: str) -> PrivacyCost:
        """The stream's configured (epsilon, delta) budget."""
        with self._read() as cur:
            return self._stream(cur, stream_id).budget

    def spent(self, stream_id: str) -> PrivacyCost:
        """The sum of the stream's charges (basic composition)."""
        with self._read() as cur:
            return self._stream(cur, stream_id).spent

    def remaining(self, stream_id: str) -> PrivacyCost:
        """Budget minus spend, never negative (0 once a lowered budget is below the spend)."""
        with self._read() as cur:
            return self._stream(cur, stream_id).remaining

    def refusals(self, stream_id: str) -> int:
        """How many charges of the stream were refused for lack of budget (for a metric)."""
        with self._read() as cur:
            self._stream(cur, stream_id)
            (count,) = cur.execute(
                "SELECT count(*) FROM refusals WHERE stream_id = ?", (stream_id,)
            ).fetchone()
            return int(count)

    # ----------------------------------------------------------------- charges

    def charge(
        self,
        stream_id: str,
        window_id: str,
        mechanism: str,
        epsilon: float,
        delta: float,
        release_bytes: bytes | Callable[[ChargeReceipt], bytes],
        *,
        fence: Callable[[sqlite3.Cursor], None] | None = None,
    ) -> Charge:
        """Atomically check and spend the stream's budget and store the release (write-ahead).

        If the (stream_id, window_id, mechanism) key was charged before, nothing is spent and the
        stored charge, with its stored release bytes, is returned; publish ``result.release``,
        not the bytes passed in. Raises :class:`BudgetExhaustedError` (after recording the
        refusal) if the spend would exceed the stream's epsilon or delta budget.

        ``release_bytes`` may be a function of the :class:`ChargeReceipt` (entry id and budget left
        after this charge), called inside the transaction, so a release's certificate can state
        both exactly.

        ``fence``, if given, runs first in the transaction and may raise to refuse the charge with
        nothing written (the caller lost its lease on the stream's partition: :mod:`.leases`).
        """
        request = ChargeRequest.validate(stream_id, window_id, mechanism, epsilon, delta, release_bytes)
        eps, dlt = request.epsilon, request.delta
        with self._write() as cur:
            if fence is not None:
                fence(cur)
            existing = self._lookup(cur, *request.key)
            if existing is not None:
                return request.replayed(existing)
            stream = self._stream(cur, stream_id)
            now = _now()
            if not stream.allows(eps, dlt):
                # Recorded in the same committed transaction; raised once the refusal is durable.
                cur.execute(
                    "INSERT INTO refusals (stream_id, window_id, mechanism, epsilon, delta, refused_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (*request.key, str(eps), str(dlt), now),
                )
                refusal = request.refusal(stream)
            else:
                cur.execute(
                    "INSERT INTO charges (stream_id, window_id, mechanism, epsilon, delta, release, "
                    "charged_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (*request.key, str(eps), str(dlt), b"", now),
                )
                entry_id = cur.lastrowid
                assert entry_id is not None
                receipt = ChargeReceipt(entry_id, stream.left_after(eps, dlt))
                release = release_bytes_of(release_bytes, receipt)
                cur.execute("UPDATE charges SET release = ? WHERE entry_id = ?", (release, entry_id))
                cur.execute(
                    "UPDATE streams SET epsilon_spent = ?, delta_spent = ? WHERE stream_id = ?",
                    (*stream.spend(eps, dlt).spend_text, stream_id),
                )
                return _to_charge((entry_id, *request.key, str(eps), str(dlt), release, now, None))
        raise refusal

    def _lookup(self, cur: sqlite3.Cursor, stream_id: str, window_id: str, mechanism: str) -> Charge | None:
        row = cur.execute(
            f"SELECT {_CHARGE_COLUMNS} FROM charges WHERE stream_id = ? AND window_id = ? AND mechanism = ?",
            (stream_id, window_id, mechanism),
        ).fetchone()
        return None if row is None else _to_charge(row)

    def lookup(self, stream_id: str, window_id: str, mechanism: str) -> Charge | None:
        """The charge stored under this key, if any (lets an agent skip recomputing a release)."""
        with self._read() as cur:
            return self._lookup(cur, stream_id, window_id, mechanism)

    def mark_published(self, entry_id: int) -> None:
        """Record that the entry's release was published (idempotent; the first time is kept)."""
        with self._write() as cur:
            cur.execute(
                "UPDATE charges SET published_at = coalesce(published_at, ?) WHERE entry_id = ?",
                (_now(), entry_id),
            )
            if cur.rowcount == 0:
                raise UnknownEntryError(f"no ledger entry {entry_id!r} in {self._path}")

    def unpublished(self, stream_id: str | None = None) -> list[Charge]:
        """The outbox: charges whose release is stored but not yet marked published, oldest first."""
        where = "published_at IS NULL" + ("" if stream_id is None else " AND stream_id = ?")
        params = () if stream_id is None else (stream_id,)
        with self._read() as cur:
            rows = cur.execute(
                f"SELECT {_CHARGE_COLUMNS} FROM charges WHERE {where} ORDER BY entry_id", params
            ).fetchall()
        return [_to_charge(row) for row in rows]

    def entries(self, stream_id: str) -> list[Charge]:
        """All charges of the stream, oldest first."""
        with self._read() as cur:
            self._stream(cur, stream_id)
            rows = cur.execute(
                f"SELECT {_CHARGE_COLUMNS} FROM charges WHERE stream_id = ? ORDER BY entry_id",
                (stream_id,),
            ).fetchall()
        return [_to_charge(row) for row in rows]

    def latest_published(self, stream_id: str, mechanism_prefix: str = "") -> Charge | None:
        """The stream's most recently charged release (of mechanisms starting with the prefix)
        that was confirmed published."""
        with self._read() as cur:
            self._stream(cur, stream_id)
            row = cur.execute(
                f"SELECT {_CHARGE_COLUMNS} FROM charges WHERE stream_id = ? AND published_at IS NOT NULL "
                "AND substr(mechanism, 1, ?) = ? ORDER BY entry_id DESC LIMIT 1",
                (stream_id, len(mechanism_prefix), mechanism_prefix),
            ).fetchone()
        return None if row is None else _to_charge(row)

    # ----------------------------------------------------------------- lifetime

    @property
    def path(self) -> str:
        """The absolute path of the ledger file (or ``":memory:"``)."""
        return self._path

    @property
    def location(self) -> str:
        """Where the ledger is, for messages: its path (``PostgresLedger.location`` is its URL)."""
        return self._path

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise :class:`LedgerError`."""
        with self._lock:
            self._closed = True
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteLedger({self._path!r})"
