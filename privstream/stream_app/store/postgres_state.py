"""Durable per-stream state in PostgreSQL: window buffers and SOA snapshots, shared across hosts.

The same store as :class:`~.sqlite_state.SqliteStateStore` (whose module docstring says what it
is for), behind :class:`privstream.agents.interfaces.StateStore`, checked by one contract suite
over both backends (``tests/stream_app/store/test_state_store_contract.py``).

>>> store = PostgresStateStore(PostgresConfig("postgresql://privstream@db/privstream"))  # doctest: +SKIP
>>> store.append("s", partition=0, offset=7, x=3, y=1, user=None, time_window=None)  # doctest: +SKIP
0

**Concurrency.** An append locks its (stream, partition) position row, then the stream's
sequence row (always in that order, so appenders never deadlock), so the sequence numbers of a
stream stay dense and in arrival order across workers; appends of different streams do not wait
for each other, and reads (a large window) never block appends (MVCC).

**A dropped connection.** Each operation is one transaction, rerun on a fresh connection when
the connection breaks (see :mod:`.postgres_db`); an append is idempotent per Kafka position, so
a rerun after a COMMIT whose answer was lost stores nothing twice (it then answers "replay", and
the window it completed is released by the recovery pass that runs when partitions are assigned).

**Schema.** Component ``state`` in ``privstream_migrations``; created when missing (an empty
store costs no privacy: the window buffers are refilled from Kafka), checked when present.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg

from privstream.agents.interfaces import NodeBounds, NodeData, ScheduleState, StateStoreError, WindowData
from privstream.stream_app.store.migrations import Migration
from privstream.stream_app.store.postgres_db import Database, PostgresConfig, StoreErrors

__all__ = ["MIGRATIONS", "PostgresConfig", "PostgresStateStore", "StateStoreError"]

#: The state store's schema as ordered migrations (component ``state``); append, never edit.
MIGRATIONS = (
    Migration(
        1,
        "examples by stream and Kafka position, windows closed, SOA snapshots",
        (
            "CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            "CREATE TABLE state_stream_seq (stream_id TEXT PRIMARY KEY, next_seq BIGINT NOT NULL)",
            # The next Kafka offset expected per (stream, partition): anything below was stored before.
            """CREATE TABLE state_positions (
            stream_id TEXT NOT NULL, part INTEGER NOT NULL, next_offset BIGINT NOT NULL,
            PRIMARY KEY (stream_id, part)
        )""",
            """CREATE TABLE state_examples (
            stream_id    TEXT NOT NULL,
            seq          BIGINT NOT NULL,
            part         INTEGER NOT NULL,
            kafka_offset BIGINT NOT NULL,
            item         INTEGER NOT NULL,  -- position inside an ExampleBatch message (0 otherwise)
            x            BIGINT,            -- a point of a hypothesis class's domain, or
            x_vector     DOUBLE PRECISION[],  -- a feature vector
            y            SMALLINT NOT NULL,
            user_id      TEXT,
            time_window  BIGINT,
            PRIMARY KEY (stream_id, seq),
            UNIQUE (stream_id, part, kafka_offset, item),
            CHECK ((x IS NULL) <> (x_vector IS NULL))
        )""",
            """CREATE INDEX state_examples_by_time ON state_examples (stream_id, time_window)
            WHERE time_window IS NOT NULL""",
            """CREATE TABLE state_windows (
            stream_id TEXT NOT NULL, window_id TEXT NOT NULL, outcome TEXT NOT NULL,
            closed_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (stream_id, window_id)
        )""",
            """CREATE TABLE state_soa (
            stream_id TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at TIMESTAMPTZ NOT NULL
        )""",
        ),
    ),
    Migration(
        2,
        "the release tree: compact node data, the schedule's last closed window",
        (
            # A node's NodeData as NodeData.to_bytes() (numpy .npz, no pickle).
            """CREATE TABLE state_nodes (
            stream_id TEXT NOT NULL, family TEXT NOT NULL, level INTEGER NOT NULL, idx BIGINT NOT NULL,
            data BYTEA NOT NULL,
            PRIMARY KEY (stream_id, family, level, idx)
        )""",
            """CREATE TABLE state_schedules (
            stream_id TEXT PRIMARY KEY, family TEXT NOT NULL, last_closed_window BIGINT
        )""",
        ),
    ),
)
TABLES = frozenset(
    {
        "state_meta",
        "state_stream_seq",
        "state_positions",
        "state_examples",
        "state_windows",
        "state_soa",
        "state_nodes",
        "state_schedules",
    }
)
_ERRORS = StoreErrors(StateStoreError, StateStoreError, StateStoreError, StateStoreError, StateStoreError)

Cursor = psycopg.Cursor[Any]


class PostgresStateStore:
    """The PostgreSQL :class:`~privstream.agents.interfaces.StateStore`; thread-safe (a pool)."""

    def __init__(self, config: PostgresConfig | str) -> None:
        if isinstance(config, str):
            config = PostgresConfig(config)
        self._db = Database(config, _ERRORS, what="state store")
        self._db.open()
        try:
            self._db.migrate("state", MIGRATIONS, TABLES, create=True)

            def generation(cur: Cursor) -> str:
                cur.execute(
                    "INSERT INTO state_meta VALUES ('generation', %s) ON CONFLICT (key) DO NOTHING",
                    (secrets.token_hex(4),),
                )
                row = cur.execute("SELECT value FROM state_meta WHERE key = 'generation'").fetchone()
                return str(row[0])  # type: ignore[index]

            self.generation: str = self._db.transaction(generation)
        except BaseException:
            self._db.close()
            raise

    @property
    def location(self) -> str:
        return self._db.config.display

    def close(self) -> None:
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
        if not rows:
            return []

        def run(cur: Cursor) -> list[int]:
            cur.execute(
                "INSERT INTO state_positions VALUES (%s, %s, -1) ON CONFLICT (stream_id, part) DO NOTHING",
                (stream_id, partition),
            )
            low = cur.execute(
                "SELECT next_offset FROM state_positions WHERE stream_id = %s AND part = %s FOR UPDATE",
                (stream_id, partition),
            ).fetchone()[0]  # type: ignore[index]
            fresh = [r for r in rows if r[0] >= low]
            if not fresh:
                return []
            cur.execute(
                "INSERT INTO state_stream_seq VALUES (%s, 0) ON CONFLICT (stream_id) DO NOTHING", (stream_id,)
            )
            first = int(
                cur.execute(
                    "SELECT next_seq FROM state_stream_seq WHERE stream_id = %s FOR UPDATE", (stream_id,)
                ).fetchone()[0]
            )  # type: ignore[index]
            with cur.copy(
                "COPY state_examples (stream_id, seq, part, kafka_offset, item, x, x_vector, y, user_id, "
                "time_window) FROM STDIN"
            ) as copy:
                item, previous = 0, None
                for i, (offset, x, y, user, window) in enumerate(fresh):
                    item = item + 1 if offset == previous else 0
                    previous = offset
                    vector = isinstance(x, list | tuple | np.ndarray)
                    copy.write_row(
                        (
                            stream_id,
                            first + i,
                            partition,
                            offset,
                            item,
                            None if vector else int(x),
                            [float(v) for v in x] if vector else None,
                            int(y),
                            user,
                            window,
                        )
                    )
            cur.execute(
                "UPDATE state_positions SET next_offset = %s WHERE stream_id = %s AND part = %s",
                (fresh[-1][0] + 1, stream_id, partition),
            )
            cur.execute(
                "UPDATE state_stream_seq SET next_seq = %s WHERE stream_id = %s",
                (first + len(fresh), stream_id),
            )
            return list(range(first, first + len(fresh)))

        return self._db.transaction(run)

    def next_seq(self, stream_id: str) -> int:
        row = self._db.transaction(
            lambda cur: cur.execute(
                "SELECT next_seq FROM state_stream_seq WHERE stream_id = %s", (stream_id,)
            ).fetchone()
        )
        return 0 if row is None else int(row[0])

    def partitions(self, stream_id: str) -> set[int]:
        rows = self._db.transaction(
            lambda cur: cur.execute(
                "SELECT part FROM state_positions WHERE stream_id = %s", (stream_id,)
            ).fetchall()
        )
        return {int(r[0]) for r in rows}

    def _window(self, where: str, params: tuple[Any, ...]) -> WindowData:
        return self._db.transaction(lambda cur: self._window_on(cur, where, params))

    @staticmethod
    def _window_on(cur: Cursor, where: str, params: tuple[Any, ...]) -> WindowData:
        rows = cur.execute(
            f"SELECT x, x_vector, y, user_id, seq FROM state_examples WHERE {where} ORDER BY seq", params
        ).fetchall()
        if not rows:
            empty = np.empty(0, dtype=np.int64)
            return WindowData(empty, np.empty(0, dtype=np.uint8), np.empty(0, dtype=object), empty)
        xs, vectors, ys, users, seqs = zip(*rows, strict=True)
        return WindowData(
            np.array(vectors, dtype=np.float64) if xs[0] is None else np.array(xs, dtype=np.int64),
            np.array(ys, dtype=np.uint8),
            np.array(users, dtype=object),
            np.array(seqs, dtype=np.int64),
        )

    def count_window(self, stream_id: str, start: int, end: int) -> WindowData:
        return self._window("stream_id = %s AND seq >= %s AND seq < %s", (stream_id, start, end))

    def time_window(self, stream_id: str, index: int) -> WindowData:
        return self._window("stream_id = %s AND time_window = %s", (stream_id, index))

    def pending_time_windows(self, stream_id: str) -> list[int]:
        rows = self._db.transaction(
            lambda cur: cur.execute(
                "SELECT DISTINCT time_window FROM state_examples WHERE stream_id = %s "
                "AND time_window IS NOT NULL ORDER BY time_window",
                (stream_id,),
            ).fetchall()
        )
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

        def run(cur: Cursor) -> None:
            cur.execute(
                "INSERT INTO state_windows VALUES (%s, %s, %s, %s) ON CONFLICT (stream_id, window_id) "
                "DO NOTHING",
                (stream_id, window_id, outcome, datetime.now(UTC)),
            )
            if seqs is not None:
                cur.execute(
                    "DELETE FROM state_examples WHERE stream_id = %s AND seq >= %s AND seq < %s",
                    (stream_id, *seqs),
                )
            if time_window is not None:
                cur.execute(
                    "DELETE FROM state_examples WHERE stream_id = %s AND time_window = %s",
                    (stream_id, time_window),
                )

        self._db.transaction(run)

    def closed_windows(self, stream_id: str, among: Iterable[str] | None = None) -> dict[str, str]:
        query, params = "SELECT window_id, outcome FROM state_windows WHERE stream_id = %s", [stream_id]
        if among is not None:
            query += " AND window_id = ANY(%s)"
            params.append(list(among))
        rows = self._db.transaction(lambda cur: cur.execute(query, params).fetchall())
        return dict(rows)

    # --- SOA snapshots ---------------------------------------------------------------------------
    def save_soa(self, stream_id: str, state: dict[str, Any]) -> None:
        self._db.transaction(
            lambda cur: cur.execute(
                "INSERT INTO state_soa VALUES (%s, %s, %s) ON CONFLICT (stream_id) DO UPDATE SET "
                "state = excluded.state, updated_at = excluded.updated_at",
                (stream_id, json.dumps(state), datetime.now(UTC)),
            )
        )

    def load_soa(self, stream_id: str) -> dict[str, Any] | None:
        row = self._db.transaction(
            lambda cur: cur.execute(
                "SELECT state FROM state_soa WHERE stream_id = %s", (stream_id,)
            ).fetchone()
        )
        return None if row is None else json.loads(row[0])

    # --- the release tree (see SqliteStateStore) -----------------------------------------------------
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
        advance the schedule, in one transaction (see :meth:`SqliteStateStore.close_window`)."""
        if (seqs is None) == (time_window is None):
            raise ValueError("close_window needs exactly one of seqs and time_window")
        if seqs is not None:
            where, params = "stream_id = %s AND seq >= %s AND seq < %s", (stream_id, *seqs)
        else:
            where, params = "stream_id = %s AND time_window = %s", (stream_id, time_window)

        def run(cur: Cursor) -> NodeData:
            data = self._load_node(cur, stream_id, family, 0, window)
            if data is None:
                rows = self._window_on(cur, where, params)
                data = NodeData.from_window(rows, bounds, vectors=vectors, user_level=user_level)
                cur.execute(
                    "INSERT INTO state_nodes VALUES (%s, %s, 0, %s, %s) ON CONFLICT DO NOTHING",
                    (stream_id, family, window, data.to_bytes()),
                )
                if cur.rowcount == 0:  # another worker closed it meanwhile: theirs stands
                    data = self._load_node(cur, stream_id, family, 0, window) or data
                cur.execute(f"DELETE FROM state_examples WHERE {where}", params)
            cur.execute(
                "INSERT INTO state_schedules VALUES (%s, %s, %s) ON CONFLICT (stream_id) DO UPDATE SET "
                "family = excluded.family, last_closed_window = greatest(state_schedules.last_closed_window, "
                "excluded.last_closed_window)",
                (stream_id, family, window),
            )
            return data

        return self._db.transaction(run)

    @staticmethod
    def _load_node(cur: Cursor, stream_id: str, family: str, level: int, index: int) -> NodeData | None:
        row = cur.execute(
            "SELECT data FROM state_nodes WHERE stream_id = %s AND family = %s AND level = %s AND idx = %s",
            (stream_id, family, level, index),
        ).fetchone()
        return None if row is None else NodeData.from_bytes(bytes(row[0]))

    def save_node(self, stream_id: str, family: str, level: int, index: int, data: NodeData) -> None:
        self._db.transaction(
            lambda cur: cur.execute(
                "INSERT INTO state_nodes VALUES (%s, %s, %s, %s, %s) ON CONFLICT (stream_id, "
                "family, level, idx) "
                "DO UPDATE SET data = excluded.data",
                (stream_id, family, level, index, data.to_bytes()),
            )
        )

    def load_node(self, stream_id: str, family: str, level: int, index: int) -> NodeData | None:
        return self._db.transaction(lambda cur: self._load_node(cur, stream_id, family, level, index))

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
            data = NodeData.merge(left, right, bounds)
            cur.execute(
                "INSERT INTO state_nodes VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (stream_id, family, level, index, data.to_bytes()),
            )
            return data

        return self._db.transaction(run)

    def drop_node(self, stream_id: str, family: str, level: int, index: int) -> None:
        self._db.transaction(
            lambda cur: cur.execute(
                "DELETE FROM state_nodes WHERE stream_id = %s AND family = %s AND level = %s AND idx = %s",
                (stream_id, family, level, index),
            )
        )

    def nodes(self, stream_id: str, family: str) -> list[tuple[int, int]]:
        rows = self._db.transaction(
            lambda cur: cur.execute(
                "SELECT level, idx FROM state_nodes WHERE stream_id = %s AND family = %s ORDER BY level, idx",
                (stream_id, family),
            ).fetchall()
        )
        return [(int(level), int(index)) for level, index in rows]

    def schedule(self, stream_id: str) -> ScheduleState | None:
        row = self._db.transaction(
            lambda cur: cur.execute(
                "SELECT family, last_closed_window FROM state_schedules WHERE stream_id = %s", (stream_id,)
            ).fetchone()
        )
        return None if row is None else ScheduleState(row[0], None if row[1] is None else int(row[1]))

    def save_schedule(self, stream_id: str, state: ScheduleState) -> None:
        self._db.transaction(
            lambda cur: cur.execute(
                "INSERT INTO state_schedules VALUES (%s, %s, %s) ON CONFLICT (stream_id) DO UPDATE SET "
                "family = excluded.family, last_closed_window = excluded.last_closed_window",
                (stream_id, state.family, state.last_closed_window),
            )
        )
