"""The ledger (every release's secret seed) and the state store (raw examples) are readable by the
worker's user only, whatever the umask: files 0600 (SQLite's -wal and -shm files too, and each
stream's file), the data folder and the per-stream folder 0700."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from privstream.stream_app.settings import Settings, StreamConfig
from privstream.stream_app.startup import check_before_start
from privstream.stream_app.store.identity import open_for_worker
from privstream.stream_app.store.sqlite_streams import state_files


@pytest.fixture(params=[0o022, 0o000])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def settings(data_dir: Path) -> Settings:
    streams = [
        StreamConfig(
            name=name,
            hypothesis_class="thresholds:16",
            release={"epsilon": 0.5, "epsilon_budget": 1.0, "window": {"size": 10}},
        )
        for name in ("a", "b")
    ]
    return Settings(data_dir=data_dir, streams=streams, ledger_create_if_missing=True, _env_file=None)


def modes_under(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder.parent)): mode(p) for p in [folder, *sorted(folder.rglob("*"))]}


def test_a_new_deployment_s_files_are_the_worker_s_only(tmp_path: Path, umask: int) -> None:
    data = tmp_path / "data"
    configured = settings(data)
    check_before_start(configured)  # creates the data folder
    stores = open_for_worker(configured)
    for stream in ("a", "b"):  # each stream's own file, with examples in it
        stores.state.append(stream, partition=0, offset=0, x=3, y=1, user=None, time_window=None)
    found = modes_under(data)
    # While open: the WAL and shared-memory files exist and are private too.
    assert any(name.endswith("-wal") for name in found) and any(name.endswith("-shm") for name in found)
    assert len(state_files(configured.resolved_state_path)) == 3  # main file and one per stream
    assert found["data"] == 0o700 and found["data/state.sqlite3.streams"] == 0o700
    assert {name: m for name, m in found.items() if Path(name).suffix != ".streams" and name != "data"} == {
        name: 0o600 for name in found if Path(name).suffix != ".streams" and name != "data"
    }
    assert stores.ledger is not None
    stores.ledger.close()
    stores.state.close()


def test_files_left_readable_by_an_earlier_version_are_made_private_when_opened(tmp_path: Path) -> None:
    data = tmp_path / "data"
    configured = settings(data)
    old = os.umask(0o022)
    try:
        stores = open_for_worker(configured)
        stores.state.append("a", partition=0, offset=0, x=3, y=1, user=None, time_window=None)
        assert stores.ledger is not None
        stores.ledger.close()
        stores.state.close()
        for path in [data, *data.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        check_before_start(configured)
        stores = open_for_worker(configured)
        stores.state.append("a", partition=0, offset=1, x=3, y=1, user=None, time_window=None)
        found = modes_under(data)
        assert found["data"] == 0o700 and found["data/state.sqlite3.streams"] == 0o700
        assert set(found.values()) == {0o700, 0o600}  # WAL and shared-memory files too
        assert found["data/ledger.sqlite3"] == found["data/ledger.sqlite3-wal"] == 0o600
        assert found["data/state.sqlite3"] == found["data/state.sqlite3.streams/a.sqlite3"] == 0o600
        assert stores.ledger is not None
        stores.ledger.close()
        stores.state.close()
    finally:
        os.umask(old)
