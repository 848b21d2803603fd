"""The state store's release-tree part, on every backend: a closed window's
rows become node (0, w)'s compact data atomically, parents merge from children, the schedule
remembers the last closed window, and all of it survives reopening."""

from __future__ import annotations

import numpy as np
import pytest

from privstream.agents.interfaces import NodeBounds, NodeData, ScheduleState, StateStoreError
from privstream.stream_app.store import chunks, state_rows
from tests.stream_app.store.backends import StateBackend


@pytest.fixture
def store(state_backend: StateBackend):
    opened = state_backend.open()
    yield opened
    opened.close()


def test_closing_a_count_window_turns_its_rows_into_a_histogram_node(store) -> None:
    store.append_many("s", 0, [(o, x, int(x > 4), None, None) for o, x in enumerate([7, 3, 7, 7, 1, 9])])

    node = store.close_window("s", "c4", 0, NodeBounds(), seqs=(0, 4))

    assert (node.xs.tolist(), node.ys.tolist(), node.counts.tolist()) == ([3, 7], [0, 1], [1, 3])
    assert store.count_window("s", 0, 4).xs.tolist() == []  # the raw rows are gone
    assert store.count_window("s", 4, 8).xs.tolist() == [1, 9]  # the next window's are not
    assert store.load_node("s", "c4", 0, 0) == node
    assert store.schedule("s") == ScheduleState("c4", 0)
    assert store.close_window("s", "c4", 0, NodeBounds(), seqs=(0, 4)) == node  # idempotent


def test_closing_an_empty_window_stores_an_empty_node(store) -> None:
    node = store.close_window("s", "t60", 41, NodeBounds(), time_window=41)
    assert node.size == 0 and store.load_node("s", "t60", 0, 41) == NodeData.empty()
    vectors = store.close_window("v", "t60", 41, NodeBounds(max_node_examples=10), time_window=41, vectors=3)
    assert vectors.xs.shape == (0, 3)
    users = store.close_window(
        "u", "t60", 41, NodeBounds(user_contribution_bound=2), time_window=41, user_level=True
    )
    assert users.users is not None and users.size == 0


def test_a_user_level_time_window_keeps_each_users_first_k_rows(store) -> None:
    rows = [(0, 1, 0, "a", 5), (1, 2, 0, "a", 5), (2, 3, 1, "b", 5), (3, 4, 1, "a", 5), (4, 9, 1, "a", 6)]
    store.append_many("s", 0, rows)

    bounds = NodeBounds(user_contribution_bound=2)
    node = store.close_window("s", "t60", 5, bounds, time_window=5, user_level=True)

    assert list(zip(node.users.tolist(), node.xs.tolist(), strict=True)) == [("a", 1), ("a", 2), ("b", 3)]
    assert store.time_window("s", 5).xs.tolist() == [] and store.time_window("s", 6).xs.tolist() == [9]
    assert store.schedule("s") == ScheduleState("t60", 5)


def test_feature_vector_windows_keep_their_first_rows_up_to_the_bound(store) -> None:
    store.append_many("s", 0, [(o, [float(o), 1.0], o % 2, None, None) for o in range(5)])
    node = store.close_window("s", "c5", 0, NodeBounds(max_node_examples=3), seqs=(0, 5), vectors=2)
    assert node.xs.tolist() == [[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]] and node.ys.tolist() == [0, 1, 0]


def test_closing_a_feature_vector_window_reads_only_its_first_cap_rows(store, monkeypatch) -> None:
    # The close runs between a node's close and its deadline: its work must be bounded by the
    # public cap, not by the window's private size (here 40 rows, cap 3), for both window kinds.
    decoded: list[int] = []
    points = store._backend.points
    monkeypatch.setattr(store._backend, "points", lambda rows: decoded.append(len(rows)) or points(rows))
    chunk = chunks.decode_chunk  # rows are stored by the chunk (read there)

    def decode(data, start=0, stop=None):
        xs, ys, users = chunk(data, start, stop)
        decoded.append(len(ys))
        return xs, ys, users

    monkeypatch.setattr(state_rows, "decode_chunk", decode)
    monkeypatch.setattr(chunks, "decode_chunk", decode)  # time-window rows are stored by the chunk too
    store.append_many("s", 0, [(o, [float(o), 0.0], o % 2, None, None) for o in range(40)])
    store.append_many("s", 1, [(o, [float(o), 1.0], 1, None, 7) for o in range(40)])

    bounds = NodeBounds(max_node_examples=3)
    count = store.close_window("s", "c40", 0, bounds, seqs=(0, 40), vectors=2)
    timed = store.close_window("s", "t60", 7, bounds, time_window=7, vectors=2)

    assert count.xs[:, 0].tolist() == [0.0, 1.0, 2.0] and timed.xs[:, 0].tolist() == [0.0, 1.0, 2.0]
    assert decoded == [3, 3]  # never the other 37 rows of either window
    assert store.count_window("s", 0, 40).xs.tolist() == [] and store.time_window("s", 7).xs.tolist() == []


def test_a_capped_time_window_stores_only_its_first_rows_as_they_arrive(store) -> None:
    # The cap at ingest: rows past a time window's first keep_first (by sequence number, across
    # partitions and batches) take their sequence numbers and are never stored.
    first = store.append_many("s", 0, [(o, [float(o), 0.0], 1, None, 7) for o in range(2)], keep_first=3)
    second = store.append_many(
        "s", 1, [(o, [float(10 + o), 0.0], 0, None, 7 + o % 2) for o in range(6)], keep_first=3
    )
    later = store.append_many("s", 0, [(o, [99.0, 0.0], 1, None, 7) for o in range(2, 40)], keep_first=3)

    assert (first, second, later) == ([0, 1], list(range(2, 8)), list(range(8, 46)))
    assert store.time_window("s", 7).xs[:, 0].tolist() == [0.0, 1.0, 10.0]
    assert store.time_window("s", 8).xs[:, 0].tolist() == [11.0, 13.0, 15.0]
    assert store.append_many("s", 0, [(5, [1.0, 0.0], 1, None, 7)], keep_first=3) == []  # a replay
    bounds = NodeBounds(max_node_examples=3)
    node = store.close_window("s", "t60", 7, bounds, time_window=7, vectors=2)
    assert node.xs[:, 0].tolist() == [0.0, 1.0, 10.0] and store.time_window("s", 7).xs.tolist() == []
    store.append_many("s", 1, [(6, [20.0, 0.0], 1, None, 9)], keep_first=3)
    assert store.time_window("s", 9).xs[:, 0].tolist() == [20.0]


def test_a_bottom_k_time_window_keeps_its_rows_of_lowest_priority_as_they_arrive(store) -> None:
    # Integer classes whose n is private: across batches and partitions a time window holds exactly
    # the cap rows of lowest priority of all its rows, never more, and closing it reads only those.
    rng = np.random.default_rng(3)
    priorities = rng.permutation(10_000)[:600].tolist()
    xs = rng.integers(0, 1000, 600).tolist()
    rows = [(o, xs[o], xs[o] % 2, None, 7) for o in range(600)]
    for start in range(0, 600, 70):
        partition, chunk = start // 70 % 2, rows[start : start + 70]
        store.append_many(
            "s", partition, chunk, keep_first=25, priorities=priorities[start : start + len(chunk)]
        )
    stored = store.time_window("s", 7)
    lowest = np.argsort(priorities)[:25]
    assert len(stored.seqs) == 25 and sorted(stored.seqs.tolist()) == sorted(lowest.tolist())
    assert store.append_many("s", 0, [(0, 1, 1, None, 7)], keep_first=25, priorities=[-1]) == []  # replay

    decoded: list[int] = []
    points = store._backend.points
    store._backend.points = lambda rows: decoded.append(len(rows)) or points(rows)
    bounds = NodeBounds(max_node_examples=25, sample=True)
    node = store.close_window("s", "t60", 7, bounds, time_window=7)
    assert decoded == [25] and node.xs.tolist() == [xs[i] for i in lowest]
    assert node.priorities.tolist() == sorted(priorities)[:25]
    assert store.load_node("s", "t60", 0, 7) == node and store.time_window("s", 7).xs.tolist() == []
    empty = store.close_window("s", "t60", 6, bounds, time_window=6)
    parent = store.merge_node("s", "t60", 1, 3, bounds)  # the lowest of both children's
    assert empty.size == 0 and parent == node


def test_parents_merge_from_children_and_nodes_can_be_dropped(store) -> None:
    bounds = NodeBounds()
    store.append_many("s", 0, [(o, o % 3, 1, None, None) for o in range(8)])
    for w in range(4):
        store.close_window("s", "c2", w, bounds, seqs=(2 * w, 2 * w + 2))
    for m in range(2):
        store.merge_node("s", "c2", 1, m, bounds)
    root = store.merge_node("s", "c2", 2, 0, bounds)

    assert (root.xs.tolist(), root.counts.tolist(), root.size) == ([0, 1, 2], [3, 3, 2], 8)
    assert store.nodes("s", "c2") == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (2, 0)]
    assert store.schedule("s") == ScheduleState("c2", 3)
    for w in range(4):
        store.drop_node("s", "c2", 0, w)
    assert store.merge_node("s", "c2", 1, 0, bounds).size == 4  # already built: returned as stored
    store.drop_node("s", "c2", 1, 1)
    with pytest.raises(StateStoreError, match="child"):
        store.merge_node("s", "c2", 2, 1, bounds)  # its children were never built
    assert store.nodes("s", "c2") == [(1, 0), (2, 0)]
    assert store.nodes("s", "other") == []


def test_closing_windows_out_of_order_never_moves_the_schedule_back(store) -> None:
    store.close_window("s", "t60", 9, NodeBounds(), time_window=9)
    store.close_window("s", "t60", 7, NodeBounds(), time_window=7)
    assert store.schedule("s") == ScheduleState("t60", 9)
    store.save_schedule("s", ScheduleState("t60", 3))  # an explicit save is the caller's word
    assert store.schedule("s") == ScheduleState("t60", 3) and store.schedule("nothing") is None


def test_nodes_and_schedule_survive_reopening(state_backend: StateBackend) -> None:
    store = state_backend.open()
    store.append_many("s", 0, [(0, 4, 1, "u", 2), (1, 5, 0, "v", 2)])
    node = store.close_window(
        "s", "t60", 2, NodeBounds(user_contribution_bound=1), time_window=2, user_level=True
    )
    store.save_node("s", "t60", 3, 0, NodeData.from_rows(np.array([1]), np.array([1]), None, NodeBounds()))
    store.close()
    again = state_backend.open()
    try:
        assert again.load_node("s", "t60", 0, 2) == node and again.schedule("s") == ScheduleState("t60", 2)
        assert again.load_node("s", "t60", 3, 0).counts.tolist() == [1]
        assert again.load_node("s", "t60", 3, 1) is None
    finally:
        again.close()
