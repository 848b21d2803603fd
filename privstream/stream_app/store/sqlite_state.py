"""Durable per-stream state in SQLite: window buffers and SOA snapshots.

Implements :class:`privstream.agents.interfaces.StateStore`. Every example of a stream with
private releases is appended here, keyed by its Kafka position, so that

* a replay after a crash or a rebalance (at-least-once delivery) stores nothing twice and an
  example keeps its sequence number, which makes count-window ids deterministic (positions are
  remembered per partition as a high-water mark, so a replay is recognised even after its window
  was released and its examples dropped; a topic deleted and re-created needs a fresh store);
* a window's examples survive a worker crash until the window is released (nothing lost);
* several workers on one host can share the file (WAL, ``BEGIN IMMEDIATE``, busy timeout).

Writes use ``synchronous=NORMAL`` in WAL mode: durable across a process crash (SIGKILL), the
failure this guards against. An operating-system crash may lose the last transactions; the
privacy ledger, not this store, is the place with ``synchronous=FULL``, because losing a
buffered example costs a little accuracy while losing a charge would cost privacy.

>>> store = SqliteStateStore(":memory:")
>>> store.append("s", partition=0, offset=7, x=3, y=1, user=None, time_window=None)
0
>>> store.append("s", partition=0, offset=7, x=3, y=1, user=None, time_window=None) is None  # replay
True
>>> store.count_window("s", 0, 1).xs.tolist()
[3]
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from privstream.agents.interfaces import StateStoreError, WindowData
from privstream.stream_app.store.migrations import Migration, SchemaTooNewError, latest, pending

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteStateStore", "StateStoreError"]

#: The schema as ordered migrations (see :mod:`.migrations`); ``PRAGMA user_version`` is the last
#: one applied. Files made before versions were recorded have version 0 and the tables of version 1
#: (hence ``IF NOT EXISTS`` there): opening them stamps them. Append a migration; never edit one.
MIGRATIONS = (
    Migration(1, "examples by stream and Kafka position, windows closed, SOA snapshots", (
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS stream_seq (stream_id TEXT PRIMARY KEY, next_seq INTEGER NOT NULL)",
        # The next Kafka offset expected per (stream, partition): a partition delivers in offset
        # order, so anything below it was stored before (perhaps already released and dropped).
        """CREATE TABLE IF NOT EXISTS positions (
            stream_id TEXT NOT NULL, part INTEGER NOT NULL, next_offset INTEGER NOT NULL,
            PRIMARY KEY (stream_id, part)
        )""",
        """CREATE TABLE IF NOT EXISTS examples (
            stream_id   TEXT NOT NULL,
            seq         INTEGER NOT NULL,
            part        INTEGER NOT NULL,
            kafka_offset INTEGER NOT NULL,
            item        INTEGER NOT NULL,  -- position inside an ExampleBatch message (0 otherwise)
            x           INTEGER NOT NULL,  -- a point, or a feature vector as JSON text
            y           INTEGER NOT NULL,
            user_id     TEXT,
            time_window INTEGER,
            PRIMARY KEY (stream_id, seq),
            UNIQUE (stream_id, part, kafka_offset, item)
        )""",
        """CREATE INDEX IF NOT EXISTS examples_by_time ON examples (stream_id, time_window)
            WHERE time_window IS NOT NULL""",
        """CREATE TABLE IF NOT EXISTS windows (
            stream_id TEXT NOT NULL,
            window_id TEXT NOT NULL,
            outcome   TEXT NOT NULL,
            closed_at TEXT NOT NULL,
            PRIMARY KEY (stream_id, window_id)
        )""",
        """CREATE TABLE IF NOT EXISTS soa (
            stream_id TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at TEXT NOT NULL
        )""",
    )),
)
SCHEMA_VERSION = latest(MIGRATIONS)


class SqliteStateStore:
    """The SQLite :class:`~privstream.agents.interfaces.StateStore`; thread-safe."""

    def __init__(self, path: str | Path, busy_timeout: float = 30.0):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None,
                                       check_same_thread=False)
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            self._retry(lambda: self._db.execute("PRAGMA journal_mode = WAL"), busy_timeout)
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._retry(self._migrate, busy_timeout)
            self._retry(lambda: self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', ?)", (secrets.token_hex(4),)
            ), busy_timeout)
            row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
            self.generation: str = row[0]
            # Windows are loaded through a second connection: in WAL mode its read does not block
            # the writes of the ingest path, which the shared connection's lock would hold up for
            # as long as a 100,000-example window takes to read. (A memory database exists only
            # on its own connection, so it reads through the first.)
            self._reader, self._read_lock = self._db, self._lock
            if self.path != ":memory:":
                self._reader = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None,
                                               check_same_thread=False)
                self._reader.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
                self._read_lock = threading.Lock()
        except sqlite3.DatabaseError as exc:
            raise StateStoreError(f"state store {self.path} cannot be opened: {exc}") from exc

    def _migrate(self) -> None:
        """Check the file's schema version and apply the missing migrations, in one transaction."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if version == 0 and tables and "meta" not in tables:
                raise StateStoreError(
                    f"state store {self.path} is another application's database (tables {sorted(tables)})"
                )
            try:
                steps = pending(version, MIGRATIONS)
            except SchemaTooNewError as exc:
                raise StateStoreError(f"state store {self.path}: {exc}") from None
            for migration in steps:
                for statement in migration.statements:
                    db.execute(statement)
            if steps:
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    @property
    def location(self) -> str:
        return self.path

    @staticmethod
    def _retry(action: Any, timeout: float) -> Any:
        """Run ``action``, retrying 'database is locked' (SQLite skips its busy handler for
        some schema and journal-mode changes when several processes open a new file at once)."""
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            try:
                return action()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def close(self) -> None:
        with self._read_lock:
            self._reader.close()
        with self._lock:
            self._db.close()

    # --- examples ------------------------------------------------------------------------------
    def append(
        self, stream_id: str, partition: int, offset: int, x: int, y: int, user: str | None,
        time_window: int | None,
    ) -> int | None:
        """One example (see :meth:`append_many`); its sequence number, or None for a replay."""
        seqs = self.append_many(stream_id, partition, [(offset, x, y, user, time_window)])
        return seqs[0] if seqs else None

    def append_many(
        self, stream_id: str, partition: int, rows: Sequence[tuple[int, int, int, str | None, int | None]]
    ) -> list[int]:
        """Store ``(offset, x, y, user, time_window)`` rows of one partition, in offset order.

        Rows from messages stored before (offset below the partition's high-water mark) are
        skipped; the others get consecutive sequence numbers, returned in order. One transaction.
        """
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(
                    "SELECT next_offset FROM positions WHERE stream_id = ? AND part = ?",
                    (stream_id, partition),
                ).fetchone()
                low = -1 if row is None else row[0]
                fresh = [r for r in rows if r[0] >= low]
                if not fresh:
                    db.execute("COMMIT")
                    return []
                first = self._next_seq(stream_id)
                values, item, previous = [], 0, None
                for i, (offset, x, y, user, window) in enumerate(fresh):
                    item = item + 1 if offset == previous else 0
                    previous = offset
                    # A feature vector is kept as JSON text (SQLite columns take any type).
                    point = json.dumps(x) if isinstance(x, list) else int(x)
                    values.append(
                        (stream_id, first + i, partition, offset, item, point, int(y), user, window)
                    )
                db.executemany("INSERT INTO examples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
                db.execute(
                    "INSERT INTO positions VALUES (?, ?, ?) ON CONFLICT (stream_id, part) "
                    "DO UPDATE SET next_offset = excluded.next_offset",
                    (stream_id, partition, fresh[-1][0] + 1),
                )
                db.execute(
                    "INSERT INTO stream_seq (stream_id, next_seq) VALUES (?, ?) "
                    "ON CONFLICT (stream_id) DO UPDATE SET next_seq = excluded.next_seq",
                    (stream_id, first + len(fresh)),
                )
                db.execute("COMMIT")
                return list(range(first, first + len(fresh)))
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def _next_seq(self, stream_id: str) -> int:
        row = self._db.execute("SELECT next_seq FROM stream_seq WHERE stream_id = ?", (stream_id,)).fetchone()
        return 0 if row is None else int(row[0])

    def next_seq(self, stream_id: str) -> int:
        with self._lock:
            return self._next_seq(stream_id)

    def partitions(self, stream_id: str) -> set[int]:
        with self._lock:
            rows = self._db.execute("SELECT part FROM positions WHERE stream_id = ?", (stream_id,)).fetchall()
        return {int(r[0]) for r in rows}

    def _window(self, where: str, params: tuple[Any, ...]) -> WindowData:
        with self._read_lock:
            rows = self._reader.execute(
                f"SELECT x, y, user_id, seq FROM examples WHERE {where} ORDER BY seq", params
            ).fetchall()
        if not rows:
            empty = np.empty(0, dtype=np.int64)
            return WindowData(empty, np.empty(0, dtype=np.uint8), np.empty(0, dtype=object), empty)
        xs, ys, users, seqs = zip(*rows, strict=True)
        vectors = isinstance(xs[0], str)
        return WindowData(
            np.array([json.loads(x) for x in xs], dtype=np.float64) if vectors
            else np.array(xs, dtype=np.int64),
            np.array(ys, dtype=np.uint8),
            np.array(users, dtype=object),
            np.array(seqs, dtype=np.int64),
        )

    def count_window(self, stream_id: str, start: int, end: int) -> WindowData:
        return self._window("stream_id = ? AND seq >= ? AND seq < ?", (stream_id, start, end))

    def time_window(self, stream_id: str, index: int) -> WindowData:
        return self._window("stream_id = ? AND time_window = ?", (stream_id, index))

    def pending_time_windows(self, stream_id: str) -> list[int]:
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT time_window FROM examples WHERE stream_id = ? AND time_window IS NOT NULL "
                "ORDER BY time_window", (stream_id,),
            ).fetchall()
        return [int(r[0]) for r in rows]

    # --- windows -------------------------------------------------------------------------------
    def mark_closed(
        self, stream_id: str, window_id: str, outcome: str, *,
        seqs: tuple[int, int] | None = None, time_window: int | None = None,
    ) -> None:
        """Record the window as done and drop its examples (they are no longer needed)."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "INSERT OR IGNORE INTO windows VALUES (?, ?, ?, ?)",
                    (stream_id, window_id, outcome, datetime.now(UTC).isoformat()),
                )
                if seqs is not None:
                    db.execute("DELETE FROM examples WHERE stream_id = ? AND seq >= ? AND seq < ?",
                               (stream_id, *seqs))
                if time_window is not None:
                    db.execute("DELETE FROM examples WHERE stream_id = ? AND time_window = ?",
                               (stream_id, time_window))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def closed_windows(self, stream_id: str) -> dict[str, str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT window_id, outcome FROM windows WHERE stream_id = ?", (stream_id,)
            ).fetchall()
        return dict(rows)

    # --- SOA snapshots ---------------------------------------------------------------------------
    def save_soa(self, stream_id: str, state: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO soa VALUES (?, ?, ?) ON CONFLICT (stream_id) DO UPDATE SET "
                "state = excluded.state, updated_at = excluded.updated_at",
                (stream_id, json.dumps(state), datetime.now(UTC).isoformat()),
            )

    def load_soa(self, stream_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT state FROM soa WHERE stream_id = ?", (stream_id,)).fetchone()
        return None if row is None else json.loads(row[0])
