"""The SQLite state store: idempotent appends, windows, SOA snapshots, persistence."""

import threading

import pytest

from privstream.stream_app.store.sqlite_state import SqliteStateStore, StateStoreError


def test_sequence_numbers_are_per_stream_and_replays_are_recognised(tmp_path):
    store = SqliteStateStore(tmp_path / "state.sqlite3")
    assert [store.append("a", 0, o, o, 1, None, None) for o in range(3)] == [0, 1, 2]
    assert store.append("b", 1, 0, 5, 0, None, None) == 0
    assert store.append("a", 0, 1, 1, 1, None, None) is None  # same position again
    assert store.append("a", 1, 0, 9, 0, None, None) == 3  # another partition of the same stream
    window = store.count_window("a", 0, 4)
    assert window.xs.tolist() == [0, 1, 2, 9] and window.seqs.tolist() == [0, 1, 2, 3]


def test_replay_after_a_window_was_dropped_is_still_recognised(tmp_path):
    store = SqliteStateStore(tmp_path / "s.sqlite3")
    for offset in range(4):
        store.append("a", 0, offset, offset, 1, None, None)
    store.mark_closed("a", "w0", "released", seqs=(0, 4))
    assert len(store.count_window("a", 0, 4).xs) == 0
    assert store.append("a", 0, 2, 2, 1, None, None) is None
    assert store.next_seq("a") == 4
    assert store.closed_windows("a") == {"w0": "released"}


def test_state_survives_reopening_and_keeps_its_generation(tmp_path):
    path = tmp_path / "s.sqlite3"
    first = SqliteStateStore(path)
    first.append("a", 0, 0, 7, 1, "u1", 12)
    first.save_soa("a", {"mistakes": 3})
    generation = first.generation
    first.close()
    again = SqliteStateStore(path)
    assert again.generation == generation
    assert again.time_window("a", 12).users.tolist() == ["u1"]
    assert again.pending_time_windows("a") == [12]
    assert again.load_soa("a") == {"mistakes": 3}
    assert again.load_soa("other") is None
    assert SqliteStateStore(tmp_path / "new.sqlite3").generation != generation


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path):
    path = tmp_path / "junk.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StateStoreError, match=r"junk\.sqlite3"):
        SqliteStateStore(path)


def test_appends_do_not_wait_for_a_window_being_read(tmp_path):
    """Windows are read on their own connection (WAL): ingestion appends on the event loop must
    not block behind a large window's read (100,000 rows take ~0.1-0.3 s)."""
    store = SqliteStateStore(tmp_path / "s.sqlite3")
    store.append("a", 0, 0, 7, 1, None, None)
    appended = threading.Event()
    with store._read_lock:  # a window read in progress
        writer = threading.Thread(target=lambda: (store.append("a", 0, 1, 8, 0, None, None), appended.set()))
        writer.start()
        assert appended.wait(10), "an append waited for the window read"
    writer.join()
    assert store.count_window("a", 0, 2).xs.tolist() == [7, 8]  # the reader sees the committed append
    store.close()
