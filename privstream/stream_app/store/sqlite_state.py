"""Durable per-stream state in SQLite: the state store's file, shared by the workers of one host.

The store's rules are :class:`~.state.SqlStateStore`'s; this module is the file: its schema, its
two connections and how it keeps a point (:class:`SqliteStateBackend`).

Writes use ``synchronous=NORMAL`` in WAL mode: durable across a process crash (SIGKILL), the
failure this guards against. An operating-system crash may lose the last transactions; the
privacy ledger, not this store, is the place with ``synchronous=FULL``, because losing a
buffered example costs a little accuracy while losing a charge would cost privacy. Windows are
read through a second connection: in WAL mode its reads never block the writes of the ingest
path, which one shared connection's lock would hold up for as long as a 100,000-example window
takes to read.

>>> store = SqliteStateStore(":memory:")
>>> store.append("s", partition=0, offset=7, x=[0.5, 1.0], y=1, user=None, time_window=None)
0
>>> store.count_window("s", 0, 1).xs.tolist()
[[0.5, 1.0]]
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from privstream.agents.interfaces import StateStoreError
from privstream.stream_app.store.dialect import Mode
from privstream.stream_app.store.migrations import SchemaTooNewError, latest
from privstream.stream_app.store.private_files import private_directory
from privstream.stream_app.store.schema import STATE, render
from privstream.stream_app.store.sqlite_db import SqliteDatabase, sqlite_dialect
from privstream.stream_app.store.state import TABLES, Example, SqlStateStore

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteStateBackend", "SqliteStateStore", "StateStoreError"]

_DIALECT = sqlite_dialect(TABLES)
#: The schema (:data:`.schema.STATE`) in SQLite's spelling: a point, or a feature vector as a BLOB
#: of little-endian float64s, in one column (SQLite columns take any type); ``PRAGMA
#: user_version`` is the last migration applied.
MIGRATIONS = render(STATE, _DIALECT, point_columns="x            INTEGER NOT NULL", point_check="")
SCHEMA_VERSION = latest(MIGRATIONS)


def _error(message: str, exc: sqlite3.Error | None) -> StateStoreError:
    return StateStoreError(f"state store {message}")


class SqliteStateBackend:
    """The SQLite side of the state store (:class:`~.state.StateBackend`): a writer and a reader."""

    dialect = _DIALECT
    point_columns = "x"  # a point, or a feature vector as a float64 BLOB (SQLite columns take any type)

    def __init__(self, path: str, busy_timeout: float) -> None:
        self.location = path
        self.writer = SqliteDatabase.connect(path, busy_timeout=busy_timeout, translate=_error)
        self.reader = self.writer  # a memory database exists only on its own connection
        try:
            conn = self.writer.connection
            self.writer.retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL"))
            conn.execute("PRAGMA synchronous = NORMAL")
            self.writer.migrate(MIGRATIONS, self._check)
            if path != ":memory:":
                self.reader = SqliteDatabase.connect(path, busy_timeout=busy_timeout, translate=_error)
        except BaseException:
            self.writer.close()
            raise

    def _check(self, cur: sqlite3.Cursor, version: int) -> None:
        tables = {r[0] for r in cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if version == 0 and tables and "meta" not in tables:
            raise StateStoreError(
                f"state store {self.location} is another application's database (tables {sorted(tables)})"
            )

    def run(self, body: Any, *, mode: Mode = "write") -> Any:
        return (self.writer if mode == "write" else self.reader).run(body, mode=mode)

    def insert_examples(self, cur: sqlite3.Cursor, rows: Sequence[Example]) -> None:
        cur.executemany(
            "INSERT INTO examples (stream_id, seq, part, kafka_offset, item, x, y, user_id, time_window, "
            "priority) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*row[:5], point, *row[6:]) for row, point in zip(rows, _encoded(rows), strict=True)],
        )

    def points(self, stored: Sequence[Sequence[Any]]) -> np.ndarray:
        return _decoded([x for (x,) in stored])

    def close(self) -> None:
        self.reader.close()
        self.writer.close()


def _encoded(rows: Sequence[Example]) -> list[int | bytes]:
    """The stored form of the rows' points: an integer point as itself, a feature vector as the
    bytes of its little-endian float64s (a batch's vectors converted at once: JSON text cost
    ~10 µs per 16-feature row on the ingest path, these bytes well under 1 µs).

    >>> _encoded([("s", 0, 0, 0, 0, [1.0, 2.0], 1, None, None)])[0] == np.array([1.0, 2.0], "<f8").tobytes()
    True
    """
    if not rows or not isinstance(rows[0][5], list | tuple | np.ndarray):
        return [int(row[5]) for row in rows]
    vectors = np.asarray([row[5] for row in rows], dtype="<f8")
    if vectors.ndim != 2:  # rows of different lengths: each on its own
        return [np.asarray(row[5], dtype="<f8").tobytes() for row in rows]
    return [vector.tobytes() for vector in vectors]


def _decoded(points: list[Any]) -> np.ndarray:
    """The points of :func:`_encoded` as an array (a vector stored as JSON text by earlier versions
    of the store is read too).

    >>> _decoded(_encoded([("s", 0, 0, 0, 0, [0.5, 1.0], 1, None, None)]) + ["[2.0, 3.0]"]).tolist()
    [[0.5, 1.0], [2.0, 3.0]]
    >>> _decoded([3, 4]).tolist()
    [3, 4]
    """
    if not points or isinstance(points[0], int):
        return np.array(points, dtype=np.int64)
    if all(type(p) is bytes for p in points):
        return np.frombuffer(b"".join(points), dtype="<f8").reshape(len(points), -1).astype(np.float64)
    return np.array(
        [np.frombuffer(p, dtype="<f8") if isinstance(p, bytes) else json.loads(p) for p in points],
        dtype=np.float64,
    )


class SqliteStateStore(SqlStateStore):
    """The SQLite :class:`~privstream.agents.interfaces.StateStore`; thread-safe."""

    _backend: SqliteStateBackend

    def __init__(self, path: str | Path, busy_timeout: float = 30.0) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            folder = Path(self.path).parent
            if folder.name.endswith(".streams"):  # the per-stream folder is the store's own
                private_directory(folder)
            else:
                folder.mkdir(parents=True, exist_ok=True)
        try:
            backend = SqliteStateBackend(self.path, busy_timeout)
        except SchemaTooNewError as exc:
            raise StateStoreError(f"state store {self.path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise StateStoreError(f"state store {self.path} cannot be opened: {exc}") from exc
        try:
            super().__init__(backend)
        except BaseException:
            backend.close()
            raise
