"""The store probe behind /readyz: ready while the store answers, not ready while it does not."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from privstream.stream_app.settings import Settings
from privstream.stream_app.store.pg_server import PostgresServer, PostgresUnavailableError
from privstream.stream_app.store.probe import StoreProbe, store_ping
from privstream.stream_app.store.sqlite_state import SqliteStateStore


def test_sqlite_store_ready_while_its_file_is_there(tmp_path):
    settings = Settings(store_url=f"sqlite:///{tmp_path}/shared", _env_file=None)
    probe = StoreProbe(store_ping(settings))
    assert probe.check() is False  # no state file yet (an unmounted volume looks like this)
    ready, reason = probe.readiness()
    assert not ready and reason.startswith("the store does not answer")
    SqliteStateStore(settings.resolved_state_path).close()
    assert probe.check() is True and probe.readiness() == (True, "ok")


def test_postgresql_store_not_ready_while_the_server_is_down_then_ready_again():
    server = PostgresServer()
    try:
        server.start()
    except PostgresUnavailableError as exc:
        pytest.skip(str(exc))
    try:
        url = server.create_database("probe")
        settings = Settings(store_url=url, store_password=SecretStr(server.password), _env_file=None)
        probe = StoreProbe(store_ping(settings))
        assert probe.check() and probe.readiness() == (True, "ok")
        server.stop(keep=True)
        assert probe.check() is False
        assert probe.readiness()[0] is False
        server.start()
        assert probe.check() and probe.readiness() == (True, "ok")
    finally:
        server.stop()


def test_a_check_older_than_stale_seconds_is_not_ready():
    probe = StoreProbe(lambda: None, stale_seconds=0.0)
    probe.check()
    ready, reason = probe.readiness()
    assert not ready and "has not answered for" in reason
