"""One signing key per deployment: the ledger records it with the first worker, and a worker with
another key, or a missing key file for a ledger that has signed, refuses to start (one line
naming both keys and the fix) instead of signing with a key no subscriber knows.

A "worker start" is :func:`open_for_worker`, the first thing ``privstream worker`` does; the
live test is in ``tests/integration/test_live_ledger_identity.py``."""

from __future__ import annotations

import sqlite3
import stat
import threading
from pathlib import Path

import pytest
from pydantic import SecretStr

from privstream.stream_app.settings import Settings, StreamConfig
from privstream.stream_app.signing import Signer, SigningKeyError, shared_key_file
from privstream.stream_app.store.identity import WorkerStores, open_for_worker
from privstream.stream_app.store.pg_server import PostgresServer
from privstream.stream_app.store.sqlite_ledger import SqliteLedger

STREAM = StreamConfig(
    name="s",
    hypothesis_class="thresholds:16",
    release={"epsilon": 0.5, "epsilon_budget": 1.0, "window": {"size": 10}},
)


@pytest.fixture(params=["sqlite", "postgresql"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """A worker's settings with the default key file ``data_dir/signing_key.pem``."""
    base = Settings(data_dir=tmp_path / "w1", streams=[STREAM], ledger_create_if_missing=True, _env_file=None)
    if request.param == "sqlite":  # the ledger shared by the workers, beside their data folders
        return base.model_copy(update={"ledger_path": tmp_path / "ledger.sqlite3"})
    server: PostgresServer = request.getfixturevalue("pg_server")
    return base.model_copy(
        update={
            "store_url": request.getfixturevalue("pg_database"),
            "store_password": SecretStr(server.password),
        }
    )


def started(settings: Settings) -> str:
    """Start (and stop) a worker; the key id it signs with."""
    stores = open_for_worker(settings)
    try:
        assert stores.signer is not None and stores.ledger is not None
        assert stores.signer.key_id in stores.keys.key_ids
        return stores.signer.key_id
    finally:
        close(stores)


def close(stores: WorkerStores) -> None:
    if stores.ledger is not None:
        stores.ledger.close()
    stores.state.close()


def refused(settings: Settings) -> str:
    with pytest.raises(SigningKeyError) as error:
        close(open_for_worker(settings))
    message = str(error.value)
    assert "\n" not in message
    return message


def recorded(settings: Settings) -> list[str]:
    from privstream.stream_app.store import factory

    with factory.open_ledger(settings, create=False) as ledger:
        return [k.key_id for k in ledger.signing_keys()]


def test_the_first_worker_on_a_new_ledger_makes_the_key_and_the_ledger_records_it(settings) -> None:
    key = settings.data_dir / "signing_key.pem"
    first = started(settings)
    assert key.is_file() and stat.S_IMODE(key.stat().st_mode) == 0o600
    assert recorded(settings) == [first]
    assert started(settings) == first  # a restart: the same key, nothing new recorded
    assert recorded(settings) == [first]


def test_a_deleted_key_file_is_refused_not_replaced(settings) -> None:
    first = started(settings)
    key = settings.data_dir / "signing_key.pem"
    key.unlink()
    message = refused(settings)
    assert f"the signing key {key} is missing" in message and f"signs with key {first}" in message
    assert "restore the key file" in message
    assert not key.exists()  # no new key was made
    assert recorded(settings) == [first]


def test_a_second_worker_with_its_own_key_is_refused(settings, tmp_path: Path) -> None:
    first = started(settings)
    second = settings.model_copy(update={"data_dir": tmp_path / "w2"})
    (tmp_path / "w2").mkdir()
    other = Signer.generate()
    (tmp_path / "w2" / "signing_key.pem").write_bytes(other.private_pem())
    message = refused(second)
    assert f"this worker's signing key {other.key_id}" in message and f"records key {first}" in message
    assert "give every worker the deployment's key" in message
    # Given the deployment's key, it starts.
    shared = second.model_copy(update={"signing_key_file": settings.data_dir / "signing_key.pem"})
    assert started(shared) == first
    assert recorded(settings) == [first]


def test_workers_starting_together_on_a_new_ledger_record_one_key(settings, tmp_path: Path) -> None:
    # Two workers with their own keys race to be first: one key is recorded, the other refused.
    workers = []
    for name in ("a", "b"):
        key = shared_key_file(tmp_path / f"{name}.pem")
        workers.append(settings.model_copy(update={"data_dir": tmp_path / name, "signing_key_file": key}))
    from privstream.stream_app.store import factory

    factory.open_ledger(settings, create=True).close()  # both open an existing, empty ledger
    outcomes: list[str] = []

    def start(worker: Settings) -> None:
        try:
            outcomes.append(started(worker))
        except SigningKeyError as exc:
            outcomes.append(f"refused: {exc}")

    threads = [threading.Thread(target=start, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    [winner] = recorded(settings)
    assert sorted(o.startswith("refused") for o in outcomes) == [False, True]
    assert winner in outcomes


def test_a_ledger_from_before_keys_were_recorded_records_the_key_it_finds(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, streams=[STREAM], ledger_create_if_missing=True, _env_file=None)
    signer = Signer.generate()
    (tmp_path / "signing_key.pem").write_bytes(signer.private_pem())
    with SqliteLedger.open(
        settings.resolved_ledger_path, create_if_missing=True, budgets={"s": (1.0, 0.0)}
    ) as old:
        old.charge("s", "w0", "m", 0.1, 0.0, b"signed by the key of the data folder")
    with sqlite3.connect(settings.resolved_ledger_path) as raw:  # as a ledger of schema version 5
        raw.execute("DROP TABLE signing_keys")
        raw.execute("DROP TABLE admissions")
        raw.execute("PRAGMA user_version = 5")
    raw.close()
    assert started(settings) == signer.key_id
    assert recorded(settings) == [signer.key_id]
    # Had its key file been lost as well, nothing would say which key it was: refused.
    (tmp_path / "signing_key.pem").unlink()
    with sqlite3.connect(settings.resolved_ledger_path) as raw:
        raw.execute("DELETE FROM signing_keys")
    raw.close()
    message = refused(settings)
    assert "holds releases signed by a key it does not record" in message
    assert not (tmp_path / "signing_key.pem").exists()
