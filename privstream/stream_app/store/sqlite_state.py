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

**The release tree (E-DESIGN.md §3.3).** :meth:`SqliteStateStore.close_window` turns a closed
window's raw rows into node (0, w)'s compact :class:`~privstream.agents.interfaces.NodeData` and
drops the rows, in one transaction with the schedule's last closed window; a parent node is
merged from its two stored children (:meth:`SqliteStateStore.merge_node`), never rebuilt from
Kafka. Nodes stay until the release agent drops them.

>>> bounds = NodeBounds()
>>> for offset, x in enumerate([5, 5, 9]):
...     _ = store.append("t", partition=0, offset=offset, x=x, y=1, user=None, time_window=None)
>>> store.close_window("t", "c2", 0, bounds, seqs=(0, 2)).counts.tolist()
[2]
>>> _ = store.close_window("t", "c2", 1, bounds, seqs=(2, 4))
>>> store.merge_node("t", "c2", 1, 0, bounds).xs.tolist(), store.schedule("t")
([5, 9], ScheduleState(family='c2', last_closed_window=1))
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from privstream.agents.interfaces import NodeBounds, NodeData, ScheduleState, StateStoreError, WindowData
from privstream.stream_app.store.migrations import Migration, SchemaTooNewError, latest, pending

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteStateStore", "StateStoreError"]

#: The schema as ordered migrations (see :mod:`.migrations`); ``PRAGMA user_version`` is the last
#: one applied. Files made before versions were recorded have version 0 and the tables of version 1
#: (hence ``IF NOT EXISTS`` there): opening them stamps them. Append a migration; never edit one.
MIGRATIONS = (
    Migration(
        1,
        "examples by stream and Kafka position, windows closed, SOA snapshots",
        (
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
        ),
    ),
    Migration(
        2,
        "the release tree: compact node data, the schedule's last closed window",
        (
            # A node's NodeData as NodeData.to_bytes() (numpy .npz, no pickle).
            """CREATE TABLE nodes (
            stream_id TEXT NOT NULL, family TEXT NOT NULL, level INTEGER NOT NULL, idx INTEGER NOT NULL,
            data BLOB NOT NULL,
            PRIMARY KEY (stream_id, family, level, idx)
        )""",
            """CREATE TABLE schedules (
            stream_id TEXT PRIMARY KEY, family TEXT NOT NULL, last_closed_window INTEGER
        )""",
        ),
    ),
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
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            self._retry(lambda: self._db.execute("PRAGMA journal_mode = WAL"), busy_timeout)
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._retry(self._migrate, busy_timeout)
            self._retry(
                lambda: self._db.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', ?)",
                    (secrets.token_hex(4),),
                ),
                busy_timeout,
            )
            row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
            self.generation: str = row[0]
            # Windows are loaded through a second connection: in WAL mode its read does not block
            # the writes of the ingest path, which the shared connection's lock would hold up for
            # as long as a 100,000-example window takes to read. (A memory database exists only
            # on its own connection, so it reads through the first.)
            self._reader, self._read_lock = self._db, self._lock
            if self.path != ":memory:":
                self._reader = sqlite3.connect(
                    self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
                )
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
        self,
        stream_id: str,
        partition: int,
        offset: int,
        x: int,
        y: int,
        user: str | None,
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
            return self._window_on(self._reader, where, params)

    @staticmethod
    def _window_on(db: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> WindowData:
        rows = db.execute(
            f"SELECT x, y, user_id, seq FROM examples WHERE {where} ORDER BY seq", params
        ).fetchall()
        if not rows:
            empty = np.empty(0, dtype=np.int64)
            return WindowData(empty, np.empty(0, dtype=np.uint8), np.empty(0, dtype=object), empty)
        xs, ys, users, seqs = zip(*rows, strict=True)
        vectors = isinstance(xs[0], str)
        return WindowData(
            np.array([json.loads(x) for x in xs], dtype=np.float64)
            if vectors
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
                "ORDER BY time_window",
                (stream_id,),
            ).fetchall()
        return [int(r[0]) for r in rows]

    # --- windows -------------------------------------------------------------------------------
    def mark_closed(
        self,
        stream_id: str,
        window_id: str,
        outcome: str,
        *,
        seqs: tuple[int, int] | None = None,
        time_window: int | None = None,
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
                    db.execute(
                        "DELETE FROM examples WHERE stream_id = ? AND seq >= ? AND seq < ?",
                        (stream_id, *seqs),
                    )
                if time_window is not None:
                    db.execute(
                        "DELETE FROM examples WHERE stream_id = ? AND time_window = ?",
                        (stream_id, time_window),
                    )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def closed_windows(self, stream_id: str, among: Iterable[str] | None = None) -> dict[str, str]:
        query, params = "SELECT window_id, outcome FROM windows WHERE stream_id = ?", [stream_id]
        if among is not None:
            ids = list(among)
            query += f" AND window_id IN ({', '.join('?' * len(ids))})"
            params += ids
        with self._lock:
            rows = self._db.execute(query, params).fetchall()
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

    # --- the release tree -------------------------------------------------------------------------
    def close_window(
        self,
        stream_id: str,
        family: str,
        window: int,
        bounds: NodeBounds,
        *,
        seqs: tuple[int, int] | None = None,
        time_window: int | None = None,
        vectors: int | None = None,
        user_level: bool = False,
    ) -> NodeData:
        """Turn the window's raw rows into node (0, window)'s data, store it, drop the rows and
        advance the schedule, in one transaction (idempotent: a closed window's node is returned).

        Rows come from sequence numbers ``[seqs[0], seqs[1])`` (count windows) or time window
        ``time_window``; ``vectors`` is the feature dimension (for an empty vector window);
        ``user_level`` keeps (user, x, y) rows, each user's first k (rows without a user, which
        validation dead-letters at the user level, are left out).
        """
        if (seqs is None) == (time_window is None):
            raise ValueError("close_window needs exactly one of seqs and time_window")
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                data = self._load_node(db, stream_id, family, 0, window)
                if data is None:
                    if seqs is not None:
                        where, params = "stream_id = ? AND seq >= ? AND seq < ?", (stream_id, *seqs)
                    else:
                        where, params = "stream_id = ? AND time_window = ?", (stream_id, time_window)
                    rows = self._window_on(db, where, params)
                    data = NodeData.from_window(rows, bounds, vectors=vectors, user_level=user_level)
                    self._save_node(db, stream_id, family, 0, window, data)
                    db.execute(f"DELETE FROM examples WHERE {where}", params)
                db.execute(
                    "INSERT INTO schedules VALUES (?, ?, ?) ON CONFLICT (stream_id) DO UPDATE SET "
                    "family = excluded.family, last_closed_window = max(coalesce(last_closed_window, "
                    "excluded.last_closed_window), excluded.last_closed_window)",
                    (stream_id, family, window),
                )
                db.execute("COMMIT")
                return data
            except BaseException:
                db.execute("ROLLBACK")
                raise

    @staticmethod
    def _load_node(
        db: sqlite3.Connection, stream_id: str, family: str, level: int, index: int
    ) -> NodeData | None:
        row = db.execute(
            "SELECT data FROM nodes WHERE stream_id = ? AND family = ? AND level = ? AND idx = ?",
            (stream_id, family, level, index),
        ).fetchone()
        return None if row is None else NodeData.from_bytes(row[0])

    @staticmethod
    def _save_node(
        db: sqlite3.Connection, stream_id: str, family: str, level: int, index: int, data: NodeData
    ) -> None:
        db.execute(
            "INSERT INTO nodes VALUES (?, ?, ?, ?, ?) ON CONFLICT (stream_id, family, level, idx) "
            "DO UPDATE SET data = excluded.data",
            (stream_id, family, level, index, data.to_bytes()),
        )

    def save_node(self, stream_id: str, family: str, level: int, index: int, data: NodeData) -> None:
        with self._lock:
            self._save_node(self._db, stream_id, family, level, index, data)

    def load_node(self, stream_id: str, family: str, level: int, index: int) -> NodeData | None:
        with self._read_lock:
            return self._load_node(self._reader, stream_id, family, level, index)

    def merge_node(self, stream_id: str, family: str, level: int, index: int, bounds: NodeBounds) -> NodeData:
        """Build node (level, index) from its two stored children and store it (idempotent)."""
        if level < 1:
            raise ValueError("only nodes of level >= 1 are merged from children")
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                data = self._load_node(db, stream_id, family, level, index)
                if data is None:
                    left = self._load_node(db, stream_id, family, level - 1, 2 * index)
                    right = self._load_node(db, stream_id, family, level - 1, 2 * index + 1)
                    if left is None or right is None:
                        raise StateStoreError(
                            f"state store {self.path}: node ({level}, {index}) of {stream_id!r}/{family} "
                            "cannot be built: a child node is missing (dropped before its parent was built?)"
                        )
                    data = NodeData.merge(left, right, bounds)
                    self._save_node(db, stream_id, family, level, index, data)
                db.execute("COMMIT")
                return data
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def drop_node(self, stream_id: str, family: str, level: int, index: int) -> None:
        with self._lock:
            self._db.execute(
                "DELETE FROM nodes WHERE stream_id = ? AND family = ? AND level = ? AND idx = ?",
                (stream_id, family, level, index),
            )

    def nodes(self, stream_id: str, family: str) -> list[tuple[int, int]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT level, idx FROM nodes WHERE stream_id = ? AND family = ? ORDER BY level, idx",
                (stream_id, family),
            ).fetchall()
        return [(int(level), int(index)) for level, index in rows]

    def schedule(self, stream_id: str) -> ScheduleState | None:
        with self._lock:
            row = self._db.execute(
                "SELECT family, last_closed_window FROM schedules WHERE stream_id = ?", (stream_id,)
            ).fetchone()
        return None if row is None else ScheduleState(row[0], row[1])

    def save_schedule(self, stream_id: str, state: ScheduleState) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO schedules VALUES (?, ?, ?) ON CONFLICT (stream_id) DO UPDATE SET "
                "family = excluded.family, last_closed_window = excluded.last_closed_window",
                (stream_id, state.family, state.last_closed_window),
            )
