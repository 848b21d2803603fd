"""Key rotation: ``privstream keys rotate`` replaces the deployment's key with one the old key
vouches for; a subscriber that pinned the old key follows the statement, a forged one adds nothing.
"""

from __future__ import annotations

import asyncio
import json
import stat
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from privstream_client.signing import RotationStatement, rotation_statements

from privstream.stream_app.cli import main
from privstream.stream_app.key_rotation import key_document, rotate
from privstream.stream_app.settings import Settings, StreamConfig
from privstream.stream_app.signing import KeySet, Signer, SigningKeyError, staged_key_file
from privstream.stream_app.store import factory
from privstream.stream_app.store.identity import WorkerStores, open_for_worker

STREAM = StreamConfig(name="s", hypothesis_class="thresholds:16", release={"epsilon_budget": 1.0})
AT = datetime(2026, 12, 1, tzinfo=UTC)
RELEASE = b'{"stream_id": "s"}'


def settings_in(folder: Path) -> Settings:
    return Settings(data_dir=folder, streams=[STREAM], ledger_create_if_missing=True, _env_file=None)


def start(settings: Settings) -> str:
    stores: WorkerStores = open_for_worker(settings)
    try:
        assert stores.signer is not None
        return stores.signer.key_id
    finally:
        if stores.ledger is not None:
            stores.ledger.close()
        stores.state.close()


def document(settings: Settings) -> str:
    with factory.open_ledger(settings, create=False) as ledger:
        return json.dumps(key_document(ledger.signing_keys()))


def test_a_pinned_subscriber_follows_a_chain_of_rotations_and_nothing_else() -> None:
    a, b, c = Signer.generate(), Signer.generate(), Signer.generate()
    pinned = KeySet([a.public_entry()])
    ab = RotationStatement.sign(a, b, "L", AT)
    bc = RotationStatement.sign(b, c, "L", AT + timedelta(days=1))
    followed = pinned.following([bc, ab])  # in any order
    assert followed.key_ids == [a.key_id, b.key_id, c.key_id]
    assert followed.problem(RELEASE, *c.sign(RELEASE)) is None
    # The old keys verify what they signed before their rotation, nothing later.
    assert followed.problem(RELEASE, *a.sign(RELEASE), timestamp_ms=int(AT.timestamp() * 1000)) is None
    late = int((AT + timedelta(hours=1)).timestamp() * 1000)
    assert followed.problem(RELEASE, *a.sign(RELEASE), timestamp_ms=late) == "retired_key"
    # A statement read back from JSON is the same statement.
    assert RotationStatement.from_json(ab.to_json()) == ab


def test_forged_rotation_statements_add_no_key() -> None:
    a, b, thief = Signer.generate(), Signer.generate(), Signer.generate()
    pinned = KeySet([a.public_entry()])
    genuine = RotationStatement.sign(a, b, "L", AT)
    forgeries = {
        "unknown_key": RotationStatement.sign(thief, b, "L", AT),  # not signed by a pinned key
        "bad_signature": replace(genuine, new_key=thief.public_entry()),  # another key swapped in
        "bad_countersignature": replace(
            RotationStatement.sign(a, b, "L", AT), countersignature=thief.sign(genuine.signed_bytes())[1]
        ),
    }
    for problem, forged in forgeries.items():
        assert forged.problem(pinned) == problem
        assert pinned.following([forged]).key_ids == [a.key_id]
    # A key retired before the statement's time vouches for nothing.
    retired = KeySet([replace(a.public_entry(), not_after=AT - timedelta(days=1))])
    assert genuine.problem(retired) == "retired_key" and len(retired.following([genuine])) == 1
    with pytest.raises(ValueError, match="not a rotation statement"):
        RotationStatement.from_dict({**genuine.to_dict(), "type": "something else"})
    # A document with an unreadable statement beside the genuine one: a follower skips the bad one.
    document = json.dumps({"keys": [], "rotations": [{"type": "junk"}, genuine.to_dict()]})
    with pytest.raises(ValueError, match="not a rotation statement"):
        rotation_statements(document)
    assert pinned.following(rotation_statements(document, strict=False)).key_ids == [a.key_id, b.key_id]


def test_rotate_replaces_the_key_file_and_the_worker_follows_the_ledger(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    old = start(settings)
    pinned = KeySet.from_json(document(settings))
    key = tmp_path / "signing_key.pem"
    (tmp_path / "old.pem").write_bytes(key.read_bytes())  # another worker's copy of the old key
    done = rotate(settings, reason="yearly", who="test")
    assert done.old_key_id == old and done.path == key and not staged_key_file(key).exists()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert start(settings) == done.new_key_id  # the worker signs with the new key
    served = document(settings)
    followed = pinned.following(rotation_statements(served))
    assert followed.key_ids == [old, done.new_key_id]
    with factory.open_ledger(settings, create=False) as ledger:
        keys = ledger.signing_keys()
        assert [k.key_id for k in keys] == [old, done.new_key_id]
        assert keys[0].retired_at is not None and keys[1].retired_at is None
        assert ledger.audit_log()[-1]["action"] == "signing key rotated"
    # A worker still holding the old key refuses to start.
    other = settings.model_copy(update={"signing_key_file": tmp_path / "old.pem"})
    with pytest.raises(
        SigningKeyError, match=f"this worker's signing key {old} .* records key {done.new_key_id}"
    ):
        start(other)


def test_a_rotation_interrupted_after_the_ledger_recorded_it_is_finished_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_in(tmp_path)
    start(settings)
    import privstream.stream_app.key_rotation as key_rotation

    def crash(*args: object) -> None:
        raise OSError("the machine stopped")

    monkeypatch.setattr(key_rotation.os, "replace", crash)
    with pytest.raises(OSError, match="stopped"):
        rotate(settings, reason="yearly", who="test")
    monkeypatch.undo()
    key = tmp_path / "signing_key.pem"
    assert staged_key_file(key).exists()
    with factory.open_ledger(settings, create=False) as ledger:
        current = ledger.signing_keys()[-1].key_id
    assert start(settings) == current  # the staged key put in place, not refused
    assert not staged_key_file(key).exists()


def test_keys_show_and_rotate_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = settings_in(tmp_path)
    old = start(settings)
    config = tmp_path / "privstream.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n')
    assert main(["keys", "rotate", "--config", str(config), "--reason", "yearly"]) == 0
    assert f"rotated the signing key {old} -> " in capsys.readouterr().err
    assert main(["keys", "show", "--config", str(config)]) == 0
    shown = capsys.readouterr().out
    assert KeySet.from_json(shown).key_ids[0] == old and len(rotation_statements(shown)) == 1
    assert main(["ledger", "show", "--config", str(config), "--json"]) == 0
    keys = json.loads(capsys.readouterr().out)["signing_keys"]
    assert keys[0]["key_id"] == old and keys[0]["retired_at"] is not None and keys[1]["retired_at"] is None
    # Rotating from a key that is not the deployment's current one: one line, exit 2.
    (tmp_path / "signing_key.pem").unlink()
    (tmp_path / "signing_key.pem").write_bytes(Signer.generate().private_pem())
    assert main(["keys", "rotate", "--config", str(config), "--reason", "again"]) == 2
    assert "is not the deployment's current key" in capsys.readouterr().err


def test_a_running_worker_whose_key_was_rotated_away_publishes_nothing_more(tmp_path: Path) -> None:
    from privstream.agents.interfaces import LeaseLostError
    from privstream.stream_app.signed_publisher import publisher
    from privstream.stream_app.signing import KeyRotatedError, KeyWatch

    settings = settings_in(tmp_path)
    stores = open_for_worker(settings)
    assert stores.signer is not None and stores.ledger is not None
    published: list[bytes] = []

    class Ingest:  # what the publisher needs of the ingest service
        async def publish(self, topic: str, key: bytes, value: bytes, headers: object, **_: object) -> None:
            published.append(value)

    watch = KeyWatch(stores.signer, stores.ledger)
    publish = publisher(Ingest(), settings, stores.signer, watch=watch)  # type: ignore[arg-type]
    try:
        watch.check()
        asyncio.run(publish("hypotheses", "s", b"release 1"))
        done = rotate(settings, reason="while the worker runs", who="test")
        watch.check()  # the worker's timer
        with pytest.raises(KeyRotatedError, match=f"replaced by {done.new_key_id}") as refused:
            asyncio.run(publish("hypotheses", "s", b"release 2"))
        # Left in the ledger's outbox, as a release whose partition another worker took is.
        assert isinstance(refused.value, LeaseLostError)
        assert published == [b"release 1"]
    finally:
        stores.ledger.close()
        stores.state.close()


def test_recover_replays_the_rotations_a_restored_ledger_backup_lacks(tmp_path: Path) -> None:
    import shutil
    import sqlite3

    from privstream.stream_app.cli.ledger import _replay_rotations

    settings = settings_in(tmp_path)
    old = start(settings)
    ledger_file = settings.resolved_ledger_path
    backup = tmp_path / "backup.sqlite3"
    with sqlite3.connect(ledger_file) as source, sqlite3.connect(backup) as target:
        source.backup(target)
    source.close()
    target.close()
    rotation = rotate(settings, reason="yearly", who="test")
    saved = tmp_path / "keys.json"
    saved.write_text(document(settings))  # the /keys document, as a subscriber or the operator saved it
    for suffix in ("-wal", "-shm"):
        Path(f"{ledger_file}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(backup, ledger_file)  # the backup from before the rotation restored
    # the worker, holding the new key, is refused by the restored ledger (its current key is the old)
    with pytest.raises(SigningKeyError, match="is not the deployment's"):
        start(settings)

    # a forged statement (signed by a key the ledger never recorded) adds nothing
    forged = RotationStatement.sign(Signer.generate(), Signer.generate(), "L", AT)
    bogus = tmp_path / "bogus.json"
    bogus.write_text(json.dumps({"keys": [], "rotations": [forged.to_dict()]}))
    assert _replay_rotations(settings, bogus, "restored") == []

    assert _replay_rotations(settings, saved, "restored the 03:00 backup") == [rotation.new_key_id]
    assert _replay_rotations(settings, saved, "again") == []  # nothing twice
    with factory.open_ledger(settings, create=False) as ledger:
        keys = ledger.signing_keys()
    assert [k.key_id for k in keys] == [old, rotation.new_key_id] and keys[0].retired_at is not None
    assert start(settings) == rotation.new_key_id  # the new key, no second rotation
