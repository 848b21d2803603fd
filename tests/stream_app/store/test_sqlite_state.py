"""What only the SQLite state store has: a file (foreign, garbage, made before versions), a reader
connection. The behaviour both backends share is in ``test_state_store_contract.py``."""

import sqlite3
import struct
import threading

import pytest

from privstream.stream_app.store.sqlite_state import SCHEMA_VERSION, SqliteStateStore, StateStoreError


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path):
    path = tmp_path / "junk.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StateStoreError, match=r"junk\.sqlite3"):
        SqliteStateStore(path)


def test_another_applications_database_is_a_clear_error_and_left_alone(tmp_path):
    path = tmp_path / "other.sqlite3"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    raw.close()
    with pytest.raises(StateStoreError, match=r"another application's database .*customers"):
        SqliteStateStore(path)
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT name FROM sqlite_master").fetchall() == [("customers",)]
    raw.close()


def test_a_newer_schema_is_a_clear_error(tmp_path):
    path = tmp_path / "s.sqlite3"
    SqliteStateStore(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(StateStoreError, match="newer"):
        SqliteStateStore(path)


def test_a_file_made_before_schema_versions_opens_and_is_stamped(tmp_path):
    # What privstream 0.1.0 wrote: the version-1 tables, user_version 0.
    path = tmp_path / "s.sqlite3"
    with sqlite3.connect(path) as raw:
        raw.executescript("""
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE stream_seq (stream_id TEXT PRIMARY KEY, next_seq INTEGER NOT NULL);
            CREATE TABLE positions (stream_id TEXT NOT NULL, part INTEGER NOT NULL,
                next_offset INTEGER NOT NULL, PRIMARY KEY (stream_id, part));
            CREATE TABLE examples (stream_id TEXT NOT NULL, seq INTEGER NOT NULL, part INTEGER NOT NULL,
                kafka_offset INTEGER NOT NULL, item INTEGER NOT NULL, x INTEGER NOT NULL, y INTEGER NOT NULL,
                user_id TEXT, time_window INTEGER, PRIMARY KEY (stream_id, seq),
                UNIQUE (stream_id, part, kafka_offset, item));
            CREATE TABLE windows (stream_id TEXT NOT NULL, window_id TEXT NOT NULL, outcome TEXT NOT NULL,
                closed_at TEXT NOT NULL, PRIMARY KEY (stream_id, window_id));
            CREATE TABLE soa (stream_id TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at TEXT NOT NULL);
            INSERT INTO meta VALUES ('generation', 'cafe0001');
            INSERT INTO stream_seq VALUES ('a', 1);
            INSERT INTO positions VALUES ('a', 0, 8);
            INSERT INTO examples VALUES ('a', 0, 0, 7, 0, 42, 1, NULL, NULL);
        """)
    raw.close()
    store = SqliteStateStore(path)
    assert store.generation == "cafe0001"
    assert store.append("a", 0, 7, 42, 1, None, None) is None  # its replay is still recognised
    assert store.append("a", 0, 8, 43, 0, None, None) == 1
    assert store.count_window("a", 0, 2).xs.tolist() == [42, 43]
    store.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    raw.close()


def test_appends_do_not_wait_for_a_window_being_read(tmp_path):
    """Windows are read on their own connection (WAL): ingestion appends on the event loop must
    not block behind a large window's read (100,000 rows take ~0.1-0.3 s)."""
    store = SqliteStateStore(tmp_path / "s.sqlite3")
    store.append("a", 0, 0, 7, 1, None, None)
    appended = threading.Event()
    with store._backend.reader._lock:  # a window read in progress
        writer = threading.Thread(target=lambda: (store.append("a", 0, 1, 8, 0, None, None), appended.set()))
        writer.start()
        assert appended.wait(10), "an append waited for the window read"
    writer.join()
    assert store.count_window("a", 0, 2).xs.tolist() == [7, 8]  # the reader sees the committed append
    store.close()


def test_count_window_vectors_are_stored_as_one_chunk_and_rows_of_earlier_versions_still_read(tmp_path):
    """An append of count-window vectors is one stored chunk (one insert, not one row per example:
    the ingest path's cost); rows an earlier version stored one by one, as float64 bytes or JSON
    text, in the same window, are read alongside, in sequence order, exactly."""
    path = tmp_path / "state.sqlite3"
    store = SqliteStateStore(path)
    vectors = [[0.1, -2.5, 1e-300], [3.0, 0.0, -0.0]]
    store.append_many("s", 0, [(i, x, 1, None, None) for i, x in enumerate(vectors)])
    with sqlite3.connect(path) as raw:
        chunks = raw.execute("SELECT seq, n FROM example_chunks").fetchall()
        single = raw.execute("SELECT count(*) FROM examples").fetchone()[0]
        raw.execute(
            "INSERT INTO examples (stream_id, seq, part, kafka_offset, item, x, y, user_id, time_window) "
            "VALUES ('s', 3, 0, 3, 0, '[7.5, 8.0, 9.25]', 0, NULL, NULL)"
        )
        raw.execute(
            "INSERT INTO examples (stream_id, seq, part, kafka_offset, item, x, y, user_id, time_window) "
            "VALUES ('s', 2, 0, 2, 0, ?, 1, NULL, NULL)",
            (struct.pack("<3d", 1.0, 2.0, 3.0),),
        )
    raw.close()
    assert chunks == [(0, 2)] and single == 0
    window = store.count_window("s", 0, 4)
    assert window.xs.dtype == float
    assert window.xs.tolist() == [*vectors, [1.0, 2.0, 3.0], [7.5, 8.0, 9.25]]
    assert window.ys.tolist() == [1, 1, 1, 0] and window.seqs.tolist() == [0, 1, 2, 3]
    store.close()


def test_time_window_rows_are_stored_as_a_chunk_per_window_and_rows_of_earlier_versions_still_read(tmp_path):
    """An append of time-window vectors is one stored chunk per window it touches (not one row per
    example); a row an earlier version stored on its own in the same window is read alongside, in
    arrival order, and the window's close takes both into its node and drops both."""
    from privstream.agents.interfaces import NodeBounds

    path = tmp_path / "state.sqlite3"
    store = SqliteStateStore(path)
    rows = [(o, [float(o), 1.0], o % 2, None, 7 + o % 2) for o in range(6)]  # windows 7, 8, 7, 8, ...
    assert store.append_time_rows("s", 0, rows, keep_first=10) == 0
    with sqlite3.connect(path) as raw:
        chunks = raw.execute("SELECT seq, n, time_window FROM example_chunks ORDER BY seq").fetchall()
        single = raw.execute("SELECT count(*) FROM examples").fetchone()[0]
        raw.execute(
            "INSERT INTO examples (stream_id, seq, part, kafka_offset, item, x, y, user_id, time_window) "
            "VALUES ('s', 6, 1, 0, 0, ?, 1, NULL, 7)",
            (struct.pack("<2d", 9.0, 9.0),),
        )
        raw.execute("UPDATE stream_seq SET next_seq = 7")
    raw.close()
    assert chunks == [(0, 3, 7), (3, 3, 8)] and single == 0
    store.append_time_rows("s", 0, [(6, [6.0, 1.0], 0, None, 7)], keep_first=10)  # after the single row
    window = store.time_window("s", 7)
    assert window.xs[:, 0].tolist() == [0.0, 2.0, 4.0, 9.0, 6.0] and window.seqs.tolist() == [0, 1, 2, 6, 7]
    assert store.pending_time_windows("s") == [7, 8]
    node = store.close_window("s", "t60", 7, NodeBounds(max_node_examples=4), time_window=7, vectors=2)
    assert node.xs[:, 0].tolist() == [0.0, 2.0, 4.0, 9.0]
    assert store.pending_time_windows("s") == [8] and store.time_window("s", 7).seqs.tolist() == []
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT time_window FROM example_chunks").fetchall() == [(8,)]
        assert raw.execute("SELECT count(*) FROM examples").fetchone()[0] == 0
    raw.close()
    store.close()
