"""Durable per-stream state in PostgreSQL: the state store shared across hosts.

The store's rules are :class:`~.state.SqlStateStore`'s, the same as on SQLite (one contract suite,
``tests/stream_app/store/test_state_store_contract.py``, runs over both); this module is the
database: its schema, its connections (:mod:`.postgres_db`) and how it keeps a point
(:class:`PostgresStateBackend`: a point in ``x``, a feature vector in ``x_vector``).

>>> store = PostgresStateStore(PostgresConfig("postgresql://privstream@db/privstream"))  # doctest: +SKIP
>>> store.append("s", partition=0, offset=7, x=3, y=1, user=None, time_window=None)  # doctest: +SKIP
0

**Concurrency.** Appends of different streams do not wait for each other, and reads (a large
window) never block appends (MVCC). **A dropped connection.** Each operation is one transaction,
rerun on a fresh connection when the connection breaks (see :mod:`.postgres_db`); an append is
idempotent per Kafka position, so a rerun after a COMMIT whose answer was lost stores nothing
twice (it then answers "replay", and the window it completed is released by the recovery pass
that runs when partitions are assigned).

**Schema.** Component ``state`` in ``privstream_migrations``; created when missing (an empty
store costs no privacy: the window buffers are refilled from Kafka), checked when present.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from privstream.agents.interfaces import StateStoreError
from privstream.stream_app.store.dialect import Mode
from privstream.stream_app.store.postgres_db import Database, PostgresConfig, StoreErrors, postgres_dialect
from privstream.stream_app.store.schema import STATE, render
from privstream.stream_app.store.state import TABLES as PORTABLE_TABLES
from privstream.stream_app.store.state import Example, SqlStateStore

__all__ = ["MIGRATIONS", "PostgresConfig", "PostgresStateBackend", "PostgresStateStore", "StateStoreError"]

_DIALECT = postgres_dialect(PORTABLE_TABLES, "state_")
#: The state store's schema (:data:`.schema.STATE`) in PostgreSQL's spelling (component
#: ``state``): a point of a hypothesis class's domain in ``x``, a feature vector in ``x_vector``.
MIGRATIONS = render(
    STATE,
    _DIALECT,
    point_columns="x BIGINT,\n    x_vector DOUBLE PRECISION[]",
    point_check=",\n    CHECK ((x IS NULL) <> (x_vector IS NULL))",
)
TABLES = frozenset(f"state_{table}" for table in PORTABLE_TABLES)
_ERRORS = StoreErrors(StateStoreError, StateStoreError, StateStoreError, StateStoreError, StateStoreError)

Cursor = psycopg.Cursor[Any]


class PostgresStateBackend:
    """The PostgreSQL side of the state store (:class:`~.state.StateBackend`): a pool of connections."""

    dialect = _DIALECT
    point_columns = "x, x_vector"

    def __init__(self, db: Database) -> None:
        self.db = db

    @property
    def location(self) -> str:
        return self.db.config.display

    def run(self, body: Any, *, mode: Mode = "write") -> Any:
        return self.db.transaction(body, snapshot=mode == "snapshot")

    def insert_examples(self, cur: Cursor, rows: Sequence[Example]) -> None:
        with cur.copy(
            "COPY state_examples (stream_id, seq, part, kafka_offset, item, x, x_vector, y, user_id, "
            "time_window, priority) FROM STDIN"
        ) as copy:
            for *position, x, y, user, window, priority in rows:
                vector = isinstance(x, list | tuple | np.ndarray)
                point = (None, [float(v) for v in x]) if vector else (int(x), None)
                copy.write_row((*position, *point, y, user, window, priority))

    def points(self, stored: Sequence[Sequence[Any]]) -> np.ndarray:
        if stored[0][0] is None:
            return np.array([vector for _, vector in stored], dtype=np.float64)
        return np.array([x for x, _ in stored], dtype=np.int64)

    def close(self) -> None:
        self.db.close()


class PostgresStateStore(SqlStateStore):
    """The PostgreSQL :class:`~privstream.agents.interfaces.StateStore`; thread-safe (a pool)."""

    def __init__(self, config: PostgresConfig | str) -> None:
        db = Database.connect(config, _ERRORS, what="state store")
        with db.closed_on_error():
            db.migrate("state", MIGRATIONS, TABLES, create=True)
            super().__init__(PostgresStateBackend(db))
