"""Key rotations on the keys topic, on a real broker: a rotation made while Kafka cannot be
reached is sent by the next worker start; a ledger backup from before the rotation, restored on a
host that kept only the key (no saved ``/keys``, no worker key statement; SQLite files or one
PostgreSQL database), is refused, then
``privstream ledger recover`` records the rotation from the topic (junk and a forged statement on
the topic add nothing) and the worker starts with the new key; the statement is on the topic once,
and a subscriber that pinned the old key follows it from there."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer
from privstream_client.signing import RotationStatement
from pydantic import SecretStr

from privstream.stream_app.embedded.broker import free_listener_ports
from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.kafka.rotation_log import read_rotation_log, rotation_record
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.signing import Signer, SigningKeyError, recorded_key_set
from privstream.stream_app.store.factory import open_ledger
from privstream.stream_app.store.identity import open_for_worker
from privstream.stream_app.store.signatures import SIGNATURES_FILE

from .conftest import run, start_worker, wait_until
from .test_live_backup_restore import WINDOW, Backup, examples, privstream

pytestmark = [pytest.mark.live, pytest.mark.slow]


async def produce_raw(settings: Settings, values: list[bytes]) -> None:
    """What anyone who can write to the keys topic can do."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(settings.topic("keys"), value)
    finally:
        await producer.stop()


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_a_rotation_reaches_the_keys_topic_and_recover_reads_it_into_a_restored_backup(
    unique_settings, tmp_path, store, request
):
    update: dict = {}
    pg = None
    if store == "postgresql":
        pg = request.getfixturevalue("pg_server")
        url = request.getfixturevalue("pg_database")
        update = {"store_url": url, "store_password": SecretStr(pg.password)}
    stream = StreamConfig(
        name="s",
        hypothesis_class="thresholds:4096",
        release=ReleaseConfig(window=WindowConfig(size=WINDOW), epsilon=1.0, epsilon_budget=2.0, top_level=1),
    )
    settings = unique_settings.model_copy(
        update={"streams": [stream], "ledger_create_if_missing": True, "topic_partitions": 1, **update}
    )
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    try:
        run(produce_json(settings, settings.topic("examples"), examples(WINDOW, seed=1)))
        budget = f"{worker.public_url}/streams/s/budget"
        wait_until(lambda: (fetch_json(budget) or {}).get("releases") == 1, 120, what="window 0 released")
    finally:
        assert worker.stop() == 0
    with open_ledger(settings, create=False) as ledger:
        ledger_id, [first] = ledger.ledger_id, ledger.signing_keys()
    settings = settings.model_copy(update={"ledger_create_if_missing": False})
    backup = Backup(settings, tmp_path, pg)
    backup.take()

    # The rotation, with Kafka unreachable: recorded, one line, nothing on the topic yet.
    nobody = free_listener_ports()["public_port"]
    unreachable = settings.model_copy(update={"kafka_bootstrap": f"127.0.0.1:{nobody}"})
    rotated = privstream(unreachable, "keys", "rotate", "--reason", "yearly")
    assert rotated.returncode == 0, rotated.stderr
    assert f"could not send the rotation statement to {settings.topic('keys')}" in rotated.stderr
    assert read_rotation_log(settings, ledger_id).statements == []
    with open_ledger(settings, create=False) as ledger:
        new = ledger.signing_keys()[-1].key_id
    assert new != first.key_id

    # The next worker start sends it.
    worker = start_worker(settings.model_copy(update=free_listener_ports()), tmp_path)
    assert worker.stop() == 0
    [sent] = read_rotation_log(settings, ledger_id).statements
    assert (sent.old_key_id, sent.new_key.key_id) == (first.key_id, new)

    # Anyone may write the topic: junk, and a thief's statement from the old key id.
    thief = Signer.generate()
    forged = RotationStatement(ledger_id, first.key_id, thief.public_entry(), sent.at, sent.signature, "AAAA")
    run(produce_raw(settings, [b"junk", rotation_record(forged)[1]]))

    # The backup from before the rotation, restored where only the key file survived.
    backup.restore()
    (settings.data_dir / SIGNATURES_FILE).unlink()
    with pytest.raises(SigningKeyError, match="is not the deployment's"):
        open_for_worker(settings)
    recovered = privstream(settings, "ledger", "recover", "--reason", "restored the 03:00 backup")
    assert recovered.returncode == 0, recovered.stderr
    assert f"recorded 1 key rotations the ledger lacked; current key {new}" in recovered.stderr
    assert "charged 0 releases" in recovered.stderr
    with open_ledger(settings, create=False) as ledger:
        assert [k.key_id for k in ledger.signing_keys()] == [first.key_id, new]  # not the thief's

    restarted = start_worker(settings.model_copy(update=free_listener_ports()), tmp_path)
    try:
        ready = f"{restarted.operator_url}/readyz"
        wait_until(lambda: fetch_json(ready) == {"status": "ready", "reason": "ok"}, 120, what="ready")
        served = fetch_json(f"{restarted.public_url}/keys") or {}
        assert [r["new_key"]["key_id"] for r in served["rotations"]] == [new]
    finally:
        assert restarted.stop() == 0
    on_topic = read_rotation_log(settings, ledger_id)
    assert [s.new_key.key_id for s in on_topic.statements] == [new, thief.key_id]  # ours once
    assert dict(on_topic.ignored) == {"not_a_statement": 1}
    # A subscriber that pinned the old key follows the topic's statements to the new key only.
    followed = recorded_key_set([first]).following(on_topic.statements)
    assert set(followed.key_ids) == {first.key_id, new}
