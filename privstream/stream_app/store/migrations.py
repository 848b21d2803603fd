"""Versioned schemas: every store's schema is an ordered list of migrations, applied in order.

Version ``n`` of a schema is what migrations ``1..n`` build. A store records its version (SQLite:
``PRAGMA user_version`` of its file; PostgreSQL: rows of the ``privstream_migrations`` table, one
per applied migration and component) and checks it when it opens:

* no schema at all: create it (all migrations) if creating was asked for, else an error;
* an older version: apply the missing migrations, in one transaction with the version change;
* a newer version (written by a later privstream): an error, never a downgrade or a reset.

A change to a schema is a new :class:`Migration` appended to its list, never an edit of a
released one: files and databases made by earlier versions must keep opening.

>>> steps = (Migration(1, "tables", ("CREATE TABLE a (x)",)),
...          Migration(2, "index", ("CREATE INDEX i ON a (x)",)))
>>> [m.version for m in pending(0, steps)], [m.version for m in pending(1, steps)], pending(2, steps)
([1, 2], [2], [])
>>> pending(3, steps)
Traceback (most recent call last):
...
privstream.stream_app.store.migrations.SchemaTooNewError: schema version 3 is newer than this privstream's 2
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Migration", "SchemaTooNewError", "latest", "pending"]


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of a schema: the SQL statements that take version ``version - 1`` to ``version``."""

    version: int
    description: str
    statements: tuple[str, ...]


class SchemaTooNewError(ValueError):
    """The stored schema is newer than the code: it was written by a later privstream."""

    def __init__(self, found: int, known: int) -> None:
        self.found, self.known = found, known
        super().__init__(f"schema version {found} is newer than this privstream's {known}")


def latest(migrations: Sequence[Migration]) -> int:
    """The version the code reads and writes: that of the last migration."""
    _check(migrations)
    return migrations[-1].version if migrations else 0


def pending(current: int, migrations: Sequence[Migration]) -> list[Migration]:
    """The migrations that take a schema at version ``current`` to :func:`latest`, in order."""
    known = latest(migrations)
    if current > known:
        raise SchemaTooNewError(current, known)
    if current < 0:
        raise ValueError(f"schema version {current} is negative")
    return [m for m in migrations if m.version > current]


def _check(migrations: Sequence[Migration]) -> None:
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migrations must be numbered 1, 2, 3, ... in order; got {versions}")
