"""Key rotations on the keys topic, with a stand-in topic: ``keys rotate`` sends its statement
(Kafka down: one line, the next worker start sends it), a worker start sends the statements the
topic lacks and nothing twice, ``ledger recover`` records from the topic the rotations a restored
ledger backup lacks (following only the chain from its current key), and a subscriber that pinned
the old key follows a statement read from the topic."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from privstream_client.signing import RotationStatement

from privstream.stream_app.cli import main
from privstream.stream_app.cli.ledger import _replay_rotations
from privstream.stream_app.cli.worker import send_missing_rotations
from privstream.stream_app.kafka import clients, rotation_log
from privstream.stream_app.kafka.clients import KafkaUnavailableError, ensure_topics
from privstream.stream_app.key_rotation import rotate
from privstream.stream_app.settings import TOPIC_NAMES, Settings, StreamConfig
from privstream.stream_app.signing import Signer, SigningKeyError, recorded_key_set
from privstream.stream_app.store import factory
from privstream.stream_app.store.identity import WorkerStores, open_for_worker

STREAM = StreamConfig(name="s", hypothesis_class="thresholds:16", release={"epsilon_budget": 1.0})
AT = datetime(2026, 12, 1, tzinfo=UTC)


def settings_in(folder: Path) -> Settings:
    return Settings(
        data_dir=folder,
        streams=[STREAM],
        ledger_create_if_missing=True,
        kafka_bootstrap="127.0.0.1:9",  # never reached: the topic is a stand-in
        topic_prefix="t.",
        _env_file=None,
    )


def start(settings: Settings) -> str:
    stores: WorkerStores = open_for_worker(settings)
    try:
        if stores.signer is None:
            raise AssertionError("no signer")
        return stores.signer.key_id
    finally:
        if stores.ledger is not None:
            stores.ledger.close()
        stores.state.close()


class Topic:
    """A stand-in for the keys topic: what was sent, in order, as (key, value) pairs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, down: bool = False) -> None:
        self.records: list[tuple[str | None, bytes]] = []
        self.down = down
        monkeypatch.setattr(clients, "produce_json", self.produce)
        monkeypatch.setattr(rotation_log, "read_records", self.read)

    async def produce(self, settings: Settings, topic: str, records: Iterable[tuple[str | None, Any]]) -> int:
        if self.down:
            raise KafkaUnavailableError("cannot use 127.0.0.1:9: KafkaConnectionError")
        if topic != "t.keys":
            raise AssertionError(f"sent to {topic}")
        sent = list(records)
        self.records += sent
        return len(sent)

    async def read(self, settings: Settings, since: float | None, topics: Sequence[str] = ()) -> list:
        if self.down:
            raise KafkaUnavailableError("cannot use 127.0.0.1:9: KafkaConnectionError")
        if tuple(topics) != ("keys",) or since is not None:
            raise AssertionError(f"read {topics} since {since}")
        return [(value, [], 0) for _key, value in self.records]

    def statements(self) -> list[RotationStatement]:
        return [RotationStatement.from_json(value) for _key, value in self.records]


def backup(settings: Settings, target: Path) -> None:
    with sqlite3.connect(settings.resolved_ledger_path) as source, sqlite3.connect(target) as copy:
        source.backup(copy)
    source.close()
    copy.close()


def restore(settings: Settings, saved: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{settings.resolved_ledger_path}{suffix}").unlink(missing_ok=True)
    with sqlite3.connect(saved) as source, sqlite3.connect(settings.resolved_ledger_path) as copy:
        source.backup(copy)
    source.close()
    copy.close()


def test_the_keys_topic_is_created_with_the_others_and_keeps_its_records_for_ever(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    created: list[Any] = []

    class Admin:
        def __init__(self, **options: Any) -> None:
            pass

        async def list_topics(self) -> list[str]:
            return []

        async def create_topics(self, topics: list[Any]) -> None:
            created.extend(topics)

        async def close(self) -> None:
            pass

    async def started(client: Any, settings: Settings) -> None:
        pass

    monkeypatch.setattr(clients, "AIOKafkaAdminClient", Admin)
    monkeypatch.setattr(clients, "start_client", started)
    assert "keys" in TOPIC_NAMES
    asyncio.run(ensure_topics(settings_in(tmp_path)))
    configs = {t.name: t.topic_configs for t in created}
    assert configs["t.keys"] == {"retention.ms": "-1"}  # a pinned key from years ago still follows
    assert "retention.ms" not in configs["t.hypotheses"]


def test_keys_rotate_sends_its_statement_to_the_keys_topic(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = settings_in(tmp_path)
    old = start(settings)
    topic = Topic(monkeypatch)
    config = tmp_path / "privstream.toml"
    config.write_text(f'data_dir = "{tmp_path}"\nkafka_bootstrap = "127.0.0.1:9"\ntopic_prefix = "t."\n')
    assert main(["keys", "rotate", "--config", str(config), "--reason", "yearly"]) == 0
    assert "sent the rotation statement to t.keys" in capsys.readouterr().err
    [(key, _value)] = topic.records
    [statement] = topic.statements()
    with factory.open_ledger(settings, create=False) as ledger:
        assert key == ledger.ledger_id
        current = ledger.signing_keys()[-1]
        first = ledger.signing_keys()[0]
    assert statement.old_key_id == old and statement.new_key.key_id == current.key_id
    assert statement.problem(recorded_key_set([first])) is None  # signed by the old key
    assert statement.problem(recorded_key_set([current])) == "unknown_key"  # not its own voucher


def test_kafka_down_at_a_rotation_is_one_line_and_the_next_worker_start_sends_the_statement(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = settings_in(tmp_path)
    start(settings)
    topic = Topic(monkeypatch, down=True)
    config = tmp_path / "privstream.toml"
    config.write_text(f'data_dir = "{tmp_path}"\nkafka_bootstrap = "127.0.0.1:9"\ntopic_prefix = "t."\n')
    assert main(["keys", "rotate", "--config", str(config), "--reason", "yearly"]) == 0
    err = capsys.readouterr().err
    assert (
        "could not send the rotation statement to t.keys" in err and "the next worker start sends it" in err
    )
    assert send_missing_rotations(settings) == []  # still down: a warning, not a refusal
    topic.down = False
    topic.records.append((None, b'{"type": "junk"}'))  # anyone may write the topic: it proves nothing
    new = start(settings)
    assert send_missing_rotations(settings) == [new]
    assert [RotationStatement.from_json(v).new_key.key_id for _k, v in topic.records[1:]] == [new]
    assert send_missing_rotations(settings) == []  # found on the topic: not sent twice
    assert len(topic.records) == 2


def test_recover_records_from_the_keys_topic_the_rotations_a_restored_backup_lacks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = settings_in(tmp_path)
    old = start(settings)
    saved = tmp_path / "ledger.backup"
    backup(settings, saved)
    topic = Topic(monkeypatch)
    first = rotate(settings, reason="yearly", who="test")
    second = rotate(settings, reason="again", who="test")
    with factory.open_ledger(settings, create=False) as ledger:
        ledger_id = ledger.ledger_id
    # The topic: both genuine statements (newest first, a chain in any order), a forged one from
    # the ledger's own old key id but signed by a thief, another ledger's, and junk.
    thief = Signer.generate()
    forged = RotationStatement(ledger_id, old, thief.public_entry(), AT, "AAAA", "AAAA")
    other = RotationStatement.sign(Signer.generate(), Signer.generate(), "another-ledger", AT)
    for statement in (second.statement, forged, other, first.statement):
        topic.records.append(rotation_log.rotation_record(statement))
    topic.records.append((ledger_id, b"not json"))
    restore(settings, saved)  # the backup from before both rotations: its current key is the old one
    with pytest.raises(SigningKeyError, match="is not the deployment's"):
        start(settings)
    assert not (settings.data_dir / "release_signatures.sqlite3").exists()  # no other source

    assert _replay_rotations(settings, None, "restored the 03:00 backup") == []  # the topic unread
    reader = rotation_log.read_rotation_log
    found = reader(settings, ledger_id)
    assert dict(found.ignored) == {"another_ledger": 1, "not_a_statement": 1}
    recorded = _replay_rotations(settings, None, "restored", lambda lid: reader(settings, lid).statements)
    assert recorded == [first.new_key_id, second.new_key_id]
    with factory.open_ledger(settings, create=False) as ledger:
        keys = [k.key_id for k in ledger.signing_keys()]
    assert keys == [old, first.new_key_id, second.new_key_id]  # the thief's key never entered
    assert start(settings) == second.new_key_id
    assert send_missing_rotations(settings) == []  # both on the topic already

    # A subscriber that pinned the old key follows the statements read from the topic, not the forged one.
    with factory.open_ledger(settings, create=False) as ledger:
        old_entry = next(k for k in ledger.signing_keys() if k.key_id == old)
    followed = recorded_key_set([old_entry]).following(found.statements)
    assert set(followed.key_ids) == {old, first.new_key_id, second.new_key_id}
