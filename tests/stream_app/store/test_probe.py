"""The store probe behind /readyz: ready while the store answers, not ready while it does not."""

from __future__ import annotations

import sqlite3

import pytest
from pydantic import SecretStr

from privstream.agents.ledger_port import LedgerError, LedgerIdentity
from privstream.stream_app.settings import Settings
from privstream.stream_app.store.identity import open_for_worker
from privstream.stream_app.store.pg_server import PostgresServer, PostgresUnavailableError
from privstream.stream_app.store.probe import LedgerGoneError, StoreProbe, store_ping
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
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
    server = PostgresServer(durable=False)
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


@pytest.fixture(params=["sqlite", "postgresql"])
def worker_settings(request: pytest.FixtureRequest, tmp_path) -> Settings:
    stream = {"name": "s", "hypothesis_class": "thresholds:16", "release": {"epsilon_budget": 1.0}}
    if request.param == "sqlite":
        return Settings(data_dir=tmp_path, streams=[stream], ledger_create_if_missing=True, _env_file=None)
    server = request.getfixturevalue("pg_server")
    url = request.getfixturevalue("pg_database")
    return Settings(
        store_url=url,
        store_password=server.password,
        streams=[stream],
        ledger_create_if_missing=True,
        data_dir=tmp_path,
    )


def test_a_ledger_deleted_or_replaced_under_the_worker_takes_it_out_of_service(
    worker_settings: Settings, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
):
    stores = open_for_worker(worker_settings)
    assert stores.ledger is not None and stores.identity is not None
    probe = StoreProbe(store_ping(worker_settings, stores.identity))
    assert probe.check() and probe.readiness() == (True, "ok")
    stores.ledger.claim()  # another worker started: still this ledger, a later epoch
    assert probe.check()

    if worker_settings.store_backend == "sqlite":
        worker_settings.resolved_ledger_path.unlink()
        with pytest.raises(LedgerError, match="deleted or replaced under this worker"):
            stores.ledger.charge("s", "w0", "m", 0.1, 0.0, b"r")  # nothing goes to the unlinked file
    else:
        server = request.getfixturevalue("pg_server")
        with server.connect(worker_settings.store_url.rsplit("/", 1)[1]) as conn:
            conn.execute("DROP TABLE ledger_identity")
    for _ in range(3):
        assert probe.check() is False
    ready, reason = probe.readiness()
    assert not ready and reason.startswith("the privacy ledger") and "is gone" in reason
    assert stores.identity.ledger_id in reason
    assert [r.message for r in caplog.records].count(f"not ready: {reason}") == 1  # logged once
    stores.ledger.close()
    stores.state.close()


def test_a_ledger_replaced_by_another_or_an_older_copy_is_named(tmp_path):
    started = LedgerIdentity("a" * 32, epoch=5, entries=9)
    settings = Settings(data_dir=tmp_path, _env_file=None)
    SqliteStateStore(settings.resolved_state_path).close()
    SqliteLedger.open(settings.resolved_ledger_path, create_if_missing=True).close()
    ping = store_ping(settings, started)
    with pytest.raises(LedgerGoneError, match="was replaced: it is ledger"):
        ping()
    with sqlite3.connect(settings.resolved_ledger_path) as raw:
        raw.execute("UPDATE identity SET ledger_id = ?, epoch = 4", (started.ledger_id,))
    raw.close()
    with pytest.raises(LedgerGoneError, match=r"replaced by an older copy \(epoch 4"):
        ping()
