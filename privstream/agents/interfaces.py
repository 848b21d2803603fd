"""The small interfaces the agents depend on; the service (``stream_app``) implements them.

**Node data.** A node of the release tree keeps what its learner needs, compactly, so that a
parent is merged from its two children and never rebuilt by re-reading Kafka:

* integer classes at the example level: a histogram of (x, y) -> count (children add);
* user level: rows (user, x, y), each user's first ``k`` of the node by arrival (the
  ``user_contribution_bound``; a parent keeps each user's first ``k`` rows, left child first);
* feature vectors: rows (x as a float vector, y), the first ``max_node_examples`` by arrival
  (left child first), the memory bound the certificate states;
* a capped integer class whose n is private (time windows at the example level): rows (x, y)
  with each row's secret ``priority`` drawn as it arrived, the ``max_node_examples`` rows of lowest
  priority (a bottom-k sample: a uniformly random subset of the node's examples, held in O(cap)
  whatever their number; a parent keeps the lowest of its two children's, the same subset of its
  windows' union).

>>> bounds = NodeBounds(user_contribution_bound=None, max_node_examples=None)
>>> left = NodeData.from_rows(np.array([3, 3, 5]), np.array([1, 1, 0]), None, bounds)
>>> left.xs.tolist(), left.ys.tolist(), left.counts.tolist(), left.size
([3, 5], [1, 0], [2, 1], 3)
>>> right = NodeData.from_rows(np.array([5, 7]), np.array([0, 1]), None, bounds)
>>> parent = NodeData.merge(left, right, bounds)
>>> parent.counts.tolist(), [x.tolist() for x in parent.examples()]
([2, 2, 1], [[3, 3, 5, 5, 7], [1, 1, 0, 0, 1]])

At the user level each user keeps at most ``k`` rows per node, the earliest first:

>>> k2 = NodeBounds(user_contribution_bound=2, max_node_examples=None)
>>> a = NodeData.from_rows(np.array([1, 2, 3]), np.array([0, 0, 0]), np.array(["u", "u", "u"]), k2)
>>> b = NodeData.from_rows(np.array([4, 5]), np.array([1, 1]), np.array(["v", "u"]), k2)
>>> both = NodeData.merge(a, b, k2)
>>> both.users.tolist(), both.xs.tolist()
(['u', 'u', 'v'], [1, 2, 4])
>>> NodeData.from_bytes(both.to_bytes()) == both
True

A bottom-k node keeps its ``max_node_examples`` rows of lowest priority, children's merged the same way:

>>> cap2 = NodeBounds(max_node_examples=2, sample=True)
>>> a = NodeData.sampled(np.array([1, 2, 3]), np.array([0, 0, 1]), np.array([30, 10, 20]), cap2)
>>> b = NodeData.sampled(np.array([4]), np.array([1]), np.array([15]), cap2)
>>> a.xs.tolist(), NodeData.merge(a, b, cap2).xs.tolist()
([2, 3], [2, 4])
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np


class IngestMetrics(Protocol):
    """Counters the ingest and online agents report to (Prometheus in the service)."""

    def received(self, count: int = 1) -> None: ...

    def invalid(self, reason: str, count: int = 1) -> None: ...

    def dead_lettered(self, count: int = 1) -> None: ...

    def repeated(self, stream_id: str, count: int) -> None: ...  # repeats of an example id, dropped

    def ids_forgotten(self, stream_id: str, count: int) -> None: ...  # before their horizon (memory full)

    def learned(self, stream_id: str, examples: int, new_mistakes: int, realizable: bool) -> None: ...

    def mistake_bound(self, stream_id: str, bound: int) -> None: ...

    def clipped(self, stream_id: str, feature: str, count: int) -> None: ...  # values outside its bounds

    def shard_learned(self, stream_id: str, partition: int, mistakes: int, bound: int | None) -> None:
        """A shard of a stream spread over partitions: its learner's mistakes and bound so far."""
        ...

    def online_learned(
        self,
        stream_id: str,
        examples: int,
        new_mistakes: int,
        margin_mistakes: int | None,
        margin_bound: int | None,
        realizable: bool | None,
    ) -> None:
        """A vector stream's online learner learned ``examples`` (its counts after them)."""
        ...


class StateStoreError(RuntimeError):
    """The state store cannot be used (not a privstream store, a newer schema, locked too long,
    its database unreachable); the message names the file or database."""


class LeaseLostError(RuntimeError):
    """This worker no longer owns the partition its stream's examples come from (the consumer group
    gave it to another worker, which took its lease): it must not charge or publish for the stream.
    Nothing was written; the new owner releases the window."""


class WindowData(NamedTuple):
    """A window's examples in compact numpy form (never a list of objects)."""

    xs: np.ndarray  # int64 points, or float64 (n, d) feature vectors
    ys: np.ndarray  # uint8, 0/1
    users: np.ndarray  # object: user ids or None
    seqs: np.ndarray  # int64: the examples' sequence numbers in the stream (arrival order)


class NodeBounds(NamedTuple):
    """The public bounds a node's data is kept within (both stated in the certificate).

    ``user_contribution_bound``: k rows per user per node (user level; ``None`` at the example
    level). ``max_node_examples``: the rows a feature-vector node keeps (``None``: unbounded; the
    histogram of an integer class is exact and needs no bound), or, with ``sample``, the rows of
    lowest priority an integer-class node keeps (a bottom-k sample instead of a histogram).
    """

    user_contribution_bound: int | None = None
    max_node_examples: int | None = None
    sample: bool = False


@dataclass(frozen=True, eq=False)
class NodeData:
    """What a node's learner needs, compactly (see the module docstring for the three forms).

    ``xs``: int64 points (histogram or user rows) or float64 ``(n, d)`` vectors; ``ys``: uint8;
    ``counts``: int64 multiplicities (all 1 for user rows and vectors); ``users``: the user id of
    each row (a numpy str array) at the user level, else ``None``. Equal when the arrays are
    equal; not hashable (the arrays are not).
    """

    xs: np.ndarray
    ys: np.ndarray
    counts: np.ndarray
    users: np.ndarray | None
    #: A bottom-k node's rows' priorities (int64, ascending); ``None`` for the other forms.
    priorities: np.ndarray | None = None

    # --------------------------------------------------------------------------- building

    @classmethod
    def empty(cls, *, vectors: int | None = None, users: bool = False) -> NodeData:
        """A node without examples (``vectors``: the dimension of feature vectors)."""
        xs = np.zeros((0, vectors), np.float64) if vectors is not None else np.zeros(0, np.int64)
        return cls(xs, np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.str_) if users else None)

    @classmethod
    def from_rows(
        cls, xs: np.ndarray, ys: np.ndarray, users: np.ndarray | None, bounds: NodeBounds
    ) -> NodeData:
        """A level-0 node from a window's rows in arrival order (``users``: user level)."""
        xs = np.asarray(xs)
        ys = np.asarray(ys, dtype=np.uint8)
        vectors = xs.ndim == 2
        xs = xs.astype(np.float64 if vectors else np.int64, copy=False)
        if users is not None:
            users = np.asarray(users).astype(np.str_)
            keep = _first_k_per_user(users, bounds.user_contribution_bound)
            xs, ys, users = xs[keep], ys[keep], users[keep]
            xs, ys, users = _cap(bounds.max_node_examples if vectors else None, xs, ys, users)
            return cls(xs, ys, np.ones(len(ys), np.int64), users)
        if vectors:
            xs, ys = _cap(bounds.max_node_examples, xs, ys)
            return cls(xs, ys, np.ones(len(ys), np.int64), None)
        return _histogram(xs, ys, np.ones(len(ys), np.int64))

    @classmethod
    def sampled(cls, xs: np.ndarray, ys: np.ndarray, priorities: np.ndarray, bounds: NodeBounds) -> NodeData:
        """A bottom-k node: the ``bounds.max_node_examples`` rows of lowest priority (ascending;
        ties, which 62-bit random priorities make negligible, by position)."""
        if bounds.max_node_examples is None:
            raise ValueError("a bottom-k node needs max_node_examples")
        xs, ys = np.asarray(xs).astype(np.int64, copy=False), np.asarray(ys, dtype=np.uint8)
        priorities = np.asarray(priorities, dtype=np.int64)
        keep = np.argsort(priorities, kind="stable")[: bounds.max_node_examples]
        return cls(xs[keep], ys[keep], np.ones(len(keep), np.int64), None, priorities[keep])

    @classmethod
    def from_window(
        cls, rows: WindowData, bounds: NodeBounds, *, vectors: int | None = None, user_level: bool = False
    ) -> NodeData:
        """Node (0, w)'s data from a window's stored rows (``vectors``: the feature dimension, for
        an empty window; at the user level rows without a user, dead-lettered by validation
        before they are stored, would be left out)."""
        xs, ys = rows.xs, rows.ys
        if len(ys) == 0:
            return cls.empty(vectors=vectors, users=user_level)
        if vectors is not None and xs.ndim == 1:
            xs = xs.reshape(len(ys), -1)
        users = None
        if user_level:
            known = np.array([u is not None for u in rows.users], dtype=bool)
            xs, ys, users = xs[known], ys[known], rows.users[known].astype(np.str_)
        return cls.from_rows(xs, ys, users, bounds)

    @classmethod
    def merge(cls, left: NodeData, right: NodeData, bounds: NodeBounds) -> NodeData:
        """The parent of two sibling nodes (``left`` covers the earlier windows)."""
        if (left.users is None) != (right.users is None):
            raise ValueError("cannot merge a user-level node with an example-level one")
        if bounds.sample:
            if left.priorities is None or right.priorities is None:
                raise ValueError("a bottom-k node merges only with bottom-k nodes")
            return cls.sampled(
                np.concatenate([left.xs, right.xs]),
                np.concatenate([left.ys, right.ys]),
                np.concatenate([left.priorities, right.priorities]),
                bounds,
            )
        xs = np.concatenate([left.xs, right.xs])
        ys = np.concatenate([left.ys, right.ys])
        if left.users is not None and right.users is not None:
            return cls.from_rows(xs, ys, np.concatenate([left.users, right.users]), bounds)
        if xs.ndim == 2:
            return cls.from_rows(xs, ys, None, bounds)
        return _histogram(xs, ys, np.concatenate([left.counts, right.counts]))

    # --------------------------------------------------------------------------- reading

    @property
    def size(self) -> int:
        """How many examples the node holds (private where n is private: never publish it)."""
        return int(self.counts.sum())

    def examples(self) -> tuple[np.ndarray, np.ndarray]:
        """The node's examples as the learner takes them: ``(xs, ys)``, histogram rows repeated."""
        if self.xs.ndim == 2 or self.users is not None or self.priorities is not None:
            return self.xs, self.ys
        return np.repeat(self.xs, self.counts), np.repeat(self.ys, self.counts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NodeData):
            return NotImplemented
        if (self.users is None) != (other.users is None) or (self.priorities is None) != (
            other.priorities is None
        ):
            return False
        pairs = [(self.xs, other.xs), (self.ys, other.ys), (self.counts, other.counts)]
        if self.users is not None and other.users is not None:
            pairs.append((self.users, other.users))
        if self.priorities is not None and other.priorities is not None:
            pairs.append((self.priorities, other.priorities))
        return all(
            a.shape == b.shape and a.dtype.kind == b.dtype.kind and np.array_equal(a, b) for a, b in pairs
        )

    __hash__ = None  # type: ignore[assignment]  # declares it unhashable; typeshed types it as a method

    # --------------------------------------------------------------------------- storage

    def to_bytes(self) -> bytes:
        """A compact, pickle-free encoding (``numpy.savez_compressed``: sorted histogram keys
        compress about 8x) for the state store. Feature vectors are stored uncompressed
        (``numpy.savez``): zlib barely shrinks them and took 60 % of a 50,000-vector close."""
        buffer = io.BytesIO()
        arrays: dict[str, Any] = {"xs": self.xs, "ys": self.ys, "counts": self.counts}
        arrays |= {
            name: array
            for name, array in (("users", self.users), ("priorities", self.priorities))
            if array is not None
        }
        save = np.savez if self.xs.dtype.kind == "f" else np.savez_compressed
        save(buffer, allow_pickle=False, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> NodeData:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            users = arrays["users"] if "users" in arrays.files else None
            priorities = arrays["priorities"] if "priorities" in arrays.files else None
            return cls(arrays["xs"], arrays["ys"], arrays["counts"], users, priorities)


def _histogram(xs: np.ndarray, ys: np.ndarray, counts: np.ndarray) -> NodeData:
    """(x, y) -> total count, sorted by (x, y)."""
    if len(xs) == 0:
        return NodeData(xs.astype(np.int64), ys.astype(np.uint8), counts.astype(np.int64), None)
    pairs, inverse = np.unique(np.stack([xs, ys.astype(np.int64)], axis=1), axis=0, return_inverse=True)
    totals = np.zeros(len(pairs), np.int64)
    np.add.at(totals, inverse.reshape(-1), counts)
    return NodeData(pairs[:, 0].copy(), pairs[:, 1].astype(np.uint8), totals, None)


def _first_k_per_user(users: np.ndarray, k: int | None) -> np.ndarray:
    """Indices of each user's first ``k`` rows, in the rows' order."""
    if k is None or len(users) == 0:
        return np.arange(len(users))
    _, inverse = np.unique(users, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")  # rows grouped by user, arrival order inside
    grouped = inverse[order]
    starts = np.r_[0, np.flatnonzero(np.diff(grouped)) + 1]
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    return np.sort(order[rank < k])


def _cap(bound: int | None, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """The first ``bound`` rows of each array (all of them when unbounded)."""
    return arrays if bound is None else tuple(a[:bound] for a in arrays)


class ScheduleState(NamedTuple):
    """Where a stream's release schedule stands: its window family and last closed window."""

    family: str
    last_closed_window: int | None


@runtime_checkable
class StateStore(Protocol):
    """Durable per-stream state: window buffers and SOA snapshots (SQLite or PostgreSQL).

    ``append`` is idempotent per Kafka position, so a replay (at-least-once) stores nothing new
    and an example keeps its sequence number for ever: window ids are deterministic.
    """

    generation: str  # random id of this store; part of every window id (a new store, new ids)

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
        """Store ``(offset, x, y, user, time_window)`` rows of one partition in offset order;
        the sequence numbers of the rows taken in (rows of messages stored before are skipped;
        ``keep_first``: a time window stores only its first so many rows, or with ``priorities``,
        one secret random priority per row, its so many rows of lowest priority; ``window_size``:
        the stream's count window, so that rows stored together never span two windows)."""
        ...

    def append_time_rows(
        self,
        stream_id: str,
        partition: int,
        rows: Sequence[tuple[int, int, int, str | None, int | None]],
        *,
        keep_first: int | None = None,
        priorities: Sequence[int] | None = None,
    ) -> int:
        """``append_many`` for time-window rows, atomic with respect to the windows' close: a row
        of a window closed already is not stored; returns how many were (late)."""
        ...

    def next_seq(self, stream_id: str) -> int: ...

    def partitions(self, stream_id: str) -> set[int]:
        """The source partitions the stream's buffered examples came from."""
        ...

    def count_window(self, stream_id: str, start: int, end: int) -> WindowData: ...

    def time_window(self, stream_id: str, index: int) -> WindowData: ...

    def pending_time_windows(self, stream_id: str) -> list[int]: ...

    def mark_closed(
        self,
        stream_id: str,
        window_id: str,
        outcome: str,
        *,
        seqs: tuple[int, int] | None = None,
        time_window: int | None = None,
    ) -> None:
        """Record the window as done (released, refused or failed) and drop its examples (those
        with sequence numbers in ``[seqs[0], seqs[1])``, or of time window ``time_window``)."""
        ...

    def closed_windows(self, stream_id: str, among: Iterable[str] | None = None) -> dict[str, str]:
        """``{window_id: outcome}`` of the stream's closed windows and nodes; with ``among``, only
        of those ids (a lookup by key: the release path's check, not a scan of the stream's past)."""
        ...

    def save_soa(self, stream_id: str, state: dict[str, Any]) -> None: ...

    def load_soa(self, stream_id: str) -> dict[str, Any] | None: ...

    # --------------------------------------------------------------- the release tree's nodes

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
        """Turn window ``window``'s raw rows (sequence numbers ``[seqs[0], seqs[1])`` of a count
        window, or time window ``time_window``) into node (0, window)'s data, store it, drop the
        rows and record the window as the schedule's last closed one, in one transaction.
        Idempotent: closing a closed window returns its stored node data."""
        ...

    def save_node(self, stream_id: str, family: str, level: int, index: int, data: NodeData) -> None: ...

    def load_node(self, stream_id: str, family: str, level: int, index: int) -> NodeData | None: ...

    def merge_node(self, stream_id: str, family: str, level: int, index: int, bounds: NodeBounds) -> NodeData:
        """Build node (level, index) from its two children (both must be stored) and store it;
        the children are kept (drop them once the parent is built and they are released)."""
        ...

    def drop_node(self, stream_id: str, family: str, level: int, index: int) -> None: ...

    def nodes(self, stream_id: str, family: str) -> list[tuple[int, int]]:
        """The (level, index) of the stream's stored nodes of this family, sorted."""
        ...

    def schedule(self, stream_id: str) -> ScheduleState | None: ...

    def save_schedule(self, stream_id: str, state: ScheduleState) -> None: ...


class ReleaseMetrics(Protocol):
    """What the release agent reports."""

    def released(self, stream_id: str, epsilon_spent: float, epsilon_remaining: float) -> None: ...

    def refused(self, stream_id: str, epsilon_spent: float, epsilon_remaining: float) -> None: ...

    def learner_failed(self, stream_id: str) -> None: ...

    def learner_ran(self, learner: str, seconds: float, window_size: int) -> None: ...

    def late_example(self, stream_id: str) -> None: ...

    def deadline_missed(self, stream_id: str, seconds_late: float) -> None:
        """A release was published after its deadline (operators only: the public sees the deadline)."""
        ...

    def default_released(self, stream_id: str, reason: str) -> None:
        """A release's default went out: its fit was "unfinished" at the deadline, "failed" or its
        process "died" (operators only)."""
        ...

    def released_level(self, stream_id: str, level: int) -> None: ...

    def guarantee_refused(self, stream_id: str) -> None:
        """A release was withheld: its algorithm's guarantee exceeded its charge (an alert)."""
        ...

    def users_excluded(self, stream_id: str, count: int) -> None: ...
