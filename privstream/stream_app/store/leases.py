"""Partition leases: which worker owns a partition of the examples topic, fenced by an epoch.

Kafka's consumer group gives each partition to one worker, but a worker that stalls (a long GC
pause, a frozen VM, SIGSTOP) can wake up after the group has moved its partitions elsewhere and
carry on with what it had in hand: charge the ledger and publish a release. The ledger's
idempotent charges already keep such a worker from charging a window twice or publishing
different noise; the lease makes it stop altogether. A lease is a row
``(source topic, partition) -> (owner, epoch)`` in the shared store:

* :meth:`Leases.take` runs when the group assigns partitions to a worker: the worker becomes the
  owner of each, with the epoch raised by one (kept if the worker holds the lease already: nobody
  took it in between, so its work in flight stays valid);
* every charge checks, **inside the ledger's own transaction** (the ledger's ``fence`` hook), that
  the worker still holds, at the epoch it took them, the leases it took of the partitions its
  stream's examples came from (at least one); a worker that lost one gets
  :class:`~privstream.agents.interfaces.LeaseLostError` and nothing is written. The check and a
  takeover are serialised: on SQLite both hold the ledger file's write lock; on PostgreSQL the
  check reads the lease rows ``FOR SHARE`` and a takeover's update waits for the charge to commit.
  So a charge is either before the takeover (and the new owner finds it in the ledger and
  publishes those bytes) or refused;
* every publication checks the leases just before it sends (:meth:`Leases.check`). This check is
  not atomic with the send (Kafka has no transaction with the database): a worker that stalls
  between the check and the broker's acknowledgement can still publish, once, the bytes of a
  release charged while it owned the partition: a copy of the release the new owner publishes
  from the ledger (same bytes, same ledger entry id), never a new release.

SQLite keeps the leases in the ledger file (so the check runs in the charge's transaction);
PostgreSQL in the store's database. The schema is component ``leases`` in
``privstream_migrations`` on both, separate from the ledger's and the state store's.

>>> import tempfile, pathlib
>>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
>>> path = pathlib.Path(tempfile.mkdtemp()) / "ledger.sqlite3"
>>> ledger = SqliteLedger.open(path, create_if_missing=True, budgets={"s": (1.0, 0.0)})
>>> old, new = SqliteLeases(path, "examples", owner="old"), SqliteLeases(path, "examples", owner="new")
>>> old.take({0})
{0: 1}
>>> new.take({0})  # the group moved partition 0
{0: 2}
>>> ledger.charge("s", "w0", "laplace", 0.5, 0.0, b"r", fence=old.fence({0}))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
privstream.agents.interfaces.LeaseLostError: partition 0 of examples is held by new (epoch 2), not by old ...
>>> ledger.charge("s", "w0", "laplace", 0.5, 0.0, b"r", fence=new.fence({0})).entry_id
1
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from privstream.agents.interfaces import LeaseLostError
from privstream.stream_app.store.migrations import Migration, SchemaTooNewError, pending
from privstream.stream_app.store.sqlite_db import SqliteDatabase

__all__ = [
    "MIGRATIONS",
    "LeaseLostError",
    "LeaseStoreError",
    "Leases",
    "PostgresLeases",
    "SqliteLeases",
    "worker_id",
]

#: The leases' schema (component ``leases``); append a migration to change it, never edit one.
MIGRATIONS = (
    Migration(
        1,
        "partition leases: owner and epoch per (source topic, partition)",
        (
            """CREATE TABLE partition_leases (
            source   TEXT NOT NULL,     -- the examples topic
            part     INTEGER NOT NULL,  -- its partition
            owner    TEXT NOT NULL,     -- the worker holding it (worker_id())
            epoch    BIGINT NOT NULL,   -- raised by one at every takeover
            taken_at TEXT NOT NULL,
            PRIMARY KEY (source, part)
        )""",
        ),
    ),
)
TABLES = frozenset({"partition_leases"})

#: A check run inside another store's transaction, given that transaction's cursor.
Fence = Callable[[Any], None]


class LeaseStoreError(RuntimeError):
    """The lease table cannot be used (its database unreachable, a newer schema)."""


def worker_id() -> str:
    """A name for this worker process that no other process, here or on another host, shares."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Leases:
    """The leases of one worker (``owner``) on the partitions of ``source``; backends subclass it.

    Thread-safe. The epochs this worker took are kept here; the store has the truth.
    """

    #: SQL of the backend: placeholders, and how the fence locks the rows it reads.
    _P = "?"
    _LOCK = ""

    def __init__(self, source: str, owner: str | None = None) -> None:
        self.source = source
        self.owner = owner or worker_id()
        self._epochs: dict[int, int] = {}
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- backend

    def _transaction(self, body: Callable[[Any], Any], *, write: bool = True) -> Any:
        raise NotImplementedError  # pragma: no cover - each backend has its own

    def _rows(self, cur: Any, partitions: Iterable[int], lock: bool = False) -> dict[int, tuple[str, int]]:
        parts = sorted(partitions)
        if not parts:
            return {}
        marks = ", ".join(self._P for _ in parts)
        cur.execute(
            f"SELECT part, owner, epoch FROM partition_leases WHERE source = {self._P} AND part IN ({marks})"
            + (self._LOCK if lock else ""),
            (self.source, *parts),
        )
        return {int(part): (owner, int(epoch)) for part, owner, epoch in cur.fetchall()}

    # ----------------------------------------------------------------- the protocol

    def take(self, partitions: Iterable[int]) -> dict[int, int]:
        """Become the owner of ``partitions`` (on assignment by the consumer group); their epochs."""
        parts = sorted(set(partitions))
        p = self._P

        def run(cur: Any) -> dict[int, int]:
            with self._lock:
                mine = dict(self._epochs)
            taken = {}
            now = datetime.now(UTC).isoformat()
            for part in parts:  # one order for every worker: no deadlock between takeovers
                cur.execute(
                    f"INSERT INTO partition_leases (source, part, owner, epoch, taken_at) "
                    f"VALUES ({p}, {p}, {p}, 1, {p}) ON CONFLICT (source, part) DO UPDATE SET "
                    f"owner = excluded.owner, taken_at = excluded.taken_at, epoch = CASE "
                    f"WHEN partition_leases.owner = excluded.owner AND partition_leases.epoch = {p} "
                    f"THEN partition_leases.epoch ELSE partition_leases.epoch + 1 END "
                    f"RETURNING epoch",
                    (self.source, part, self.owner, now, mine.get(part, -1)),
                )
                taken[part] = int(cur.fetchone()[0])
            return taken

        taken = self._transaction(run)
        with self._lock:
            self._epochs.update(taken)
        return taken

    def _verify(self, cur: Any, partitions: Iterable[int], lock: bool) -> None:
        # The stream's partitions that this worker took at some point: it must hold every one of
        # them still (a stale worker lost at least one) and at least one. A stream keyed by its id
        # has one partition; one whose producers spread it over partitions of several workers is
        # released by any of them (the ledger's idempotent charges keep it once).
        asked = set(partitions)
        with self._lock:
            mine = {part: epoch for part, epoch in self._epochs.items() if part in asked}
        if not mine:
            raise LeaseLostError(
                f"{self.owner} holds no lease on partitions {sorted(asked)} of {self.source}"
            )
        parts = set(mine)
        held = self._rows(cur, parts, lock=lock)
        for part in sorted(parts):
            owner, epoch = held.get(part, (None, None))
            if (owner, epoch) != (self.owner, mine[part]):
                raise LeaseLostError(
                    f"partition {part} of {self.source} is held by {owner} (epoch {epoch}), "
                    f"not by {self.owner} (epoch {mine[part]})"
                )

    def fence(self, partitions: Iterable[int]) -> Fence:
        """A check for another store's transaction (the ledger's ``charge(fence=...)``): it raises
        :class:`LeaseLostError` unless this worker holds every one of ``partitions`` at the epoch
        it took, locking the lease rows until that transaction ends."""
        parts = frozenset(partitions)
        return lambda cur: self._verify(cur, parts, lock=True)

    def check(self, partitions: Iterable[int]) -> None:
        """Raise :class:`LeaseLostError` unless this worker holds every one of ``partitions`` now
        (before a publication: see the module docstring for what this leaves open)."""
        parts = frozenset(partitions)
        self._transaction(lambda cur: self._verify(cur, parts, lock=False), write=False)

    def holders(self) -> dict[int, tuple[str, int]]:
        """Every partition of the source with a lease: ``{partition: (owner, epoch)}``."""

        def run(cur: Any) -> dict[int, tuple[str, int]]:
            cur.execute(
                f"SELECT part, owner, epoch FROM partition_leases WHERE source = {self._P}", (self.source,)
            )
            return {int(part): (owner, int(epoch)) for part, owner, epoch in cur.fetchall()}

        return self._transaction(run, write=False)

    def ping(self) -> None:
        """Raise :class:`LeaseStoreError` unless the database answers (the readiness probe)."""
        self._transaction(lambda cur: cur.execute("SELECT 1").fetchall(), write=False)

    def close(self) -> None:  # pragma: no cover - backends override
        pass


class SqliteLeases(Leases):
    """Leases in the SQLite ledger file ``ledger_path`` (which must exist: the ledger creates it)."""

    def __init__(
        self,
        ledger_path: str | os.PathLike[str],
        source: str,
        owner: str | None = None,
        busy_timeout: float = 10.0,
    ) -> None:
        super().__init__(source, owner)
        self.path = Path(ledger_path)
        try:
            self._db = SqliteDatabase.connect(
                f"{self.path.absolute().as_uri()}?mode=rw",
                display=str(self.path),
                busy_timeout=busy_timeout,
                translate=lambda message, exc: LeaseStoreError(f"leases in {message}"),
            )
            self._db.connection.execute("PRAGMA synchronous = FULL")
            self._transaction(self._migrate)
        except sqlite3.Error as exc:
            raise LeaseStoreError(f"leases in {self.path}: {exc}") from exc

    def _migrate(self, cur: sqlite3.Cursor) -> None:
        cur.execute(
            "CREATE TABLE IF NOT EXISTS privstream_migrations (component TEXT NOT NULL, "
            "version INTEGER NOT NULL, description TEXT NOT NULL, applied_at TEXT NOT NULL, "
            "PRIMARY KEY (component, version))"
        )
        (current,) = cur.execute(
            "SELECT coalesce(max(version), 0) FROM privstream_migrations WHERE component = 'leases'"
        ).fetchone()
        try:
            steps = pending(int(current), MIGRATIONS)
        except SchemaTooNewError as exc:
            raise LeaseStoreError(f"leases in {self.path}: {exc}") from None
        for migration in steps:
            for statement in migration.statements:
                cur.execute(statement)
            cur.execute(
                "INSERT INTO privstream_migrations VALUES ('leases', ?, ?, ?)",
                (migration.version, migration.description, datetime.now(UTC).isoformat()),
            )

    def _transaction(self, body: Callable[[Any], Any], *, write: bool = True) -> Any:
        return self._db.run(body, mode="write" if write else "read")

    def close(self) -> None:
        self._db.close()


class PostgresLeases(Leases):
    """Leases in the PostgreSQL database of the store (``config``: a ``PostgresConfig``)."""

    _P = "%s"
    _LOCK = " FOR SHARE"  # a takeover's update waits until the fenced transaction ends

    def __init__(self, config: Any, source: str, owner: str | None = None) -> None:
        from privstream.stream_app.store.postgres_db import Database, StoreErrors

        super().__init__(source, owner)
        errors = StoreErrors(
            LeaseStoreError, LeaseStoreError, LeaseStoreError, LeaseStoreError, LeaseStoreError
        )
        self._database = Database.connect(config, errors, what="partition leases")
        with self._database.closed_on_error():
            self._database.migrate("leases", MIGRATIONS, TABLES, create=True)

    def _transaction(self, body: Callable[[Any], Any], *, write: bool = True) -> Any:
        return self._database.transaction(body)

    def close(self) -> None:
        self._database.close()
