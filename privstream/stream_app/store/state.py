"""Durable per-stream state: window buffers, the release tree's nodes, SOA snapshots.

Implements :class:`privstream.agents.interfaces.StateStore`, with its rules written once over
any SQL backend (:mod:`.sqlite_state`, :mod:`.postgres_state`: a :class:`StateBackend`). Every
example of a stream with private releases is appended here, keyed by its Kafka position, so that

* a replay after a crash or a rebalance (at-least-once delivery) stores nothing twice and an
  example keeps its sequence number, which makes count-window ids deterministic (positions are
  remembered per partition as a high-water mark, so a replay is recognised even after its window
  was released and its examples dropped; a partition whose log was replaced, its offsets gone
  back, is told apart and counted anew: :mod:`~privstream.stream_app.kafka.log_marks`);
* a window's examples survive a worker crash until the window is released (nothing lost);
* several workers can share the store.

>>> from privstream.stream_app.store.sqlite_state import SqliteStateStore
>>> store = SqliteStateStore(":memory:")
>>> store.append("s", partition=0, offset=7, x=3, y=1, user=None, time_window=None)
0
>>> store.append("s", partition=0, offset=7, x=3, y=1, user=None, time_window=None) is None  # replay
True
>>> store.count_window("s", 0, 1).xs.tolist()
[3]

**The release tree.** :meth:`SqlStateStore.close_window` turns a closed window's raw rows into
node (0, w)'s compact :class:`~privstream.agents.interfaces.NodeData` and drops the rows, in one
transaction with the schedule's last closed window; a parent node is merged from its two stored
children (:meth:`SqlStateStore.merge_node`), never rebuilt from Kafka. Nodes stay until the
release agent drops them.

>>> bounds = NodeBounds()
>>> for offset, x in enumerate([5, 5, 9]):
...     _ = store.append("t", partition=0, offset=offset, x=x, y=1, user=None, time_window=None)
>>> store.close_window("t", "c2", 0, bounds, seqs=(0, 2)).counts.tolist()
[2]
>>> _ = store.close_window("t", "c2", 1, bounds, seqs=(2, 4))
>>> store.merge_node("t", "c2", 1, 0, bounds).xs.tolist(), store.schedule("t")
([5, 9], ScheduleState(family='c2', last_closed_window=1))

**Concurrency.** An append locks its (stream, partition) position row, then the stream's
sequence row (always in that order, so appenders never deadlock), so the sequence numbers of a
stream stay dense and in arrival order across workers. A body may run twice (PostgreSQL reruns
a transaction after a cut connection): an append is idempotent per Kafka position, a node is
stored once (another worker's, stored first, stands).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

import numpy as np

from privstream.agents.interfaces import NodeBounds, NodeData, ScheduleState, StateStoreError
from privstream.agents.ledger_port import LedgerIdentity
from privstream.stream_app.store.state_rows import Cursor, Example, ExampleRows, StateBackend
from privstream.stream_app.store.time_chunks import drop_time_chunks

__all__ = ["TABLES", "Example", "LedgerRecord", "SqlStateStore", "StateBackend", "StateStoreError"]

#: The state store's tables, as the portable statements name them.
TABLES = (
    "meta",
    "stream_seq",
    "positions",
    "examples",
    "windows",
    "soa",
    "nodes",
    "schedules",
    "example_chunks",
)
_LEDGER_KEYS = (
    "SELECT key, value FROM {meta} "
    "WHERE key IN ('ledger_id', 'ledger_epoch', 'ledger_entries', 'ledger_since')"
)


class LedgerRecord(NamedTuple):
    """What a state store remembers of its ledger: the highest epoch and entry id it saw, and
    since when its history is that ledger's (windows closed since then must be charged there)."""

    identity: LedgerIdentity
    since: datetime


class SqlStateStore(ExampleRows):
    """The :class:`~privstream.agents.interfaces.StateStore` over a :class:`StateBackend`;
    thread-safe."""

    def __init__(self, backend: StateBackend) -> None:
        self._backend = backend
        self._q = backend.dialect.sql
        self._time = backend.dialect.time

        def generation(cur: Cursor) -> str:
            cur.execute(
                self._q(
                    "INSERT INTO {meta} (key, value) VALUES ('generation', ?) ON CONFLICT (key) DO NOTHING"
                ),
                (secrets.token_hex(4),),
            )
            return str(
                cur.execute(self._q("SELECT value FROM {meta} WHERE key = 'generation'")).fetchone()[0]
            )

        #: Random, fixed when the store is created: part of count-window ids (a fresh store, fresh ids).
        self.generation: str = backend.run(generation)
        #: (stream, time window)s holding their ``keep_first`` rows already (see :meth:`append_many`).
        self._full_windows: set[tuple[str, int]] = set()
        #: A full bottom-k window's highest kept priority, as last committed: a row at or above it
        #: is not taken in (the bound only falls, so one remembered by an earlier batch is safe).
        self._thresholds: dict[tuple[str, int], int] = {}
        #: Per stream, the last closed window whose cached entries above were dropped.
        self._forgotten_through: dict[str, int] = {}

    @property
    def location(self) -> str:
        return self._backend.location

    def close(self) -> None:
        self._backend.close()

    # --- the ledger this store's history belongs to ---------------------------------------------
    def ledger_record(self) -> LedgerRecord | None:
        """The ledger whose history this store holds (None: a store that has not seen one)."""
        rows = dict(self._read(_LEDGER_KEYS))
        if "ledger_id" not in rows:
            return None
        identity = LedgerIdentity(rows["ledger_id"], int(rows["ledger_epoch"]), int(rows["ledger_entries"]))
        return LedgerRecord(identity, datetime.fromisoformat(rows["ledger_since"]))

    def record_ledger(self, identity: LedgerIdentity, *, adopted: bool = False) -> LedgerRecord:
        """Remember that this store's history continues on ledger ``identity`` (its epoch and
        entries only ever rise: several workers record what they started on). A new ledger id, or
        ``adopted``, starts the history the ledger must hold from now."""
        q = self._q

        def run(cur: Cursor) -> LedgerRecord:
            rows = dict(cur.execute(q(_LEDGER_KEYS)).fetchall())
            now = datetime.now(UTC).isoformat()
            values: dict[str, str] = {}
            if rows.get("ledger_id") != identity.ledger_id or adopted:
                values.update(ledger_id=identity.ledger_id, ledger_since=now)
                epoch, entries = 0, 0
            else:
                epoch, entries = int(rows["ledger_epoch"]), int(rows["ledger_entries"])
            values["ledger_epoch"] = str(max(epoch, identity.epoch))
            values["ledger_entries"] = str(max(entries, identity.entries))
            cur.executemany(
                q(
                    "INSERT INTO {meta} (key, value) VALUES (?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                ),
                list(values.items()),
            )
            rows.update(values)
            recorded = LedgerIdentity(
                rows["ledger_id"], int(rows["ledger_epoch"]), int(rows["ledger_entries"])
            )
            return LedgerRecord(recorded, datetime.fromisoformat(rows["ledger_since"]))

        return self._backend.run(run)

    def released_windows(self, stream_id: str, since: datetime, limit: int = 100) -> list[str]:
        """The stream's newest windows (nodes) closed as released since ``since``, newest first."""
        rows = self._read(
            "SELECT window_id, outcome FROM {windows} WHERE stream_id = ? AND closed_at >= ? "
            "ORDER BY closed_at DESC",
            (stream_id, self._time(since)),
        )
        return [window for window, outcome in rows if "released" in outcome.split(",")][:limit]

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
        q = self._q

        def run(cur: Cursor) -> None:
            cur.execute(
                q(
                    "INSERT INTO {windows} (stream_id, window_id, outcome, closed_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT DO NOTHING"
                ),
                (stream_id, window_id, outcome, self._time(datetime.now(UTC))),
            )
            if seqs is not None:
                cur.execute(
                    q("DELETE FROM {examples} WHERE stream_id = ? AND seq >= ? AND seq < ?"),
                    (stream_id, *seqs),
                )
                self._drop_chunks(cur, stream_id, *seqs)
            if time_window is not None:
                cur.execute(
                    q("DELETE FROM {examples} WHERE stream_id = ? AND time_window = ?"),
                    (stream_id, time_window),
                )
                drop_time_chunks(cur, q, stream_id, time_window)

        self._backend.run(run)
        if time_window is not None:
            self._forget_window(stream_id, time_window)

    def _forget_window(self, stream_id: str, time_window: int) -> None:
        self._full_windows.discard((stream_id, time_window))
        self._thresholds.pop((stream_id, time_window), None)

    def closed_windows(self, stream_id: str, among: Iterable[str] | None = None) -> dict[str, str]:
        query, params = "SELECT window_id, outcome FROM {windows} WHERE stream_id = ?", [stream_id]
        if among is not None:
            ids = list(among)
            query += f" AND window_id IN ({', '.join('?' * len(ids))})" if ids else " AND 1 = 0"
            params += ids
        return dict(self._read(query, params))

    # --- SOA snapshots ---------------------------------------------------------------------------
    def save_soa(self, stream_id: str, state: dict[str, Any]) -> None:
        self._write(
            "INSERT INTO {soa} (stream_id, state, updated_at) VALUES (?, ?, ?) ON CONFLICT (stream_id) "
            "DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
            (stream_id, json.dumps(state), self._time(datetime.now(UTC))),
        )

    def load_soa(self, stream_id: str) -> dict[str, Any] | None:
        rows = self._read("SELECT state FROM {soa} WHERE stream_id = ?", (stream_id,))
        return json.loads(rows[0][0]) if rows else None

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

        A feature-vector node at the example level keeps its window's first
        ``bounds.max_node_examples`` rows by arrival, so only those are read: the close reads and
        decodes O(cap) rows whatever the window's (private) size.
        """
        if (seqs is None) == (time_window is None):
            raise ValueError("close_window needs exactly one of seqs and time_window")
        params: tuple[str | int | None, ...]
        if seqs is not None:
            where, params = "stream_id = ? AND seq >= ? AND seq < ?", (stream_id, *seqs)
        else:
            where, params = "stream_id = ? AND time_window = ?", (stream_id, time_window)
        index = -1 if time_window is None else time_window  # the time window (count windows: unused)

        def run(cur: Cursor) -> NodeData:
            if time_window is not None:
                # The appends' lock (append_time_rows): a row is stored before this close reads the
                # window, or after it commits, and then finds the window closed.
                cur.execute(
                    self._q(
                        "INSERT INTO {stream_seq} (stream_id, next_seq) VALUES (?, 0) ON CONFLICT DO NOTHING"
                    ),
                    (stream_id,),
                )
                cur.execute(
                    self._q("SELECT next_seq FROM {stream_seq} WHERE stream_id = ?{for_update}"), (stream_id,)
                ).fetchone()
            data = self._load_node(cur, stream_id, family, 0, window)
            if data is None:
                if bounds.sample:
                    built = self._sample_on(cur, where, params, bounds)
                else:
                    first = bounds.max_node_examples if vectors is not None and not user_level else None
                    if seqs is not None:
                        rows = self._seq_window_on(cur, stream_id, *seqs, first=first)
                    else:
                        rows = self._time_window_on(cur, stream_id, index, first=first)
                    built = NodeData.from_window(rows, bounds, vectors=vectors, user_level=user_level)
                data = self._store_node(cur, stream_id, family, 0, window, built)
                cur.execute(self._q(f"DELETE FROM {{examples}} WHERE {where}"), params)
                if seqs is not None:
                    self._drop_chunks(cur, stream_id, *seqs)
                else:
                    drop_time_chunks(cur, self._q, stream_id, index)
            cur.execute(
                self._q(
                    "INSERT INTO {schedules} (stream_id, family, last_closed_window) VALUES (?, ?, ?) "
                    "ON CONFLICT (stream_id) DO UPDATE SET family = excluded.family, last_closed_window = "
                    "{greatest}(coalesce({schedules}.last_closed_window, excluded.last_closed_window), "
                    "excluded.last_closed_window)"
                ),
                (stream_id, family, window),
            )
            return data

        node = self._backend.run(run)
        if time_window is not None:
            self._forget_window(stream_id, time_window)
        return node

    def _sample_on(self, cur: Cursor, where: str, params: Sequence[Any], bounds: NodeBounds) -> NodeData:
        """A bottom-k window's node: its rows of lowest priority, at most the cap (so O(cap) read)."""
        statement = self._q(
            f"SELECT y, coalesce(priority, -1), {self._backend.point_columns} FROM {{examples}} "
            f"WHERE {where} ORDER BY priority, seq LIMIT {int(bounds.max_node_examples or 0)}"
        )
        rows = cur.execute(statement, params).fetchall()
        if not rows:
            empty = np.zeros(0, np.int64)
            return NodeData.sampled(empty, np.zeros(0, np.uint8), empty, bounds)
        ys, priorities = zip(*(row[:2] for row in rows), strict=True)
        xs = self._backend.points([row[2:] for row in rows])
        return NodeData.sampled(xs, np.array(ys, np.uint8), np.array(priorities, np.int64), bounds)

    def _load_node(self, cur: Cursor, stream_id: str, family: str, level: int, index: int) -> NodeData | None:
        row = cur.execute(
            self._q("SELECT data FROM {nodes} WHERE stream_id = ? AND family = ? AND level = ? AND idx = ?"),
            (stream_id, family, level, index),
        ).fetchone()
        return None if row is None else NodeData.from_bytes(bytes(row[0]))

    def _store_node(
        self, cur: Cursor, stream_id: str, family: str, level: int, index: int, data: NodeData
    ) -> NodeData:
        """Store a node built here, unless another worker stored it meanwhile: theirs stands."""
        cur.execute(
            self._q(
                "INSERT INTO {nodes} (stream_id, family, level, idx, data) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING"
            ),
            (stream_id, family, level, index, data.to_bytes()),
        )
        if cur.rowcount == 0:
            return self._load_node(cur, stream_id, family, level, index) or data
        return data

    def save_node(self, stream_id: str, family: str, level: int, index: int, data: NodeData) -> None:
        self._write(
            "INSERT INTO {nodes} (stream_id, family, level, idx, data) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (stream_id, family, level, idx) DO UPDATE SET data = excluded.data",
            (stream_id, family, level, index, data.to_bytes()),
        )

    def load_node(self, stream_id: str, family: str, level: int, index: int) -> NodeData | None:
        return self._backend.run(
            lambda cur: self._load_node(cur, stream_id, family, level, index), mode="read"
        )

    def merge_node(self, stream_id: str, family: str, level: int, index: int, bounds: NodeBounds) -> NodeData:
        """Build node (level, index) from its two stored children and store it (idempotent)."""
        if level < 1:
            raise ValueError("only nodes of level >= 1 are merged from children")

        def run(cur: Cursor) -> NodeData:
            data = self._load_node(cur, stream_id, family, level, index)
            if data is not None:
                return data
            left = self._load_node(cur, stream_id, family, level - 1, 2 * index)
            right = self._load_node(cur, stream_id, family, level - 1, 2 * index + 1)
            if left is None or right is None:
                raise StateStoreError(
                    f"state store {self.location}: node ({level}, {index}) of {stream_id!r}/{family} cannot "
                    "be built: a child node is missing (dropped before its parent was built?)"
                )
            return self._store_node(cur, stream_id, family, level, index, NodeData.merge(left, right, bounds))

        return self._backend.run(run)

    def drop_node(self, stream_id: str, family: str, level: int, index: int) -> None:
        self._write(
            "DELETE FROM {nodes} WHERE stream_id = ? AND family = ? AND level = ? AND idx = ?",
            (stream_id, family, level, index),
        )

    def nodes(self, stream_id: str, family: str) -> list[tuple[int, int]]:
        rows = self._read(
            "SELECT level, idx FROM {nodes} WHERE stream_id = ? AND family = ? ORDER BY level, idx",
            (stream_id, family),
        )
        return [(int(level), int(index)) for level, index in rows]

    def schedule(self, stream_id: str) -> ScheduleState | None:
        rows = self._read(
            "SELECT family, last_closed_window FROM {schedules} WHERE stream_id = ?", (stream_id,)
        )
        if not rows:
            return None
        family, last = rows[0]
        return ScheduleState(family, None if last is None else int(last))

    def save_schedule(self, stream_id: str, state: ScheduleState) -> None:
        self._write(
            "INSERT INTO {schedules} (stream_id, family, last_closed_window) VALUES (?, ?, ?) "
            "ON CONFLICT (stream_id) DO UPDATE SET family = excluded.family, "
            "last_closed_window = excluded.last_closed_window",
            (stream_id, state.family, state.last_closed_window),
        )
