"""How one SQL backend spells what portable SQL cannot: the port the stores' shared logic runs on.

The rules of the ledger (:mod:`.ledger`) and of the window store (:mod:`.state`) are written
once, in SQL that SQLite and PostgreSQL both read, with four kinds of holes that a
:class:`Dialect` fills:

* ``?`` placeholders (PostgreSQL's driver wants ``%s``);
* ``{table}`` names (the PostgreSQL stores share one database, so their tables carry a prefix);
* ``{greatest}`` (SQLite's two-argument ``max``), ``{for_update}`` (a row lock where the
  database has them; SQLite serialises writers with its file lock instead), ``{binary}`` (the
  collation that orders text by its bytes);
* values: timestamps (SQLite stores ISO text), and the id of a row just inserted.

The schemas (:mod:`.schema`) are written once too, with column types as holes that
:meth:`Dialect.ddl` fills from the dialect's ``types``.

>>> sqlite = Dialect("sqlite", "?", ("streams",))
>>> postgres = Dialect("postgresql", "%s", ("streams",), prefix="ledger_", greatest="greatest",
...                    for_update=" FOR UPDATE", binary='"C"', returning=True, text_times=False)
>>> portable = "SELECT {greatest}(a, ?) FROM {streams} WHERE stream_id = ?{for_update}"
>>> sqlite.sql(portable)
'SELECT max(a, ?) FROM streams WHERE stream_id = ?'
>>> postgres.sql(portable)
'SELECT greatest(a, %s) FROM ledger_streams WHERE stream_id = %s FOR UPDATE'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, overload

__all__ = ["Dialect", "Mode", "parse_time"]

#: How a store's transaction runs: ``write`` takes the write lock (SQLite: ``BEGIN IMMEDIATE``);
#: ``read`` reads committed data; ``snapshot`` reads every statement from one snapshot.
Mode = Literal["write", "read", "snapshot"]


@dataclass(frozen=True)
class Dialect:
    """The spelling of one backend (see the module docstring)."""

    name: str
    placeholder: str
    tables: Sequence[str]
    prefix: str = ""
    greatest: str = "max"
    for_update: str = ""
    binary: str = "BINARY"
    #: True: ``INSERT ... RETURNING id`` gives a new row's id; False: the cursor's ``lastrowid``.
    returning: bool = False
    #: True: timestamps are stored as ISO 8601 text; False: as the database's own timestamps.
    text_times: bool = True
    #: DDL spellings of the column types (see :mod:`.schema`).
    types: Mapping[str, str] = field(default_factory=dict)
    _cache: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def sql(self, portable: str) -> str:
        """``portable`` in this dialect (translated once per statement, then cached)."""
        statement = self._cache.get(portable)
        if statement is None:
            names = {table: self.prefix + table for table in self.tables}
            names.update(greatest=self.greatest, for_update=self.for_update, binary=self.binary)
            statement = portable.format_map(names).replace("?", self.placeholder)
            self._cache[portable] = statement
        return statement

    def ddl(self, portable: str, **holes: str) -> str:
        """A schema statement in this dialect: table names, ``types`` and ``holes`` filled in."""
        return portable.format_map({**{t: self.prefix + t for t in self.tables}, **self.types, **holes})

    def time(self, moment: datetime) -> datetime | str:
        """A timestamp as this backend stores it."""
        return moment.isoformat() if self.text_times else moment

    def insert(self, cursor: Any, portable: str, params: Sequence[Any], key: str) -> int:
        """Run an ``INSERT`` and return the new row's ``key`` column."""
        if self.returning:
            row = cursor.execute(self.sql(f"{portable} RETURNING {key}"), params).fetchone()
            return int(row[0])
        cursor.execute(self.sql(portable), params)
        return int(cursor.lastrowid)


@overload
def parse_time(value: datetime | str) -> datetime: ...
@overload
def parse_time(value: None) -> None: ...
def parse_time(value: datetime | str | None) -> datetime | None:
    """A stored timestamp back as a datetime (SQLite hands back its ISO text)."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value)
