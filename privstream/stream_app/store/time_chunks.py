"""Time-window rows stored by the chunk: one stored value per append and time window.

An append of a time-window stream's examples (one partition's poll) is stored as one chunk per
time window it touches (:mod:`.chunks`' encoding), not one table row per example: the rows of one
window in one append take consecutive sequence numbers, so a chunk is ``seq .. seq + n - 1`` of
its window. Sequence numbers order a time window's rows by arrival (a capped node keeps its
first rows, a user its first k); across windows they carry no meaning, so grouping an append's
rows by window keeps every window's own order.

A capped window (``keep``: the first rows a capped feature-vector node reads) stores only the
rows it has room for: the rest take their sequence numbers and are not stored, so a window's
storage is bounded by the cap whatever its private size. Rows of a bottom-k window (sampling
priorities) stay one table row each: a sample replaces single rows as lower priorities arrive.

>>> groups = by_window([(0, 1, 1, None, 8), (1, 2, 0, None, 7), (2, 3, 1, None, 8)])
>>> [(window, [row[1] for row in rows]) for window, rows in groups]
[(7, [2]), (8, [1, 3])]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from privstream.agents.interfaces import WindowData
from privstream.stream_app.store import chunks

__all__ = [
    "by_window",
    "drop_time_chunks",
    "insert_time_chunks",
    "merged",
    "stored_rows",
    "time_chunk_rows",
    "time_windows",
]

Cursor = Any
#: An appended row: (offset, x, y, user, time window).
Row = tuple[int, Any, int, "str | None", "int | None"]

_INSERT = (
    "INSERT INTO {example_chunks} (stream_id, seq, n, part, data, time_window) VALUES (?, ?, ?, ?, ?, ?)"
)


def by_window(rows: Sequence[Row]) -> list[tuple[int, list[Row]]]:
    """The rows grouped by time window, windows in order, each window's rows in arrival order."""
    groups: dict[int, list[Row]] = {}
    for row in rows:
        window = row[4]
        if window is None:
            raise ValueError("a time-window row needs its time window")
        groups.setdefault(window, []).append(row)
    return sorted(groups.items())


def stored_rows(cur: Cursor, q: Callable[[str], str], stream_id: str, window: int, keep: int) -> int:
    """How many rows window ``window`` holds, up to ``keep`` (its chunks', and single rows an
    earlier version stored: each at most ``keep``, so the count reads O(keep) entries)."""
    chunked = cur.execute(
        q("SELECT coalesce(sum(n), 0) FROM {example_chunks} WHERE stream_id = ? AND time_window = ?"),
        (stream_id, window),
    ).fetchone()[0]
    single = cur.execute(
        q(
            "SELECT count(*) FROM (SELECT 1 FROM {examples} WHERE stream_id = ? AND "
            "time_window = ? AND time_window IS NOT NULL LIMIT ?) AS stored"
        ),
        (stream_id, window, keep),
    ).fetchone()[0]
    return min(keep, int(chunked) + int(single))


def insert_time_chunks(
    cur: Cursor,
    q: Callable[[str], str],
    stream_id: str,
    partition: int,
    first: int,
    rows: Sequence[Row],
    keep: int | None,
    full: set[tuple[str, int]],
) -> None:
    """Store rows taking sequence numbers ``first ..`` as one chunk per time window (``keep``: a
    window stores its first so many rows only; ``full``: the windows known to hold them already,
    to which windows found full here are added: they were full before this append, committed)."""
    seq, values = first, []
    for window, group in by_window(rows):
        room = len(group)
        if keep is not None:
            if (stream_id, window) in full:
                room = 0
            else:
                stored = stored_rows(cur, q, stream_id, window, keep)
                if stored >= keep:
                    full.add((stream_id, window))
                room = min(room, keep - stored)
        if room > 0:
            kept = group[:room]
            data = chunks.encode_chunk([r[1] for r in kept], [r[2] for r in kept], [r[3] for r in kept])
            values.append((stream_id, seq, room, partition, data, window))
        seq += len(group)
    if values:
        cur.executemany(q(_INSERT), values)


def time_chunk_rows(
    cur: Cursor, q: Callable[[str], str], stream_id: str, window: int, first: int | None
) -> list[WindowData]:
    """Window ``window``'s chunked rows in sequence order, one part per chunk (``first``: only
    the first so many rows are decoded)."""
    found = cur.execute(
        q(
            "SELECT seq, n, data FROM {example_chunks} WHERE stream_id = ? AND time_window = ? "
            "AND time_window IS NOT NULL ORDER BY seq"
        ),
        (stream_id, window),
    ).fetchall()
    parts, wanted = [], None if first is None else int(first)
    for seq, n, data in found:
        if wanted is not None and wanted <= 0:
            break
        count = int(n) if wanted is None else min(int(n), wanted)
        xs, ys, users = chunks.decode_chunk(data, 0, count)
        seqs = np.arange(int(seq), int(seq) + count, dtype=np.int64)
        parts.append(WindowData(xs, ys.astype(np.uint8), users, seqs))
        if wanted is not None:
            wanted -= count
    return parts


def merged(parts: Sequence[WindowData], first: int | None = None) -> WindowData:
    """The rows of non-empty ``parts`` in sequence order (``first``: the first so many)."""
    seqs = np.concatenate([p.seqs for p in parts])
    order = np.argsort(seqs, kind="stable")[:first]
    return WindowData(
        np.concatenate([p.xs for p in parts])[order],
        np.concatenate([p.ys for p in parts])[order],
        np.concatenate([p.users for p in parts])[order],
        seqs[order],
    )


def drop_time_chunks(cur: Cursor, q: Callable[[str], str], stream_id: str, window: int) -> None:
    """Drop window ``window``'s chunks (at its close)."""
    cur.execute(
        q("DELETE FROM {example_chunks} WHERE stream_id = ? AND time_window = ?"), (stream_id, window)
    )


def time_windows(cur: Cursor, q: Callable[[str], str], stream_id: str) -> set[int]:
    """The time windows holding chunks."""
    rows = cur.execute(
        q(
            "SELECT DISTINCT time_window FROM {example_chunks} WHERE stream_id = ? "
            "AND time_window IS NOT NULL"
        ),
        (stream_id,),
    ).fetchall()
    return {int(r[0]) for r in rows}
