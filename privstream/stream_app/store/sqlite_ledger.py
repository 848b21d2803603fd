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

**Accounting: a lifetime budget per example.** The release path charges nodes of the release
tree with :meth:`SqliteLedger.reserve` (before the learner runs: node range, secret seed, the
individual user filter; see :mod:`privstream.agents.ledger_port` for the rules and the README's
storage section for the filter's privacy argument) and stores their bytes with
:meth:`SqliteLedger.complete`. An example's lifetime cost is the sum of the charges whose node
covers its window; :meth:`SqliteLedger.spent` is the max over windows, and a charge is refused iff
some window of its node would pass the budget. A one-shot :meth:`SqliteLedger.charge` has no
node range, so it counts against every window: a ledger used only through ``charge`` is the plain
additive budget (basic sequential composition) above.

>>> tree = SqliteLedger.open(":memory:", budgets={"s": (1.0, 0.0)})
>>> a = tree.reserve("s", "c10-L0-0", "learner:x", 0.5, 0.0, NodeRange.of(0, 0))
>>> b = tree.reserve("s", "c10-L0-1", "learner:x", 0.5, 0.0, NodeRange.of(0, 1))  # disjoint: parallel
>>> tree.spent("s"), [r.release for r in tree.incomplete()]
(PrivacyCost(epsilon=0.5, delta=0.0), [None, None])
>>> tree.complete(a.entry_id, b"bytes of a").release, tree.complete(a.entry_id, b"other").release
(b'bytes of a', b'bytes of a')

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
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
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
    LifetimeFigures,
    NodeRange,
    PrivacyCost,
    PrivacyLedger,
    Reservation,
    UnknownEntryError,
    UnknownStreamError,
)
from privstream.stream_app.store.ledger_rules import (
    SEED_BYTES,
    VISIBLE_CHARGES,
    ChargeRequest,
    LifetimeState,
    StreamBudget,
    budget_change,
    check_node,
    check_spends,
    check_users,
    exact,
    filter_users,
    lifetime_from_json,
    lifetime_to_json,
    pack_users,
    release_bytes_of,
    unpack_users,
    visible_figures,
    window_peak,
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
    "LifetimeFigures",
    "NodeRange",
    "PrivacyCost",
    "PrivacyLedger",
    "Reservation",
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
    Migration(
        1,
        "streams, charges (with the outbox), refusals, budget changes",
        (
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
        ),
    ),
    Migration(
        2,
        "the release path: reservations (node range, seed, completion), lifetime per "
        "example, per-user spends of the deployment",
        (
            # Registration time (Unix seconds): the anchor of the time-window schedule. A stream of a
            # version-1 file was registered when its first budget was set.
            "ALTER TABLE streams ADD COLUMN registered_at REAL",
            """UPDATE streams SET registered_at = (
            SELECT round((julianday(min(changed_at)) - 2440587.5) * 86400.0, 3) FROM budget_changes b
            WHERE b.stream_id = streams.stream_id)""",
            # Lifetime per example = unranged + peak (see ledger_rules.LifetimeState). Version-1
            # charges have no node range: their total counts against every window (the safe reading).
            "ALTER TABLE streams ADD COLUMN unranged_epsilon TEXT NOT NULL DEFAULT '0'",
            "ALTER TABLE streams ADD COLUMN unranged_delta TEXT NOT NULL DEFAULT '0'",
            "UPDATE streams SET unranged_epsilon = epsilon_spent, unranged_delta = delta_spent",
            "ALTER TABLE streams ADD COLUMN peak_epsilon TEXT NOT NULL DEFAULT '0'",
            "ALTER TABLE streams ADD COLUMN peak_delta TEXT NOT NULL DEFAULT '0'",
            # A reservation is a charge whose release is stored later (completed_at NULL until then).
            "ALTER TABLE charges ADD COLUMN level INTEGER",
            "ALTER TABLE charges ADD COLUMN first_window INTEGER",
            "ALTER TABLE charges ADD COLUMN last_window INTEGER",
            "ALTER TABLE charges ADD COLUMN seed BLOB",
            "ALTER TABLE charges ADD COLUMN included_users INTEGER",  # how many users (user level)
            "ALTER TABLE charges ADD COLUMN users BLOB",  # which ones: ledger_rules.pack_users
            "ALTER TABLE charges ADD COLUMN lifetime TEXT",
            "ALTER TABLE charges ADD COLUMN completed_at TEXT",
            "UPDATE charges SET completed_at = charged_at",
            "CREATE INDEX charges_by_node ON charges (stream_id, level, first_window) WHERE "
            "level IS NOT NULL",
            "CREATE INDEX charges_incomplete ON charges (entry_id) WHERE completed_at IS NULL",
            # Per stream and level (-1: charges without a node range): how many charges, and the
            # widest node, which bounds the search for the charges overlapping a new node.
            """CREATE TABLE levels (
            stream_id TEXT NOT NULL REFERENCES streams (stream_id),
            level     INTEGER NOT NULL,
            releases  INTEGER NOT NULL,
            max_span  INTEGER NOT NULL,
            PRIMARY KEY (stream_id, level)
        ) WITHOUT ROWID""",
            """INSERT INTO levels SELECT stream_id, -1, count(*), 0 FROM charges GROUP BY stream_id""",
            "ALTER TABLE refusals ADD COLUMN level INTEGER",
            "ALTER TABLE refusals ADD COLUMN first_window INTEGER",
            "ALTER TABLE refusals ADD COLUMN last_window INTEGER",
            # The individual filter: one spend per user for the whole deployment (all streams).
            """CREATE TABLE user_spends (
            user_id TEXT PRIMARY KEY,
            epsilon TEXT NOT NULL,
            delta   TEXT NOT NULL
        ) WITHOUT ROWID""",
        ),
    ),
    Migration(
        3,
        "each reservation's scheduled publication time (its deadline): the public read side counts a "
        "charge from then on",
        ("ALTER TABLE charges ADD COLUMN scheduled_at REAL",),
    ),
)
#: ``PRAGMA user_version`` of the schema this module reads and writes.
SCHEMA_VERSION = latest(MIGRATIONS)
_TABLES = frozenset({"streams", "charges", "refusals", "budget_changes", "levels", "user_spends"})
_CHARGE_COLUMNS = (
    "entry_id, stream_id, window_id, mechanism, epsilon, delta, release, charged_at, published_at, "
    "level, first_window, last_window, included_users, scheduled_at"
)
_RESERVATION_COLUMNS = (
    "entry_id, stream_id, window_id, mechanism, epsilon, delta, level, first_window, last_window, seed, "
    "users, lifetime, release, completed_at, published_at, scheduled_at"
)
#: Rows per statement when reading many users' spends (below SQLite's 32766 variables).
_USER_BATCH = 10_000


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _node(level: int | None, first: int | None, last: int | None) -> NodeRange | None:
    return None if level is None or first is None or last is None else NodeRange(level, first, last)


def _to_charge(row: tuple) -> Charge:
    (
        entry_id,
        stream_id,
        window_id,
        mechanism,
        epsilon,
        delta,
        release,
        charged_at,
        published_at,
        level,
        first,
        last,
        included,
        scheduled_at,
    ) = row
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
        node=_node(level, first, last),
        included_users=included,
        scheduled_at=scheduled_at,
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
                log.info(
                    "%s: applied ledger migration %d (%s)",
                    self._path,
                    migration.version,
                    migration.description,
                )
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
        """Set a stream's lifetime (epsilon, delta) budget per example; what it has spent is kept.

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

    def register_stream(self, stream_id: str, lifetime: PrivacyCost | tuple[float, float]) -> float:
        """Set the stream's lifetime budget (as :meth:`set_budget`) and return its registration
        time: Unix seconds of its first registration, never changed (the public anchor of the
        time-window schedule).

        >>> ledger = SqliteLedger.open(":memory:")
        >>> first = ledger.register_stream("s", PrivacyCost(1.0, 0.0))
        >>> ledger.register_stream("s", PrivacyCost(2.0, 0.0)) == first, ledger.budget("s")
        (True, PrivacyCost(epsilon=2.0, delta=0.0))
        """
        epsilon_budget, delta_budget = lifetime
        with self._write() as cur:
            self._set_budget(cur, stream_id, epsilon_budget, delta_budget)
            (registered,) = cur.execute(
                "SELECT registered_at FROM streams WHERE stream_id = ?", (stream_id,)
            ).fetchone()
            if registered is None:  # a version-1 stream without a recorded budget change
                registered = time.time()
                cur.execute(
                    "UPDATE streams SET registered_at = ? WHERE stream_id = ?", (registered, stream_id)
                )
        return float(registered)

    def _set_budget(
        self, cur: sqlite3.Cursor, stream_id: str, epsilon_budget: float, delta_budget: float
    ) -> None:
        old = self._find_stream(cur, stream_id)
        new = budget_change(stream_id, old, epsilon_budget, delta_budget)
        if new is None:
            return  # a restart with the same configuration changes nothing
        budget = (str(new.epsilon_budget), str(new.delta_budget))
        if old is None:
            cur.execute(
                "INSERT INTO streams (stream_id, epsilon_budget, delta_budget, epsilon_spent, delta_spent, "
                "registered_at) VALUES (?, ?, ?, '0', '0', ?)",
                (stream_id, *budget, time.time()),
            )
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

    def _lifetime_state(self, cur: sqlite3.Cursor, stream_id: str) -> LifetimeState:
        row = cur.execute(
            "SELECT epsilon_budget, delta_budget, unranged_epsilon, unranged_delta, peak_epsilon, "
            "peak_delta FROM streams WHERE stream_id = ?",
            (stream_id,),
        ).fetchone()
        if row is None:
            self._stream(cur, stream_id)  # raises UnknownStreamError
        return LifetimeState.from_text(*row)

    def _figures(self, cur: sqlite3.Cursor, stream_id: str, state: LifetimeState) -> LifetimeFigures:
        levels = cur.execute(
            "SELECT level, releases FROM levels WHERE stream_id = ? ORDER BY level", (stream_id,)
        ).fetchall()
        (refused,) = cur.execute("SELECT count(*) FROM refusals WHERE stream_id = ?", (stream_id,)).fetchone()
        return state.figures({None if level < 0 else level: count for level, count in levels}, int(refused))

    def streams(self) -> list[str]:
        """The ids of the streams that have a budget, sorted."""
        with self._read() as cur:
            return [row[0] for row in cur.execute("SELECT stream_id FROM streams ORDER BY stream_id")]

    def budget(self, stream_id: str) -> PrivacyCost:
        """The stream's configured lifetime (epsilon, delta) budget per example."""
        with self._read() as cur:
            return self._stream(cur, stream_id).budget

    def spent(self, stream_id: str) -> PrivacyCost:
        """The stream's lifetime spend per example: the max over windows of the charges covering
        the window (charges without a node range cover every window)."""
        with self._read() as cur:
            return self._lifetime_state(cur, stream_id).spent

    def remaining(self, stream_id: str) -> PrivacyCost:
        """Budget minus the spend per example, never negative (0 once a lowered budget is below it)."""
        with self._read() as cur:
            return self._lifetime_state(cur, stream_id).remaining

    def lifetime(self, stream_id: str, visible_at: float | None = None) -> LifetimeFigures:
        """The stream's lifetime figures: budget, spend per example, releases per level, refusals;
        with ``visible_at``, counting only the completed charges scheduled at or before it (what
        the public sees then: :func:`.ledger_rules.visible_figures`).

        >>> ledger = SqliteLedger.open(":memory:", budgets={"s": (1.0, 0.0)})
        >>> for w in range(4):
        ...     _ = ledger.reserve("s", f"L0-{w}", "m", 0.25, 0.0, NodeRange.of(0, w))
        >>> _ = ledger.reserve("s", "L1-0", "m", 0.5, 0.0, NodeRange.of(1, 0))
        >>> figures = ledger.lifetime("s")
        >>> figures.spent_per_example, figures.releases_per_level
        (PrivacyCost(epsilon=0.75, delta=0.0), {0: 4, 1: 1})
        """
        with self._read() as cur:
            state = self._lifetime_state(cur, stream_id)
            if visible_at is None:
                return self._figures(cur, stream_id, state)
            rows = cur.execute(
                "SELECT level, first_window, last_window, epsilon, delta FROM charges WHERE stream_id = ? "
                f"AND {VISIBLE_CHARGES.format(mark='?')}",
                (stream_id, visible_at),
            ).fetchall()
            (refused,) = cur.execute(
                "SELECT count(*) FROM refusals WHERE stream_id = ?", (stream_id,)
            ).fetchone()
            return visible_figures(state.budget, rows, int(refused))

    def refusals(self, stream_id: str) -> int:
        """How many charges of the stream were refused for lack of budget (for a metric)."""
        with self._read() as cur:
            self._stream(cur, stream_id)
            (count,) = cur.execute(
                "SELECT count(*) FROM refusals WHERE stream_id = ?", (stream_id,)
            ).fetchone()
            return int(count)

    def user_spent(self, user_id: str) -> PrivacyCost:
        """The user's lifetime spend across every stream of the deployment (0 if never charged)."""
        with self._read() as cur:
            row = cur.execute(
                "SELECT epsilon, delta FROM user_spends WHERE user_id = ?", (user_id,)
            ).fetchone()
        if row is None:
            return PrivacyCost(0.0, 0.0)
        return PrivacyCost(float(Fraction(row[0])), float(Fraction(row[1])))

    # ----------------------------------------------------------------- reservations (the release path)

    def reserve(
        self,
        stream_id: str,
        window_id: str,
        mechanism: str,
        epsilon: float,
        delta: float,
        node: NodeRange,
        *,
        users: Collection[str] | None = None,
        user_budget: PrivacyCost | tuple[float, float] | None = None,
        fence: Callable[[sqlite3.Cursor], None] | None = None,
        scheduled_at: float | None = None,
    ) -> Reservation:
        """Charge a release of ``node`` before its learner runs, and draw its secret seed: one
        transaction (see :meth:`PrivacyLedger.reserve`).

        Refused (recorded, then :class:`BudgetExhaustedError`) iff some window of the node would
        pass the stream's lifetime budget. With ``users``: the individual filter charges each user
        whose deployment-wide spend plus (epsilon, delta) fits ``user_budget`` (default: the
        stream's budget) and excludes the others; their spends are written in batches in this
        same transaction.

        >>> ledger = SqliteLedger.open(":memory:", budgets={"s": (1.0, 0.0)})
        >>> r = ledger.reserve("s", "t60-L0-0", "learner:x", 0.6, 0.0, NodeRange.of(0, 0), users=["a", "b"])
        >>> r2 = ledger.reserve("s", "t60-L0-1", "learner:x", 0.6, 0.0, NodeRange.of(0, 1), users=["b", "c"])
        >>> sorted(r2.included_users), ledger.user_spent("b")   # b would pass 1.0: excluded
        (['c'], PrivacyCost(epsilon=0.6, delta=0.0))
        >>> ledger.reserve("s", "t60-L0-1", "learner:x", 0.6, 0.0, NodeRange.of(0, 1)).seed == r2.seed
        True
        """
        request = ChargeRequest.validate(stream_id, window_id, mechanism, epsilon, delta, b"")
        check_node(node)
        eps, dlt = request.epsilon, request.delta
        distinct = None if users is None else check_users(users)
        limit = None
        if user_budget is not None:
            limit = (
                exact(user_budget[0], "user epsilon budget"),
                exact(user_budget[1], "user delta budget", upper=Fraction(1)),
            )
        with self._write() as cur:
            if fence is not None:  # the partition leases (stream_app/fencing.py): may refuse
                fence(cur)
            existing = self._reservation(cur, *request.key)
            if existing is not None:
                if existing.cost != request.cost or existing.node != node:
                    log.warning(
                        "ledger key %r was reserved before as %s %s; asked again as %s %s: "
                        "returning the stored reservation",
                        request.key,
                        existing.cost,
                        existing.node,
                        request.cost,
                        node,
                    )
                return existing
            self._stream(cur, stream_id)
            state = self._lifetime_state(cur, stream_id)
            peak = window_peak(self._overlapping(cur, stream_id, node), node.first_window, node.last_window)
            now = _now()
            if not state.allows_node(peak, eps, dlt):
                cur.execute(
                    "INSERT INTO refusals (stream_id, window_id, mechanism, epsilon, delta, refused_at, "
                    "level, first_window, last_window) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*request.key, str(eps), str(dlt), now, node.level, node.first_window, node.last_window),
                )
                spent_eps, spent_delta = state.spent_in(peak)
                spent = PrivacyCost(float(spent_eps), float(spent_delta))
                refusal = BudgetExhaustedError(*request.key, request.cost, spent, state.budget)
            else:
                after = state.after_node(peak, eps, dlt)
                chosen = None
                if distinct is not None:
                    budget = limit if limit is not None else (state.epsilon_budget, state.delta_budget)
                    chosen = filter_users(distinct, self._user_spends(cur, distinct), eps, dlt, budget)
                seed = secrets.token_bytes(SEED_BYTES)
                cur.execute(
                    "INSERT INTO charges (stream_id, window_id, mechanism, epsilon, delta, release, "
                    "charged_at, level, first_window, last_window, seed, included_users, users, "
                    "scheduled_at) "
                    "VALUES (?, ?, ?, ?, ?, x'', ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        *request.key,
                        str(eps),
                        str(dlt),
                        now,
                        node.level,
                        node.first_window,
                        node.last_window,
                        seed,
                        None if chosen is None else len(chosen.included),
                        None if chosen is None else pack_users(chosen.included),
                        None if scheduled_at is None else float(scheduled_at),
                    ),
                )
                entry_id = cur.lastrowid
                assert entry_id is not None
                if chosen is not None:
                    cur.executemany(
                        "INSERT INTO user_spends (user_id, epsilon, delta) VALUES (?, ?, ?) "
                        "ON CONFLICT (user_id) DO UPDATE SET epsilon = excluded.epsilon, "
                        "delta = excluded.delta",
                        chosen.spends,
                    )
                stream = self._stream(cur, stream_id).spend(eps, dlt)
                cur.execute(
                    "UPDATE streams SET epsilon_spent = ?, delta_spent = ?, unranged_epsilon = ?, "
                    "unranged_delta = ?, peak_epsilon = ?, peak_delta = ? WHERE stream_id = ?",
                    (*stream.spend_text, *after.columns, stream_id),
                )
                self._count_level(cur, stream_id, node.level, node.last_window - node.first_window)
                figures = self._figures(cur, stream_id, after)
                cur.execute(
                    "UPDATE charges SET lifetime = ? WHERE entry_id = ?",
                    (lifetime_to_json(figures), entry_id),
                )
                return Reservation(
                    entry_id,
                    stream_id,
                    window_id,
                    mechanism,
                    float(eps),
                    float(dlt),
                    node,
                    seed,
                    None if chosen is None else frozenset(chosen.included),
                    figures,
                    None,
                    False,
                    None if scheduled_at is None else float(scheduled_at),
                )
        raise refusal

    @staticmethod
    def _count_level(cur: sqlite3.Cursor, stream_id: str, level: int, span: int) -> None:
        cur.execute(
            "INSERT INTO levels (stream_id, level, releases, max_span) VALUES (?, ?, 1, ?) "
            "ON CONFLICT (stream_id, level) DO UPDATE SET releases = releases + 1, "
            "max_span = max(max_span, excluded.max_span)",
            (stream_id, level, span),
        )

    @staticmethod
    def _overlapping(cur: sqlite3.Cursor, stream_id: str, node: NodeRange) -> list[tuple[int, int, str, str]]:
        """The stream's ranged charges overlapping the node: per level, an index range scan
        bounded by that level's widest node."""
        rows: list[tuple[int, int, str, str]] = []
        levels = cur.execute(
            "SELECT level, max_span FROM levels WHERE stream_id = ? AND level >= 0", (stream_id,)
        ).fetchall()
        for level, span in levels:
            rows += cur.execute(
                "SELECT first_window, last_window, epsilon, delta FROM charges WHERE stream_id = ? "
                "AND level = ? AND first_window BETWEEN ? AND ? AND last_window >= ?",
                (stream_id, level, node.first_window - span, node.last_window, node.first_window),
            ).fetchall()
        return rows

    @staticmethod
    def _user_spends(cur: sqlite3.Cursor, users: list[str]) -> dict[str, tuple[str, str]]:
        spends: dict[str, tuple[str, str]] = {}
        for start in range(0, len(users), _USER_BATCH):
            batch = users[start : start + _USER_BATCH]
            marks = ",".join("?" * len(batch))
            for user, epsilon, delta in cur.execute(
                f"SELECT user_id, epsilon, delta FROM user_spends WHERE user_id IN ({marks})", batch
            ):
                spends[user] = (epsilon, delta)
        return spends

    def _reservation(
        self, cur: sqlite3.Cursor, stream_id: str, window_id: str, mechanism: str
    ) -> Reservation | None:
        row = cur.execute(
            f"SELECT {_RESERVATION_COLUMNS} FROM charges "
            "WHERE stream_id = ? AND window_id = ? AND mechanism = ?",
            (stream_id, window_id, mechanism),
        ).fetchone()
        return None if row is None else self._to_reservation(cur, row)

    def _to_reservation(self, cur: sqlite3.Cursor, row: tuple) -> Reservation:
        (
            entry_id,
            stream_id,
            window_id,
            mechanism,
            epsilon,
            delta,
            level,
            first,
            last,
            seed,
            packed,
            lifetime,
            release,
            completed_at,
            published_at,
            scheduled_at,
        ) = row
        users = None if packed is None else unpack_users(bytes(packed))
        if lifetime is not None:
            figures = lifetime_from_json(lifetime)
        else:  # a version-1 charge: no figures were recorded with it; today's stand in
            figures = self._figures(cur, stream_id, self._lifetime_state(cur, stream_id))
        return Reservation(
            entry_id,
            stream_id,
            window_id,
            mechanism,
            float(Fraction(epsilon)),
            float(Fraction(delta)),
            _node(level, first, last),
            b"" if seed is None else bytes(seed),
            users,
            figures,
            None if completed_at is None else bytes(release),
            published_at is not None,
            scheduled_at,
        )

    def reservation(self, stream_id: str, window_id: str, mechanism: str) -> Reservation | None:
        """The reservation stored under this key, completed or not."""
        with self._read() as cur:
            return self._reservation(cur, stream_id, window_id, mechanism)

    def complete(self, entry_id: int, release: bytes) -> Charge:
        """Store a reservation's release bytes; the first bytes win (later calls return the stored
        charge, whatever bytes they pass)."""
        if not isinstance(release, bytes | bytearray | memoryview):
            raise TypeError(f"release must be bytes, got {type(release).__name__}")
        with self._write() as cur:
            cur.execute(
                "UPDATE charges SET release = ?, completed_at = ? "
                "WHERE entry_id = ? AND completed_at IS NULL",
                (bytes(release), _now(), entry_id),
            )
            row = cur.execute(
                f"SELECT {_CHARGE_COLUMNS} FROM charges WHERE entry_id = ?", (entry_id,)
            ).fetchone()
            if row is None:
                raise UnknownEntryError(f"no ledger entry {entry_id!r} in {self._path}")
        return _to_charge(row)

    def incomplete(self, stream_id: str | None = None) -> list[Reservation]:
        """Reservations whose release was never stored, oldest first (recompute them with their seeds)."""
        where = "completed_at IS NULL" + ("" if stream_id is None else " AND stream_id = ?")
        params = () if stream_id is None else (stream_id,)
        with self._read() as cur:
            rows = cur.execute(
                f"SELECT {_RESERVATION_COLUMNS} FROM charges WHERE {where} ORDER BY entry_id", params
            ).fetchall()
            return [self._to_reservation(cur, row) for row in rows]

    # ----------------------------------------------------------------- one-shot charges

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

        A one-shot charge has no node range: it counts against every window of the stream (for
        offline callers; the release path uses :meth:`reserve` and :meth:`complete`).

        If the (stream_id, window_id, mechanism) key was charged before, nothing is spent and the
        stored charge, with its stored release bytes, is returned; publish ``result.release``,
        not the bytes passed in (a reserved key not yet completed is completed with these bytes).
        Raises :class:`BudgetExhaustedError` (after recording the refusal) if the spend would take
        some window past the stream's lifetime budget.

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
            existing = self._lookup(cur, *request.key, completed=False)
            if existing is not None:
                if existing.release or self._completed(cur, existing.entry_id):
                    return request.replayed(existing)
                state = self._lifetime_state(cur, stream_id)
                release = release_bytes_of(release_bytes, ChargeReceipt(existing.entry_id, state.remaining))
                cur.execute(
                    "UPDATE charges SET release = ?, completed_at = ? WHERE entry_id = ?",
                    (release, _now(), existing.entry_id),
                )
                return request.replayed(self._lookup(cur, *request.key) or existing)
            self._stream(cur, stream_id)
            state = self._lifetime_state(cur, stream_id)
            now = _now()
            if not state.allows_everywhere(eps, dlt):
                # Recorded in the same committed transaction; raised once the refusal is durable.
                cur.execute(
                    "INSERT INTO refusals (stream_id, window_id, mechanism, epsilon, delta, refused_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (*request.key, str(eps), str(dlt), now),
                )
                refusal = BudgetExhaustedError(*request.key, request.cost, state.spent, state.budget)
            else:
                cur.execute(
                    "INSERT INTO charges (stream_id, window_id, mechanism, epsilon, delta, release, "
                    "charged_at, completed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (*request.key, str(eps), str(dlt), b"", now, now),
                )
                entry_id = cur.lastrowid
                assert entry_id is not None
                receipt = ChargeReceipt(entry_id, state.left_after(eps, dlt))
                release = release_bytes_of(release_bytes, receipt)
                cur.execute("UPDATE charges SET release = ? WHERE entry_id = ?", (release, entry_id))
                stream = self._stream(cur, stream_id).spend(eps, dlt)
                cur.execute(
                    "UPDATE streams SET epsilon_spent = ?, delta_spent = ?, unranged_epsilon = ?, "
                    "unranged_delta = ?, peak_epsilon = ?, peak_delta = ? WHERE stream_id = ?",
                    (*stream.spend_text, *state.after_unranged(eps, dlt).columns, stream_id),
                )
                self._count_level(cur, stream_id, -1, 0)
                return _to_charge(
                    (
                        entry_id,
                        *request.key,
                        str(eps),
                        str(dlt),
                        release,
                        now,
                        None,
                        None,
                        None,
                        None,
                        None,
                        None,
                    )
                )
        raise refusal

    @staticmethod
    def _completed(cur: sqlite3.Cursor, entry_id: int) -> bool:
        row = cur.execute("SELECT completed_at FROM charges WHERE entry_id = ?", (entry_id,)).fetchone()
        return row is not None and row[0] is not None

    def _lookup(
        self, cur: sqlite3.Cursor, stream_id: str, window_id: str, mechanism: str, *, completed: bool = True
    ) -> Charge | None:
        done = " AND completed_at IS NOT NULL" if completed else ""
        row = cur.execute(
            f"SELECT {_CHARGE_COLUMNS} FROM charges WHERE stream_id = ? AND window_id = ? AND mechanism = ?"
            f"{done}",
            (stream_id, window_id, mechanism),
        ).fetchone()
        return None if row is None else _to_charge(row)

    def lookup(self, stream_id: str, window_id: str, mechanism: str) -> Charge | None:
        """The completed charge stored under this key, if any (lets an agent skip recomputing a
        release; :meth:`reservation` also sees reservations not yet completed)."""
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
        """The outbox: completed charges not yet marked published, oldest first."""
        where = "published_at IS NULL AND completed_at IS NOT NULL" + (
            "" if stream_id is None else " AND stream_id = ?"
        )
        params = () if stream_id is None else (stream_id,)
        with self._read() as cur:
            rows = cur.execute(
                f"SELECT {_CHARGE_COLUMNS} FROM charges WHERE {where} ORDER BY entry_id", params
            ).fetchall()
        return [_to_charge(row) for row in rows]

    def entries(self, stream_id: str, visible_at: float | None = None) -> list[Charge]:
        """All completed charges of the stream, oldest first (:meth:`incomplete` lists the rest);
        with ``visible_at``, those scheduled at or before it."""
        visible = "" if visible_at is None else " AND (scheduled_at IS NULL OR scheduled_at <= ?)"
        with self._read() as cur:
            self._stream(cur, stream_id)
            rows = cur.execute(
                f"SELECT {_CHARGE_COLUMNS} FROM charges WHERE stream_id = ? AND completed_at IS NOT NULL"
                f"{visible} ORDER BY entry_id",
                (stream_id,) if visible_at is None else (stream_id, visible_at),
            ).fetchall()
        return [_to_charge(row) for row in rows]

    def latest_published(
        self,
        stream_id: str,
        mechanism_prefix: str = "",
        level: int | None = None,
        visible_at: float | None = None,
    ) -> Charge | None:
        """The stream's most recently charged release (of mechanisms starting with the prefix,
        of nodes of ``level`` if given, scheduled at or before ``visible_at`` if given) that was
        confirmed published."""
        by_level = "" if level is None else " AND level = ?"
        by_level += "" if visible_at is None else " AND (scheduled_at IS NULL OR scheduled_at <= ?)"
        params: tuple = (stream_id, len(mechanism_prefix), mechanism_prefix)
        params += () if level is None else (level,)
        params += () if visible_at is None else (visible_at,)
        with self._read() as cur:
            self._stream(cur, stream_id)
            row = cur.execute(
                f"SELECT {_CHARGE_COLUMNS} FROM charges WHERE stream_id = ? AND published_at IS NOT NULL "
                f"AND substr(mechanism, 1, ?) = ?{by_level} ORDER BY entry_id DESC LIMIT 1",
                params,
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
