"""The throwaway PostgreSQL server of the tests and the bench: found, started unprivileged, stopped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from privstream.stream_app.store import pg_server as server_module
from privstream.stream_app.store.pg_server import PostgresServer, PostgresUnavailableError, find_bindir


def test_missing_server_binaries_are_named_with_the_fix(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(server_module.BINDIR_ENV, str(tmp_path))  # an empty directory
    monkeypatch.setattr(server_module.shutil, "which", lambda name: None)
    monkeypatch.setattr(server_module.glob, "glob", lambda pattern: [])
    with pytest.raises(PostgresUnavailableError, match=r"initdb, postgres.*apt-get install postgresql"):
        find_bindir()


def test_the_binaries_directory_can_be_given(monkeypatch, pg_server: PostgresServer) -> None:
    bindir = find_bindir()  # the session's server started, so they exist
    monkeypatch.setenv(server_module.BINDIR_ENV, str(bindir))
    assert find_bindir() == bindir


def test_a_server_runs_unprivileged_and_is_gone_after_stop() -> None:
    try:
        server = PostgresServer(durable=False).start()
    except PostgresUnavailableError as exc:
        pytest.skip(str(exc))
    pid, directory = server.pid, server._dir
    assert pid is not None and directory is not None and directory.is_dir()
    with server.connect() as conn:
        assert conn.execute("SELECT current_setting('listen_addresses')").fetchone() == ("127.0.0.1",)
        assert conn.execute(
            "SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = 'privstream'"
        ).fetchone() == (True,)
    if os.geteuid() == 0:
        assert os.stat(directory).st_uid != 0  # PostgreSQL refuses to run as root
    server.stop()
    assert server.pid is None and not directory.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
