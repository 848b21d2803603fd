"""A stream's nodes in the state store: the public bounds their data is kept within, building a
node (a window's rows, or a parent from its two children), recording it released, and its public
description in the certificate.

>>> from privstream.agents.releases.policy import ReleasePolicy
>>> window_info(ReleasePolicy("s", None, (), window_size=100), "c0-100", 1, 1)
WindowInfo(window_id='c0-100-L1-1', kind='count', start=200, end=400, first_window=2, last_window=3)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import numpy as np

from privstream.agents.interfaces import NodeBounds, NodeData, StateStore
from privstream.agents.releases.policy import ReleasePolicy, samples_at_ingest
from privstream.agents.windows import node_id, node_windows
from privstream.learning.randomness import RandomSource, secure
from privstream.schemas import WindowInfo


def node_bounds(policy: ReleasePolicy) -> NodeBounds:
    """The public bounds a node's stored data is kept within (stated in the certificate)."""
    user_level = policy.privacy_unit == "user"
    if samples_at_ingest(policy):
        return NodeBounds(max_node_examples=policy.max_node_examples, sample=True)
    return NodeBounds(
        user_contribution_bound=policy.user_contribution_bound if user_level else None,
        # At the user level a stored node keeps every admitted user's first k rows (an excluded
        # user's were never stored, so they take no slot); the cap applies at release.
        max_node_examples=policy.max_node_examples
        if policy.feature_bounds is not None and not user_level
        else None,
    )


#: Draws one secret sampling priority per example (below 2^62) for a bottom-k window.
Priorities = Callable[[int], list[int]]


def ingest_rule(
    policy: ReleasePolicy, rng: RandomSource | None = None
) -> tuple[int | None, Priorities | None]:
    """How a time window's rows are taken in (the state store's ``keep_first`` and priorities):
    a capped vector node keeps its first ``max_node_examples`` rows, a bottom-k node its rows of
    lowest priority (:func:`~.policy.samples_at_ingest`; priorities from ``rng``, secure by
    default), anything else every row.

    >>> from privstream.learning.randomness import seeded
    >>> policy = ReleasePolicy("s", None, (), expected_size=10, max_node_examples=3, window_kind="time")
    >>> keep, priorities = ingest_rule(policy, seeded(0))
    >>> keep, len(priorities(4)), all(0 <= p < 2**62 for p in priorities(4))
    (3, 4, True)
    """
    keep = node_bounds(policy).max_node_examples
    if not samples_at_ingest(policy):
        return keep, None
    source = rng if rng is not None else secure()

    def priorities(n: int) -> list[int]:
        raw = source.getrandbits(64 * n).to_bytes(8 * n, "little") if n else b""
        drawn: list[int] = (np.frombuffer(raw, dtype="<u8") >> np.uint64(2)).astype(np.int64).tolist()
        return drawn

    return keep, priorities


def window_info(policy: ReleasePolicy, family: str, level: int, index: int) -> WindowInfo:
    """Node ``(level, index)``'s public description: its id, its windows and what they span."""
    window_id = node_id(family, level, index)
    windows = node_windows(level, index)
    if policy.window_kind == "count":
        size = policy.window_size
        return WindowInfo(
            window_id=window_id,
            kind="count",
            start=windows.start * size,
            end=windows.stop * size,
            first_window=windows.start,
            last_window=windows.stop - 1,
        )
    if policy.window_seconds is None:
        raise ValueError(f"stream {policy.stream_id}: a time window needs window_seconds")
    seconds = policy.window_seconds
    return WindowInfo(
        window_id=window_id,
        kind="time",
        start=datetime.fromtimestamp(windows.start * seconds, UTC),
        end=datetime.fromtimestamp(windows.stop * seconds, UTC),
        first_window=windows.start,
        last_window=windows.stop - 1,
    )


def empty_node(policy: ReleasePolicy) -> NodeData:
    """A node without examples, in the form the stream's nodes take (bottom-k, vectors, users)."""
    if node_bounds(policy).sample:
        none = np.zeros(0, np.int64)
        return NodeData.sampled(none, np.zeros(0, np.uint8), none, node_bounds(policy))
    vectors = None if policy.feature_bounds is None else int(policy.feature_bounds.shape[0])
    return NodeData.empty(vectors=vectors, users=policy.privacy_unit == "user")


def fill_before_start(
    store: StateStore, policy: ReleasePolicy, family: str, level: int, index: int, first_window: int
) -> list[int]:
    """Store as empty the children of node ``(level, index)`` whose windows all precede the
    stream's first time window: a stream registered in window 5 completes node (1, 2) of windows
    4 and 5, and window 4 never existed (no example could be in it). A child holding a window of
    the stream, stored or recorded closed, is left alone (a missing one is an error). The
    children stored empty, by index.
    """
    filled = []
    for child in (2 * index, 2 * index + 1):
        if node_windows(level - 1, child).stop > first_window:
            continue
        if store.load_node(policy.stream_id, family, level - 1, child) is not None:
            continue
        if store.closed_windows(policy.stream_id, among=[node_id(family, level - 1, child)]):
            continue
        store.save_node(policy.stream_id, family, level - 1, child, empty_node(policy))
        filled.append(child)
    return filled


def build_node(
    store: StateStore,
    policy: ReleasePolicy,
    family: str,
    level: int,
    index: int,
    *,
    first_window: int | None = None,
) -> NodeData:
    """Node ``(level, index)``'s compact data, built once and stored: a window's rows become
    node (0, w) and are dropped (one transaction); a higher node is merged from its two
    children, which are dropped once they were released (recorded closed). Idempotent: a
    restart finds the stored node. Never re-reads Kafka. ``first_window``: a time stream's first
    window (children before it are empty: :func:`fill_before_start`)."""
    stream_id, bounds = policy.stream_id, node_bounds(policy)
    if level > 0:
        if first_window is not None:
            fill_before_start(store, policy, family, level, index, first_window)
        data = store.merge_node(stream_id, family, level, index, bounds)
        children = {child: node_id(family, level - 1, child) for child in (2 * index, 2 * index + 1)}
        closed = store.closed_windows(stream_id, among=children.values())
        for child, child_id in children.items():  # the parent is built: released children go
            if child_id in closed:
                store.drop_node(stream_id, family, level - 1, child)
        return data
    vectors = None if policy.feature_bounds is None else int(policy.feature_bounds.shape[0])
    user_level = policy.privacy_unit == "user"
    if policy.window_kind == "count":
        size = policy.window_size
        return store.close_window(
            stream_id,
            family,
            index,
            bounds,
            seqs=(index * size, (index + 1) * size),
            vectors=vectors,
            user_level=user_level,
        )
    return store.close_window(
        stream_id, family, index, bounds, time_window=index, vectors=vectors, user_level=user_level
    )


def node_released(
    store: StateStore, policy: ReleasePolicy, family: str, level: int, index: int, outcome: str
) -> None:
    """Record node ``(level, index)`` released (or refused) and drop its data if nothing needs it
    any more: a top-level node, or one whose parent is built already (a retry after a restart)."""
    stream_id = policy.stream_id
    store.mark_closed(stream_id, node_id(family, level, index), outcome)
    parent_built = store.load_node(stream_id, family, level + 1, index // 2) is not None
    if level == policy.top_level or parent_built:
        store.drop_node(stream_id, family, level, index)
