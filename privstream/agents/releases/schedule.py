"""The public schedule's moments and what a crash left unreleased: when windows close, the first
time window still open, and which closed windows and nodes still await their release. Each is a
function of the configuration, the clock and the windows the store saw closed or buffered only.
"""

from __future__ import annotations

from privstream.agents.interfaces import StateStore
from privstream.agents.releases.policy import ReleasePolicy
from privstream.agents.windows import completed_nodes, count_window_id, node_id, time_window_index
from privstream.learning.errors import InvariantError


def close_moment(stamp_ms: int | None, now: float) -> float:
    """When a count window closes: its last example's record timestamp (Unix ms), never later
    than the worker's clock ``now`` (a producer's clock ahead of the worker's would otherwise hold
    the stream's schedule back); ``now`` for a record without a timestamp.

    >>> close_moment(1_700_000_000_250, now=1_700_000_003.0), close_moment(None, now=5.0)
    (1700000000.25, 5.0)
    """
    return now if stamp_ms is None else min(stamp_ms / 1000, now)


def close_time(policy: ReleasePolicy, index: int) -> float:
    """When time window ``index`` closes on the worker's clock (public)."""
    if policy.window_seconds is None:
        raise InvariantError("invariant broken: policy.window_seconds is not None")
    return (index + 1) * policy.window_seconds + policy.allowed_lateness_seconds


def first_open_time_window(store: StateStore, policy: ReleasePolicy, start: float) -> int:
    """The first time window not closed yet: after the last one the store saw closed, else the
    stream's first window (the one holding its schedule ``start``) or, after a restart, an earlier
    one whose rows were buffered but not released yet (caught up)."""
    if policy.window_seconds is None:
        raise InvariantError("invariant broken: policy.window_seconds is not None")
    first = time_window_index(start, policy.window_seconds)
    prefix = f"{policy.family}-L0-"  # level-0 windows; nodes record their own closing
    closed = [int(w[len(prefix) :]) for w in store.closed_windows(policy.stream_id) if w.startswith(prefix)]
    pending = store.pending_time_windows(policy.stream_id)
    return max(closed) + 1 if closed else min([first, *pending])


def unreleased_nodes(closed: set[str], family: str, top_level: int) -> list[tuple[int, int]]:
    """The tree's nodes ``(level, index)`` whose last window was closed but which were not (a crash
    between the two), in the schedule's order."""
    prefix = f"{family}-L0-"
    return [
        (level, index)
        for window in sorted(int(w[len(prefix) :]) for w in closed if w.startswith(prefix))
        for level, index in completed_nodes(window, top_level)
        if node_id(family, level, index) not in closed
    ]


def unreleased_count_windows(
    store: StateStore, policy: ReleasePolicy, family: str, closed: set[str]
) -> list[int]:
    """The count windows complete but not closed: closed into node (0, index) before a crash (its
    rows are gone), or still all their rows."""
    size = policy.window_size
    complete = store.next_seq(policy.stream_id) // size
    stored = {i for level, i in store.nodes(policy.stream_id, family) if level == 0}
    return [
        index
        for index in range(complete)
        if count_window_id(store.generation, index, size) not in closed
        and (
            index in stored
            or len(store.count_window(policy.stream_id, index * size, (index + 1) * size).seqs) == size
        )
    ]
