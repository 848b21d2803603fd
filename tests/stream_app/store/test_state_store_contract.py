"""The state store's contract (idempotent appends, windows, SOA snapshots, persistence), asserted
once and run on every backend (SQLite, PostgreSQL)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from privstream.agents.interfaces import NodeBounds, StateStore
from tests.stream_app.store.backends import StateBackend


@pytest.fixture
def store(state_backend: StateBackend):
    opened = state_backend.open()
    yield opened
    opened.close()


def test_the_store_satisfies_the_protocol(store) -> None:
    assert isinstance(store, StateStore)


def test_sequence_numbers_are_per_stream_and_replays_are_recognised(store) -> None:
    assert [store.append("a", 0, o, o, 1, None, None) for o in range(3)] == [0, 1, 2]
    assert store.append("b", 1, 0, 5, 0, None, None) == 0
    assert store.append("a", 0, 1, 1, 1, None, None) is None  # same position again
    assert store.append("a", 1, 0, 9, 0, None, None) == 3  # another partition of the same stream
    window = store.count_window("a", 0, 4)
    assert window.xs.tolist() == [0, 1, 2, 9] and window.seqs.tolist() == [0, 1, 2, 3]
    assert window.xs.dtype == np.int64 and window.ys.dtype == np.uint8
    assert store.partitions("a") == {0, 1} and store.partitions("b") == {1}
    assert store.next_seq("a") == 4 and store.next_seq("nothing") == 0


def test_a_batch_message_is_several_rows_at_one_offset(store) -> None:
    # An ExampleBatch message: several examples at one Kafka offset.
    rows = [(10, 1, 1, "u", None), (10, 2, 0, "u", None), (11, 3, 1, None, None)]
    assert store.append_many("a", 0, rows) == [0, 1, 2]
    assert store.append_many("a", 0, rows) == []  # the same messages redelivered
    assert store.append_many("a", 0, [*rows, (12, 4, 0, None, None)]) == [3]
    assert store.count_window("a", 0, 10).xs.tolist() == [1, 2, 3, 4]
    assert store.append_many("a", 0, []) == []


def test_large_points_and_feature_vectors_round_trip(store) -> None:
    store.append("ints", 0, 0, 2**63 - 1, 1, None, None)
    assert store.count_window("ints", 0, 1).xs.tolist() == [2**63 - 1]
    store.append_many("vec", 0, [(0, [0.5, -1.25], 1, None, None), (1, [3.0, 1e-300], 0, None, None)])
    window = store.count_window("vec", 0, 2)
    assert window.xs.dtype == np.float64 and window.xs.tolist() == [[0.5, -1.25], [3.0, 1e-300]]


def test_an_empty_window_has_the_right_types(store) -> None:
    window = store.count_window("a", 0, 100)
    assert len(window.xs) == len(window.ys) == len(window.users) == len(window.seqs) == 0
    assert window.seqs.dtype == np.int64 and window.ys.dtype == np.uint8


def test_replay_after_a_window_was_dropped_is_still_recognised(store) -> None:
    for offset in range(4):
        store.append("a", 0, offset, offset, 1, None, None)
    store.mark_closed("a", "w0", "released", seqs=(0, 4))
    assert len(store.count_window("a", 0, 4).xs) == 0
    assert store.append("a", 0, 2, 2, 1, None, None) is None
    assert store.next_seq("a") == 4
    assert store.closed_windows("a") == {"w0": "released"}
    store.mark_closed("a", "w0", "failed", seqs=(0, 4))  # the first outcome is kept
    assert store.closed_windows("a") == {"w0": "released"}


def test_a_count_windows_close_drops_its_rows_and_only_its_rows_from_the_chunks(store) -> None:
    """Count-window rows are stored by the chunk. Split at the window size, a close drops whole
    chunks; appended without it, a chunk spanning the window's edge keeps the next window's rows."""
    bounds = NodeBounds()
    for stream, size in (("split", 4), ("spanning", None)):
        rows = [(o, [o / 8, 1.0], o % 2, None, None) for o in range(6)]
        assert store.append_many(stream, 0, rows[:3], window_size=size) == [0, 1, 2]
        assert store.append_many(stream, 0, rows[3:], window_size=size) == [3, 4, 5]
        node = store.close_window(stream, "c4", 0, bounds, seqs=(0, 4), vectors=2)
        assert node.xs.tolist() == [[o / 8, 1.0] for o in range(4)] and node.ys.tolist() == [0, 1, 0, 1]
        assert len(store.count_window(stream, 0, 4).seqs) == 0  # dropped with the close
        later = store.count_window(stream, 0, 8)
        assert later.seqs.tolist() == [4, 5] and later.xs.tolist() == [[0.5, 1.0], [0.625, 1.0]]
        assert store.append_many(stream, 0, rows) == []  # a replay of dropped rows is recognised
        store.mark_closed(stream, "c4-L0-1", "released", seqs=(4, 8))
        assert len(store.count_window(stream, 0, 8).seqs) == 0


def test_chunked_rows_keep_their_users_and_a_window_inside_a_chunk_is_cut_out(store) -> None:
    rows = [(o, o, 1, f"u{o}" if o % 2 else None, None) for o in range(10)]
    store.append_many("u", 0, rows)  # one chunk of 10 rows
    assert store.count_window("u", 2, 5).users.tolist() == [None, "u3", None]
    store.mark_closed("u", "w", "released", seqs=(3, 6))  # a window in the middle of the chunk
    window = store.count_window("u", 0, 10)
    assert window.seqs.tolist() == [0, 1, 2, 6, 7, 8, 9] and window.xs.tolist() == [0, 1, 2, 6, 7, 8, 9]
    assert window.users.tolist() == [None, "u1", None, None, "u7", None, "u9"]


def test_closed_windows_are_looked_up_among_given_ids(store) -> None:
    for window in ("w0", "w1", "w2"):
        store.mark_closed("a", window, "released")
    store.mark_closed("b", "w3", "refused")
    assert store.closed_windows("a", among=["w1", "w3", "w9"]) == {"w1": "released"}
    assert store.closed_windows("a", among=[]) == {}
    assert store.closed_windows("b", among=("w3",)) == {"w3": "refused"}


def test_time_windows_are_listed_read_and_dropped(store) -> None:
    store.append_many("t", 0, [(0, 1, 1, "u1", 12), (1, 2, 0, "u2", 11), (2, 3, 1, None, 12)])
    assert store.pending_time_windows("t") == [11, 12]
    window = store.time_window("t", 12)
    assert window.xs.tolist() == [1, 3] and window.users.tolist() == ["u1", None]
    store.mark_closed("t", "t12", "released", time_window=12)
    assert store.pending_time_windows("t") == [11]
    assert store.closed_windows("t") == {"t12": "released"}


def test_state_survives_reopening_and_keeps_its_generation(state_backend: StateBackend) -> None:
    first = state_backend.open()
    first.append("a", 0, 0, 7, 1, "u1", 12)
    first.save_soa("a", {"mistakes": 3, "version": [1, 2]})
    first.save_soa("a", {"mistakes": 4})  # the latest snapshot wins
    generation = first.generation
    second = state_backend.open()  # another worker on the same store
    assert second.generation == generation
    first.close()
    second.close()
    again = state_backend.open()
    assert again.generation == generation
    assert again.time_window("a", 12).users.tolist() == ["u1"]
    assert again.pending_time_windows("a") == [12]
    assert again.load_soa("a") == {"mistakes": 4}
    assert again.load_soa("other") is None
    again.close()


def test_concurrent_appenders_of_one_stream_get_dense_distinct_sequence_numbers(
    state_backend: StateBackend,
) -> None:
    # Two workers (their own store objects) append the partitions of one stream at once.
    stores = [state_backend.open() for _ in range(2)]
    results: dict[int, list[int]] = {0: [], 1: []}

    def append(partition: int) -> None:
        for offset in range(0, 200, 10):
            rows = [(o, o, 1, None, None) for o in range(offset, offset + 10)]
            results[partition] += stores[partition].append_many("s", partition, rows)

    threads = [threading.Thread(target=append, args=(p,)) for p in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    seqs = results[0] + results[1]
    assert sorted(seqs) == list(range(400))
    assert stores[0].next_seq("s") == 400
    assert stores[1].count_window("s", 0, 400).seqs.tolist() == list(range(400))
    for store in stores:
        store.close()


def test_a_time_row_of_a_closed_window_is_late_and_stored_nowhere(store) -> None:
    assert store.append_time_rows("s", 0, [(0, 3, 1, None, 7), (1, 4, 1, None, 7)]) == 0
    node = store.close_window("s", "t60", 7, NodeBounds(), time_window=7)
    assert node.size == 2
    # Another worker's partition, after the close: its row of window 7 is late, window 8's is kept.
    assert store.append_time_rows("s", 3, [(0, 5, 0, None, 7), (1, 6, 0, None, 8)]) == 1
    assert store.time_window("s", 7).xs.tolist() == [] and store.time_window("s", 8).xs.tolist() == [6]
    assert store.append_time_rows("s", 3, [(0, 5, 0, None, 7)]) == 0  # a replay: neither stored nor late
    assert store.close_window("s", "t60", 7, NodeBounds(), time_window=7).size == 2  # unchanged
    assert store.positions("s") == {0: 2, 3: 2}


def test_workers_storing_one_streams_partitions_while_its_owner_closes_lose_and_double_nothing(
    state_backend: StateBackend,
) -> None:
    # Three workers store the rows of six partitions (two each) of one stream over time windows
    # 0..9 while a fourth closes the windows in order: every row ends in exactly one window's node
    # or is counted late, whatever the interleaving of their transactions.
    stores = [state_backend.open() for _ in range(4)]
    late = [0, 0, 0]
    per_partition, windows = 300, 10

    def append(worker: int) -> None:
        for offset in range(0, per_partition, 15):
            for partition in (2 * worker, 2 * worker + 1):
                rows = [(o, o, 1, None, o * windows // per_partition) for o in range(offset, offset + 15)]
                late[worker] += stores[worker].append_time_rows("s", partition, rows)

    closed: list[int] = []

    def close() -> None:
        for window in range(windows):
            while stores[3].next_seq("s") + sum(late) < (window + 1) * 6 * per_partition // windows:
                threading.Event().wait(0.001)  # until the window has (nearly) all its rows
            closed.append(stores[3].close_window("s", "t60", window, NodeBounds(), time_window=window).size)

    threads = [threading.Thread(target=append, args=(w,)) for w in range(3)]
    threads.append(threading.Thread(target=close))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    stored_after = sum(len(stores[3].time_window("s", w).xs) for w in range(windows))
    assert stored_after == 0  # nothing stored into a closed window
    assert sum(closed) + sum(late) == 6 * per_partition
    assert stores[3].next_seq("s") == sum(closed)  # a sequence number per kept row, none per late one
    for opened in stores:
        opened.close()


def test_a_version_1_store_is_upgraded_with_its_examples_and_positions(state_backend: StateBackend) -> None:
    state_backend.write_version_1("cafe0001", [(7, 42), (8, 43)])
    store = state_backend.open()
    assert store.generation == "cafe0001"  # count-window ids stay what they were
    assert store.append("a", 0, 8, 43, 1, None, None) is None  # a replay is still recognised
    assert store.append("a", 0, 9, 44, 0, None, None) == 2
    assert store.count_window("a", 0, 3).xs.tolist() == [42, 43, 44]
    node = store.close_window("a", "c3", 0, NodeBounds(), seqs=(0, 3))  # the release tree is there
    assert node.size == 3 and store.nodes("a", "c3") == [(0, 0)]
    store.close()
