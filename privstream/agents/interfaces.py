"""The small interfaces the agents depend on; the service (``stream_app``) implements them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np


class IngestMetrics(Protocol):
    """Counters the ingest and online agents report to (Prometheus in the service)."""

    def received(self, count: int = 1) -> None: ...

    def invalid(self, reason: str, count: int = 1) -> None: ...

    def dead_lettered(self, count: int = 1) -> None: ...

    def learned(self, stream_id: str, examples: int, new_mistakes: int, realizable: bool) -> None: ...

    def mistake_bound(self, stream_id: str, bound: int) -> None: ...


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


@runtime_checkable
class StateStore(Protocol):
    """Durable per-stream state: window buffers and SOA snapshots (SQLite or PostgreSQL).

    ``append`` is idempotent per Kafka position, so a replay (at-least-once) stores nothing new
    and an example keeps its sequence number for ever: window ids are deterministic.
    """

    generation: str  # random id of this store; part of every window id (a new store, new ids)

    def append_many(
        self, stream_id: str, partition: int, rows: Sequence[tuple[int, int, int, str | None, int | None]]
    ) -> list[int]:
        """Store ``(offset, x, y, user, time_window)`` rows of one partition in offset order;
        the sequence numbers of the rows stored (rows of messages stored before are skipped)."""
        ...

    def next_seq(self, stream_id: str) -> int: ...

    def partitions(self, stream_id: str) -> set[int]:
        """The source partitions the stream's buffered examples came from."""
        ...

    def count_window(self, stream_id: str, start: int, end: int) -> WindowData: ...

    def time_window(self, stream_id: str, index: int) -> WindowData: ...

    def pending_time_windows(self, stream_id: str) -> list[int]: ...

    def mark_closed(
        self, stream_id: str, window_id: str, outcome: str, *,
        seqs: tuple[int, int] | None = None, time_window: int | None = None,
    ) -> None:
        """Record the window as done (released, refused or failed) and drop its examples (those
        with sequence numbers in ``[seqs[0], seqs[1])``, or of time window ``time_window``)."""
        ...

    def closed_windows(self, stream_id: str) -> dict[str, str]: ...

    def save_soa(self, stream_id: str, state: dict[str, Any]) -> None: ...

    def load_soa(self, stream_id: str) -> dict[str, Any] | None: ...


class ReleaseMetrics(Protocol):
    """What the release agent reports."""

    def released(self, stream_id: str, epsilon_spent: float, epsilon_remaining: float) -> None: ...

    def refused(self, stream_id: str, epsilon_spent: float, epsilon_remaining: float) -> None: ...

    def learner_failed(self, stream_id: str) -> None: ...

    def learner_ran(self, learner: str, seconds: float, window_size: int) -> None: ...

    def late_example(self, stream_id: str) -> None: ...
