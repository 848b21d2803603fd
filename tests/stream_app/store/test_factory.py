"""The settings' store_url picks the backend of both stores; the service opens them through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from privstream.agents.ledger_port import LedgerMissingError
from privstream.stream_app.bench.ledger_rate import run_ledger_benchmark
from privstream.stream_app.settings import Settings
from privstream.stream_app.store.factory import open_ledger, open_state_store
from privstream.stream_app.store.identity import open_for_worker
from privstream.stream_app.store.pg_server import PostgresServer
from privstream.stream_app.store.postgres_ledger import PostgresLedger
from privstream.stream_app.store.postgres_state import PostgresStateStore
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.store.sqlite_state import SqliteStateStore

STREAM = {
    "name": "s",
    "hypothesis_class": "thresholds:16",
    "release": {"epsilon": 1.0, "epsilon_budget": 3.0, "window": {"size": 10}},
}


def test_the_default_is_the_sqlite_files_of_before(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, ledger_create_if_missing=True, _env_file=None)
    with open_ledger(settings, {"s": (1.0, 0.0)}) as ledger:
        assert isinstance(ledger, SqliteLedger) and ledger.location == str(tmp_path / "ledger.sqlite3")
    store = open_state_store(settings)
    assert isinstance(store, SqliteStateStore) and store.location == str(tmp_path / "state.sqlite3")
    store.close()


def test_a_sqlite_url_puts_both_files_in_its_directory(tmp_path: Path) -> None:
    settings = Settings(
        store_url=f"sqlite:///{tmp_path}/shared",
        streams=[STREAM],
        ledger_create_if_missing=True,
        data_dir=tmp_path,
    )
    stores = open_for_worker(settings)  # the service's budgets from the stream configuration
    assert isinstance(stores.ledger, SqliteLedger) and stores.ledger.budget("s") == (3.0, 0.0)
    stores.ledger.close()
    stores.state.close()
    assert (tmp_path / "shared" / "ledger.sqlite3").is_file()
    assert (tmp_path / "shared" / "state.sqlite3").is_file()


def test_a_postgresql_url_opens_both_stores_in_that_database(
    pg_server: PostgresServer, pg_database: str, tmp_path: Path
):
    settings = Settings(
        store_url=pg_database, store_password=pg_server.password, streams=[STREAM], data_dir=tmp_path
    )
    with pytest.raises(LedgerMissingError, match="refusing to start with a fresh one"):
        open_for_worker(settings)
    first_start = settings.model_copy(update={"ledger_create_if_missing": True})
    stores = open_for_worker(first_start)
    ledger = stores.ledger
    assert isinstance(ledger, PostgresLedger) and ledger.budget("s") == (3.0, 0.0)
    assert isinstance(stores.state, PostgresStateStore) and stores.state.location == pg_database
    ledger.charge("s", "w0", "m", 1.0, 0.0, b"r")
    ledger.close()
    stores.state.close()
    again = open_for_worker(settings)  # a restart: no create needed now
    assert again.ledger is not None and again.ledger.spent("s") == (1.0, 0.0)
    again.ledger.close()
    again.state.close()


def test_the_ledger_bench_measures_both_backends_side_by_side(pg_server: PostgresServer) -> None:
    result = run_ledger_benchmark(
        ["sqlite", "postgresql"],
        url=pg_server.url(),
        password=pg_server.password,
        writers=(1, 2),
        seconds=0.3,
        users_per_release=(50,),
        user_releases=2,
    )
    for store in ("sqlite", "postgresql"):
        for workload in ("shared_stream", "stream_per_writer"):
            rates = result["results"][store][workload]
            assert set(rates) == {"1", "2"} and all(rate > 0 for rate in rates.values())
    assert set(result["postgresql_over_sqlite"]) == {"shared_stream", "stream_per_writer"}
    for store in ("sqlite", "postgresql"):
        figures = result["per_user"][store]["50"]
        assert figures["first_release_users_per_second"] > 0
        assert figures["later_releases_users_per_second"] > 0
    with pg_server.connect() as admin:  # the bench dropped the databases it made
        names = [r[0] for r in admin.execute("SELECT datname FROM pg_database").fetchall()]
    assert not [n for n in names if n.startswith("privstream_bench_")]
