"""The SQLite state store with a file per stream: one stream's writes never wait for another's.

SQLite lets one transaction at a time write a file, and the store serialises its transactions on
one writer connection. In one shared file, a stream's node build (one write transaction) would
hold up every other stream's appends, closes and reads for as long as it runs, so one stream's
private window size would move another stream's releases. :class:`SqliteStreamStores` keeps each
stream in its own file beside the main one (``state.sqlite3`` → ``state.sqlite3.streams/NAME.sqlite3``),
each with its own connections and lock; the main file keeps what belongs to no stream (the store's
generation, the ledger it follows) and any stream it held already (a store made before streams
had files of their own keeps working: its buffered windows and sequence numbers stay where they
are, so count-window ids never repeat).

>>> import tempfile, pathlib
>>> directory = pathlib.Path(tempfile.mkdtemp())
>>> store = SqliteStreamStores(directory / "state.sqlite3")
>>> store.append("s", partition=0, offset=7, x=3, y=1, user=None, time_window=None)
0
>>> store.count_window("s", 0, 1).xs.tolist(), [p.name for p in store.stream_directory.glob("*.sqlite3")]
([3], ['s.sqlite3'])
>>> store.close()
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privstream.stream_app.store.sqlite_state import SqliteStateStore
from privstream.stream_app.store.state import SqlStateStore

__all__ = ["SqliteStreamStores", "state_files"]

#: The tables whose rows belong to a stream (a stream found in one stays in the main file).
_STREAM_TABLES = ("stream_seq", "positions", "windows", "nodes", "schedules", "soa")


def state_files(path: str | Path) -> list[Path]:
    """The files of the state store at ``path``: the main file, then each stream's (a backup
    copies them all, each with SQLite's ``.backup``)."""
    return [Path(path), *sorted(Path(f"{path}.streams").glob("*.sqlite3"))]


def _routed(name: str) -> Callable[..., Any]:
    """A store method that runs on the stream's own file (its first argument is the stream)."""

    def method(self: SqliteStreamStores, stream_id: str, *args: Any, **kwargs: Any) -> Any:
        shard = self.shard(stream_id)
        if shard is None:  # kept in the main file
            return getattr(SqliteStateStore, name)(self, stream_id, *args, **kwargs)
        return getattr(shard, name)(stream_id, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = getattr(SqlStateStore, name).__doc__
    return method


class SqliteStreamStores(SqliteStateStore):
    """The SQLite state store, one file per stream (see the module docstring); thread-safe."""

    def __init__(self, path: str | Path, busy_timeout: float = 30.0) -> None:
        super().__init__(path, busy_timeout)
        self.busy_timeout = busy_timeout
        self.stream_directory = Path(f"{self.path}.streams")
        self._shards: dict[str, SqliteStateStore | None] = {}
        self._opening = threading.Lock()

    def shard(self, stream_id: str) -> SqliteStateStore | None:
        """The stream's own store (opened on first use), or None: the main file holds the stream."""
        if stream_id in self._shards:
            return self._shards[stream_id]
        with self._opening:
            if stream_id not in self._shards:
                self._shards[stream_id] = self._open_shard(stream_id)
            return self._shards[stream_id]

    def _open_shard(self, stream_id: str) -> SqliteStateStore | None:
        def held(cur: Any) -> bool:
            return any(
                cur.execute(
                    self._q(f"SELECT 1 FROM {{{table}}} WHERE stream_id = ? LIMIT 1"), (stream_id,)
                ).fetchone()
                is not None
                for table in _STREAM_TABLES
            )

        if self._backend.run(held, mode="read"):
            return None
        # Stream names are [A-Za-z0-9._:-]+ (settings); ':' is not portable in file names.
        shard = SqliteStateStore(
            self.stream_directory / f"{stream_id.replace(':', '%3A')}.sqlite3", self.busy_timeout
        )
        shard.generation = self.generation  # count-window ids name the store's generation
        return shard

    def close(self) -> None:
        with self._opening:
            for shard in self._shards.values():
                if shard is not None:
                    shard.close()
            self._shards.clear()
        super().close()


# Every method of the store whose first argument is the stream runs on the stream's file (methods
# added to the store later are routed too).
for _name, _function in inspect.getmembers(SqlStateStore, inspect.isfunction):
    _parameters = list(inspect.signature(_function).parameters)
    if not _name.startswith("_") and _parameters[1:2] == ["stream_id"]:
        setattr(SqliteStreamStores, _name, _routed(_name))
