"""The worker's SQLite state store keeps each stream in a file of its own: one stream's node build
(one write transaction, as long as its window is large) never holds another stream's appends."""

from __future__ import annotations

import threading

import numpy as np

from privstream.agents.interfaces import NodeBounds, NodeData
from privstream.stream_app.settings import Settings
from privstream.stream_app.store.factory import open_state_store
from privstream.stream_app.store.sqlite_state import SqliteStateStore
from privstream.stream_app.store.sqlite_streams import SqliteStreamStores


def test_one_streams_node_build_does_not_hold_another_streams_appends(tmp_path, monkeypatch):
    store = open_state_store(Settings(store_url=f"sqlite:///{tmp_path}", _env_file=None))
    try:
        store.append_many("a", 0, [(o, o, 1, None, None) for o in range(10)])
        building, release = threading.Event(), threading.Event()
        from_window = NodeData.from_window

        def slow_build(rows, bounds, **kwargs):  # stream a's build, inside its write transaction
            building.set()
            release.wait(30)
            return from_window(rows, bounds, **kwargs)

        monkeypatch.setattr(NodeData, "from_window", slow_build)
        build = threading.Thread(
            target=store.close_window, args=("a", "c10", 0, NodeBounds()), kwargs={"seqs": (0, 10)}
        )
        build.start()
        assert building.wait(30)
        appended: list[list[int]] = []
        append = threading.Thread(
            target=lambda: appended.append(store.append_many("b", 0, [(0, 5, 1, None, None)]))
        )
        append.start()
        append.join(20)  # while a's build still holds its transaction
        still_waiting = append.is_alive()
        release.set()
        build.join(30)
        append.join(30)
        assert not still_waiting and appended == [[0]]
        assert store.load_node("a", "c10", 0, 0).size == 10 and store.count_window("b", 0, 1).xs.tolist() == [
            5
        ]
    finally:
        store.close()


def test_a_stream_held_by_the_main_file_stays_there_and_new_streams_get_their_own(tmp_path):
    path = tmp_path / "state.sqlite3"
    old = SqliteStateStore(path)  # a store made before streams had files of their own
    old.append_many("legacy", 0, [(o, o, 1, None, None) for o in range(3)])
    generation = old.generation
    old.close()

    store = SqliteStreamStores(path)
    try:
        assert store.generation == generation
        assert store.append_many("legacy", 0, [(3, 9, 0, None, None)]) == [3]  # its sequence goes on
        assert store.append_many("fresh", 0, [(0, 4, 1, None, None)]) == [0]
        assert store.shard("legacy") is None and store.shard("fresh") is not None
        assert sorted(p.name for p in store.stream_directory.glob("*.sqlite3")) == ["fresh.sqlite3"]
        assert np.array_equal(store.count_window("legacy", 0, 4).xs, [0, 1, 2, 9])
    finally:
        store.close()
    reopened = SqliteStreamStores(path)
    try:  # what each stream holds is found again where it is
        assert reopened.next_seq("fresh") == 1 and reopened.next_seq("legacy") == 4
    finally:
        reopened.close()
