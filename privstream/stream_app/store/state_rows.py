"""A stream's examples in the state store: appended once per Kafka position (a replay stores
nothing twice and keeps its sequence number), read back as a window's rows, and dropped when their
window closes. The rule: a window's rows are those the public schedule assigns it, nothing else
(count windows by sequence number, time windows by index; a capped window keeps only its first
rows or a bottom-k sample, decided as they arrive).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

import numpy as np

from privstream.agents.interfaces import WindowData
from privstream.learning.errors import InvariantError
from privstream.stream_app.store import time_chunks
from privstream.stream_app.store.chunks import decode_chunk, encode_chunk, fits_a_chunk
from privstream.stream_app.store.dialect import Dialect, Mode
from privstream.stream_app.store.time_chunks import merged

T = TypeVar("T")


Cursor = Any


_INSERT_CHUNK = "INSERT INTO {example_chunks} (stream_id, seq, n, part, data) VALUES (?, ?, ?, ?, ?)"


#: A stored example: (stream_id, seq, partition, offset, item in its message, x, y, user, time window,
#: sampling priority or None).
Example = tuple[str, int, int, int, int, Any, int, str | None, int | None, int | None]


class StateBackend(Protocol):
    """What a storage backend gives the state store: transactions, its dialect, how it stores points."""

    dialect: Dialect
    #: The columns that hold an example's point (a point of a class's domain, or a feature vector).
    point_columns: str

    @property
    def location(self) -> str: ...

    def run(self, body: Callable[[Cursor], T], *, mode: Mode = "write") -> T:
        """Run ``body`` in one transaction (``read``: may run beside writes, never blocking them)."""
        ...

    def insert_examples(self, cur: Cursor, rows: Sequence[Example]) -> None: ...

    def points(self, stored: Sequence[Sequence[Any]]) -> np.ndarray:
        """The points of a window, from the values of :attr:`point_columns` (one row per example)."""
        ...

    def close(self) -> None: ...


class ExampleRows:
    """The examples part of :class:`~.state.SqlStateStore` (the rows, by stream, partition and window)."""

    # Set by SqlStateStore.__init__.
    _backend: StateBackend
    _q: Callable[[str], str]
    _time: Callable[[datetime], datetime | str]
    #: (stream, time window)s holding their ``keep_first`` rows already (see :meth:`append_many`).
    _full_windows: set[tuple[str, int]]
    #: A full bottom-k window's highest kept priority, as last committed.
    _thresholds: dict[tuple[str, int], int]
    #: Per stream, the last closed window whose cached entries above were dropped.
    _forgotten_through: dict[str, int]

    def _read(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one query (a read that never blocks appends)."""
        query = self._q(statement)
        return self._backend.run(lambda cur: cur.execute(query, params).fetchall(), mode="read")

    def _write(self, statement: str, params: Sequence[Any]) -> None:
        query = self._q(statement)
        self._backend.run(lambda cur: cur.execute(query, params))

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
        self,
        stream_id: str,
        partition: int,
        rows: Sequence[tuple[int, int, int, str | None, int | None]],
        *,
        keep_first: int | None = None,
        priorities: Sequence[int] | None = None,
        window_size: int | None = None,
    ) -> list[int]:
        """Store ``(offset, x, y, user, time_window)`` rows of one partition, in offset order.

        Rows from messages stored before (offset below the partition's high-water mark) are
        skipped; the others get consecutive sequence numbers, returned in order. One transaction.

        ``keep_first``: a time window keeps only its first so many rows by sequence number (the
        rows a capped feature-vector node reads); later rows take their sequence numbers and are
        not stored, so a window's storage, and the work of closing it, are bounded by the cap
        whatever its private size. With ``priorities`` (one secret random integer below 2^62 per
        row), a time window keeps instead its ``keep_first`` rows of lowest priority (a bottom-k
        sample, a uniformly random subset of its rows): a row below a full window's highest
        priority replaces that window's row of highest priority.

        Count-window rows (no time window, feature vectors or int64 points) are stored as chunks
        (:mod:`.chunks`): one stored value per append, split at the multiples of ``window_size``
        (the stream's count window) so that a window's close drops whole chunks. Time-window rows
        without priorities are stored as one chunk per append and window (:mod:`.time_chunks`).

        >>> from privstream.stream_app.store.sqlite_state import SqliteStateStore
        >>> store = SqliteStateStore(":memory:")
        >>> store.append_many("s", 0, [(o, [o / 10], 1, None, None) for o in range(5)], window_size=2)
        [0, 1, 2, 3, 4]
        >>> store.count_window("s", 2, 4).xs.tolist(), store.next_seq("s")
        ([[0.2], [0.3]], 5)
        """
        return self._append(
            stream_id, partition, rows, keep_first, priorities, fence=False, window_size=window_size
        )[0]

    def append_time_rows(
        self,
        stream_id: str,
        partition: int,
        rows: Sequence[tuple[int, int, int, str | None, int | None]],
        *,
        keep_first: int | None = None,
        priorities: Sequence[int] | None = None,
    ) -> int:
        """:meth:`append_many` for time-window rows, fenced against the window's close: a row of a
        window closed already (at or before the stream's last closed window) is not stored, and
        the number of such *late* rows is returned. The close (:meth:`close_window`) and the
        append lock the stream's sequence row, so a row is either in the window's node or late:
        with several workers storing one stream's rows, none is lost or counted twice.

        >>> from privstream.agents.interfaces import NodeBounds
        >>> from privstream.stream_app.store.sqlite_state import SqliteStateStore
        >>> store = SqliteStateStore(":memory:")
        >>> store.append_time_rows("s", 0, [(0, 3, 1, None, 5)])
        0
        >>> _ = store.close_window("s", "t60", 5, NodeBounds(), time_window=5)
        >>> store.append_time_rows("s", 1, [(0, 4, 1, None, 5), (1, 6, 0, None, 6)])  # one late
        1
        >>> store.time_window("s", 6).xs.tolist(), store.time_window("s", 5).xs.tolist()
        ([6], [])
        """
        return self._append(stream_id, partition, rows, keep_first, priorities, fence=True)[1]

    def _append(
        self,
        stream_id: str,
        partition: int,
        rows: Sequence[tuple[int, int, int, str | None, int | None]],
        keep_first: int | None,
        priorities: Sequence[int] | None,
        *,
        fence: bool,
        window_size: int | None = None,
    ) -> tuple[list[int], int]:
        """Store the rows; their sequence numbers, and how many were late (``fence`` only)."""
        if not rows:
            return [], 0
        if priorities is not None and (keep_first is None or len(priorities) != len(rows)):
            raise ValueError("priorities need keep_first and one priority per row")
        q = self._q
        chunked = (
            not fence
            and keep_first is None
            and priorities is None
            and all(row[4] is None for row in rows)
            and fits_a_chunk([row[1] for row in rows])
        )
        timed = (
            priorities is None
            and all(row[4] is not None for row in rows)
            and fits_a_chunk([row[1] for row in rows])
        )
        thresholds: dict[int, int] = {}  # the bottom-k windows' bounds this batch leaves, once committed
        closed_through: list[int] = []  # the stream's last closed window, as the fence read it

        def run(cur: Cursor) -> tuple[list[int], int]:
            cur.execute(
                q(
                    "INSERT INTO {positions} (stream_id, part, next_offset) VALUES (?, ?, -1) "
                    "ON CONFLICT DO NOTHING"
                ),
                (stream_id, partition),
            )
            low = cur.execute(
                q("SELECT next_offset FROM {positions} WHERE stream_id = ? AND part = ?{for_update}"),
                (stream_id, partition),
            ).fetchone()[0]
            # in offset order: all fresh unless a replay brought some (the hot path skips the scan)
            fresh = rows if rows[0][0] >= low else [r for r in rows if r[0] >= low]
            if not fresh:
                return [], 0
            cur.execute(
                q("INSERT INTO {stream_seq} (stream_id, next_seq) VALUES (?, 0) ON CONFLICT DO NOTHING"),
                (stream_id,),
            )
            statement = q("SELECT next_seq FROM {stream_seq} WHERE stream_id = ?{for_update}")
            first = int(cur.execute(statement, (stream_id,)).fetchone()[0])
            if chunked:
                self._insert_chunks(cur, stream_id, partition, first, fresh, window_size)
                cur.execute(
                    q("UPDATE {positions} SET next_offset = ? WHERE stream_id = ? AND part = ?"),
                    (fresh[-1][0] + 1, stream_id, partition),
                )
                cur.execute(
                    q("UPDATE {stream_seq} SET next_seq = ? WHERE stream_id = ?"),
                    (first + len(fresh), stream_id),
                )
                return list(range(first, first + len(fresh))), 0
            ranks = priorities[len(rows) - len(fresh) :] if priorities is not None else [None] * len(fresh)
            taken = list(zip(fresh, ranks, strict=True))
            closed_through.clear()  # a rerun of the body starts again
            if fence:  # read under the sequence row's lock, which a close holds until it commits
                closed = cur.execute(
                    q("SELECT last_closed_window FROM {schedules} WHERE stream_id = ?"), (stream_id,)
                ).fetchone()
                if closed is not None and closed[0] is not None:
                    last = int(closed[0])
                    closed_through.append(last)
                    taken = [(r, rank) for r, rank in taken if r[4] is None or r[4] > last]
            if timed:
                kept = [r for r, _ in taken]
                time_chunks.insert_time_chunks(
                    cur, q, stream_id, partition, first, kept, keep_first, self._full_windows
                )
                cur.execute(
                    q("UPDATE {positions} SET next_offset = ? WHERE stream_id = ? AND part = ?"),
                    (fresh[-1][0] + 1, stream_id, partition),
                )
                cur.execute(
                    q("UPDATE {stream_seq} SET next_seq = ? WHERE stream_id = ?"),
                    (first + len(kept), stream_id),
                )
                return list(range(first, first + len(kept))), len(fresh) - len(kept)
            examples: list[Example] = []
            item, previous = 0, None
            for seq, ((offset, x, y, user, window), rank) in zip(
                itertools.count(first),
                taken,
                strict=False,  # count() is endless
            ):
                item = item + 1 if offset == previous else 0  # the rows of one batch message
                previous = offset
                priority = None if rank is None or window is None else int(rank)
                examples.append((stream_id, seq, partition, offset, item, x, int(y), user, window, priority))
            if priorities is not None:
                if keep_first is None:  # refused above: priorities need keep_first
                    raise InvariantError("invariant broken: sampled windows have keep_first")
                thresholds.clear()  # a rerun of the body starts again
                examples = self._sample_rows_of_windows(cur, stream_id, examples, keep_first, thresholds)
            elif keep_first is not None:
                examples = self._first_rows_of_windows(cur, stream_id, examples, keep_first)
            self._backend.insert_examples(cur, examples)
            cur.execute(
                q("UPDATE {positions} SET next_offset = ? WHERE stream_id = ? AND part = ?"),
                (fresh[-1][0] + 1, stream_id, partition),
            )
            cur.execute(
                q("UPDATE {stream_seq} SET next_seq = ? WHERE stream_id = ?"), (first + len(taken), stream_id)
            )
            return list(range(first, first + len(taken))), len(fresh) - len(taken)

        seqs, late = self._backend.run(run)
        for window, bound in thresholds.items():  # committed: later batches may skip above it
            self._thresholds[(stream_id, window)] = bound
        if closed_through:  # windows another worker closed: forget what this one remembers of them
            self._forget_closed(stream_id, closed_through[-1])
        return seqs, late

    def _insert_chunks(
        self,
        cur: Cursor,
        stream_id: str,
        partition: int,
        first: int,
        rows: Sequence[tuple[int, Any, int, str | None, int | None]],
        window_size: int | None,
    ) -> None:
        """Rows ``first ..`` of one partition as chunks, split at the multiples of ``window_size``."""
        cuts = [0]
        if window_size:
            edge = (first // window_size + 1) * window_size
            while edge < first + len(rows):
                cuts.append(edge - first)
                edge += window_size
        cuts.append(len(rows))
        chunks = []
        for start, stop in itertools.pairwise(cuts):
            part = rows[start:stop]
            data = encode_chunk([r[1] for r in part], [r[2] for r in part], [r[3] for r in part])
            chunks.append((stream_id, first + start, stop - start, partition, data))
        cur.executemany(self._q(_INSERT_CHUNK), chunks)

    def _seq_window_on(
        self, cur: Cursor, stream_id: str, start: int, end: int, *, first: int | None = None
    ) -> WindowData:
        """The rows of sequence numbers ``[start, end)`` in order, from the chunks and from rows
        stored one by one (by earlier versions); ``first``: only the first so many."""
        where = "stream_id = ? AND seq >= ? AND seq < ?"
        single = self._window_on(cur, where, (stream_id, start, end), first=first)
        chunks = cur.execute(
            self._q(
                "SELECT seq, n, data FROM {example_chunks} WHERE stream_id = ? AND seq < ? AND seq + n > ? "
                "AND time_window IS NULL ORDER BY seq"
            ),
            (stream_id, end, start),
        ).fetchall()
        if not chunks:
            return single
        parts = [single] if len(single.seqs) else []
        wanted = end - start if first is None else first  # chunk rows to decode at most
        for seq, n, data in chunks:
            if wanted <= 0:
                break
            seq, n = int(seq), int(n)
            lo = max(0, start - seq)
            hi = min(n, end - seq, lo + wanted)
            xs, ys, users = decode_chunk(data, lo, hi)
            parts.append(
                WindowData(xs, ys.astype(np.uint8), users, np.arange(seq + lo, seq + hi, dtype=np.int64))
            )
            wanted -= hi - lo
        return merged(parts, first)

    def _time_window_on(
        self, cur: Cursor, stream_id: str, window: int, *, first: int | None = None
    ) -> WindowData:
        """Time window ``window``'s rows in arrival order, from its chunks and from rows stored one
        by one (bottom-k rows, rows of earlier versions); ``first``: only the first so many."""
        single = self._window_on(cur, "stream_id = ? AND time_window = ?", (stream_id, window), first=first)
        parts = time_chunks.time_chunk_rows(cur, self._q, stream_id, window, first)
        if not parts:
            return single
        return merged([single, *parts] if len(single.seqs) else parts, first)

    def _drop_chunks(self, cur: Cursor, stream_id: str, start: int, end: int) -> None:
        """Drop the chunked rows of sequence numbers ``[start, end)``: whole chunks, and the part
        of a chunk that spans the range's edge (rewritten without it)."""
        q = self._q
        overlapping = cur.execute(
            q(
                "SELECT seq, n, part FROM {example_chunks} WHERE stream_id = ? AND seq < ? AND seq + n > ? "
                "AND time_window IS NULL"
            ),
            (stream_id, end, start),
        ).fetchall()
        for seq, n, partition in overlapping:
            seq, n = int(seq), int(n)
            if start <= seq and seq + n <= end:
                continue  # inside the range: deleted below, never read
            (data,) = cur.execute(
                q("SELECT data FROM {example_chunks} WHERE stream_id = ? AND seq = ?"), (stream_id, seq)
            ).fetchone()
            xs, ys, users = decode_chunk(data)  # a chunk across the range's edge: rare, once per close
            cur.execute(q("DELETE FROM {example_chunks} WHERE stream_id = ? AND seq = ?"), (stream_id, seq))
            for lo, hi in ((seq, min(start, seq + n)), (max(end, seq), seq + n)):
                if lo < hi:
                    rows = slice(lo - seq, hi - seq)
                    cur.execute(
                        q(_INSERT_CHUNK),
                        (stream_id, lo, hi - lo, partition, encode_chunk(xs[rows], ys[rows], users[rows])),
                    )
        cur.execute(
            q(
                "DELETE FROM {example_chunks} WHERE stream_id = ? AND seq >= ? AND seq + n <= ? "
                "AND time_window IS NULL"
            ),
            (stream_id, start, end),
        )

    def _forget_closed(self, stream_id: str, last: int) -> None:
        if self._forgotten_through.get(stream_id, last - 1) >= last:
            return
        self._forgotten_through[stream_id] = last
        for key in [k for k in self._full_windows if k[0] == stream_id and k[1] <= last]:
            self._full_windows.discard(key)
        for key in [k for k in self._thresholds if k[0] == stream_id and k[1] <= last]:
            del self._thresholds[key]

    def _sample_rows_of_windows(
        self, cur: Cursor, stream_id: str, examples: list[Example], keep: int, thresholds: dict[int, int]
    ) -> list[Example]:
        """The examples to insert so that each time window holds its ``keep`` rows of lowest
        priority (a bottom-k sample); a row replacing one of a full window is stored here.

        A window not yet full takes rows in; a full one compares a row with its highest kept
        priority (remembered, so most rows cost one comparison) and, when lower, deletes that row
        and stores this one: about ``keep·ln(n/keep)`` replacements for n rows, all at ingest.
        """
        q = self._q
        room: dict[int, int] = {}
        kept: list[Example] = []
        highest = q(
            "SELECT seq, priority FROM {examples} WHERE stream_id = ? AND time_window = ? AND "
            "priority IS NOT NULL ORDER BY priority DESC, seq DESC LIMIT 1"
        )
        for example in examples:
            window, priority = example[8], example[9]
            if window is None or priority is None:
                kept.append(example)
                continue
            if window not in room:
                statement = q(
                    "SELECT count(*) FROM (SELECT 1 FROM {examples} WHERE stream_id = ? AND "
                    "time_window = ? AND time_window IS NOT NULL LIMIT ?) AS stored"
                )
                if (stream_id, window) in self._full_windows:
                    room[window] = 0
                else:
                    stored = int(cur.execute(statement, (stream_id, window, keep)).fetchone()[0])
                    room[window] = keep - stored
                    if stored >= keep:  # committed rows only: a rolled-back batch marks nothing
                        self._full_windows.add((stream_id, window))
            if room[window] > 0:
                room[window] -= 1
                kept.append(example)
                continue
            bound = thresholds.get(window, self._thresholds.get((stream_id, window)))
            if bound is not None and priority >= bound:
                continue  # the common case once a window is full: no query
            pending = [e for e in kept if e[8] == window]
            if pending:  # this batch's rows of the window first, so the highest is the true one
                self._backend.insert_examples(cur, pending)
                kept = [e for e in kept if e[8] != window]
            top = cur.execute(highest, (stream_id, window)).fetchone()
            if top is not None and priority < int(top[1]):
                cur.execute(q("DELETE FROM {examples} WHERE stream_id = ? AND seq = ?"), (stream_id, top[0]))
                self._backend.insert_examples(cur, [example])
                top = cur.execute(highest, (stream_id, window)).fetchone()
            if top is not None:
                thresholds[window] = int(top[1])
        return kept

    def _first_rows_of_windows(
        self, cur: Cursor, stream_id: str, examples: list[Example], keep: int
    ) -> list[Example]:
        """The examples a time window still has room for under ``keep`` rows (in seq order).

        A window found full is remembered until it closes (its rows are only dropped then, and no
        row of a closed window is taken in): counting a window not yet full reads at most ``keep``
        index entries, a full one costs nothing.
        """
        room: dict[int, int] = {}
        kept: list[Example] = []
        for example in examples:
            window = example[8]
            if window is None:
                kept.append(example)
                continue
            if window not in room:
                if (stream_id, window) in self._full_windows:
                    room[window] = 0
                else:
                    stored = time_chunks.stored_rows(cur, self._q, stream_id, window, keep)
                    room[window] = keep - stored
                    if stored >= keep:  # committed rows only: a rolled-back batch marks nothing
                        self._full_windows.add((stream_id, window))
            if room[window] > 0:
                room[window] -= 1
                kept.append(example)
        return kept

    def next_seq(self, stream_id: str) -> int:
        rows = self._read("SELECT next_seq FROM {stream_seq} WHERE stream_id = ?", (stream_id,))
        return int(rows[0][0]) if rows else 0

    def positions(self, stream_id: str) -> dict[int, int]:
        """The stream's high-water marks: per partition, the offset after the last one stored."""
        rows = self._read("SELECT part, next_offset FROM {positions} WHERE stream_id = ?", (stream_id,))
        return {int(part): int(offset) for part, offset in rows}

    def log_marks(self) -> dict[int, str]:
        """Per partition of the examples topic, its log mark (:mod:`~..kafka.log_marks`, JSON)."""
        rows = self._read("SELECT key, value FROM {meta} WHERE key LIKE ?", ("examples_log:%",))
        return {int(key.split(":", 1)[1]): str(value) for key, value in rows}

    def put_log_mark(self, partition: int, mark: str) -> None:
        """Keep ``partition``'s log mark (JSON), replacing the one it had."""
        self._write(
            "INSERT INTO {meta} (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (f"examples_log:{partition}", mark),
        )

    def partitions(self, stream_id: str) -> set[int]:
        return {
            int(r[0]) for r in self._read("SELECT part FROM {positions} WHERE stream_id = ?", (stream_id,))
        }

    def _window_on(
        self, cur: Cursor, where: str, params: Sequence[Any], *, first: int | None = None
    ) -> WindowData:
        """The window's rows in arrival order; ``first``: only the first so many (None: all)."""
        columns = self._backend.point_columns
        limit = "" if first is None else f" LIMIT {int(first)}"
        statement = self._q(
            f"SELECT y, user_id, seq, {columns} FROM {{examples}} WHERE {where} ORDER BY seq{limit}"
        )
        rows = cur.execute(statement, params).fetchall()
        if not rows:
            empty = np.empty(0, dtype=np.int64)
            return WindowData(empty, np.empty(0, dtype=np.uint8), np.empty(0, dtype=object), empty)
        ys, users, seqs = zip(*(row[:3] for row in rows), strict=True)
        return WindowData(
            self._backend.points([row[3:] for row in rows]),
            np.array(ys, dtype=np.uint8),
            np.array(users, dtype=object),
            np.array(seqs, dtype=np.int64),
        )

    def count_window(self, stream_id: str, start: int, end: int) -> WindowData:
        return self._backend.run(lambda cur: self._seq_window_on(cur, stream_id, start, end), mode="read")

    def time_window(self, stream_id: str, index: int) -> WindowData:
        return self._backend.run(lambda cur: self._time_window_on(cur, stream_id, index), mode="read")

    def pending_time_windows(self, stream_id: str) -> list[int]:
        def run(cur: Cursor) -> list[int]:
            rows = cur.execute(
                self._q(
                    "SELECT DISTINCT time_window FROM {examples} WHERE stream_id = ? "
                    "AND time_window IS NOT NULL"
                ),
                (stream_id,),
            ).fetchall()
            return sorted({int(r[0]) for r in rows} | time_chunks.time_windows(cur, self._q, stream_id))

        return self._backend.run(run, mode="read")
