"""The public listener's ``/keys`` document: the deployment's ledger id, signed; read again after a
key rotation, without a restart."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path

from privstream_client.signing import deployment_ledger_id, rotation_statements

from privstream.stream_app.embedded.broker import free_listener_ports
from privstream.stream_app.key_rotation import record_rotation
from privstream.stream_app.settings import Settings, StreamConfig
from privstream.stream_app.signing import KeySet, Signer, raw_public_key
from privstream.stream_app.store.signatures import ReleaseSignatures
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.web import public_process
from privstream.stream_app.web.public_process import SUPERVISE_SECONDS

STREAMS = [
    StreamConfig(
        name="clicks", hypothesis_class="thresholds:16", release={"epsilon": 1.0, "epsilon_budget": 3.0}
    )
]


def fetch_keys(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return dict(json.loads(response.read()))


async def test_the_listener_serves_the_rotated_key_set_without_a_restart(tmp_path: Path) -> None:
    old, new = Signer.generate(), Signer.generate()
    settings = Settings(
        kafka_bootstrap="127.0.0.1:1",
        data_dir=tmp_path,
        streams=STREAMS,
        ledger_create_if_missing=True,
        _env_file=None,
        **free_listener_ports(),
    )
    ledger = SqliteLedger.open(
        settings.resolved_ledger_path, create_if_missing=True, budgets={"clicks": (3.0, 0.0)}
    )
    ledger.record_first_key(old.key_id, raw_public_key(old), who="test")
    signatures = ReleaseSignatures(tmp_path / "release_signatures.sqlite3")
    service = public_process.PublicListenerProcess(settings, signer=old, signatures=signatures)
    await service.start()
    url = f"http://127.0.0.1:{settings.public_port}/keys"
    try:
        child = service.process
        before = await asyncio.to_thread(fetch_keys, url)
        assert KeySet.from_json(json.dumps(before)).key_ids == [old.key_id]
        # the deployment's ledger id, signed by its key: a subscriber given none trusts no release for it
        assert deployment_ledger_id(json.dumps(before), KeySet([old.public_entry()])) == ledger.ledger_id
        assert deployment_ledger_id(json.dumps(before), KeySet([new.public_entry()])) is None

        await asyncio.to_thread(record_rotation, ledger, old, new, who="test", reason="scheduled")
        document = before
        for _ in range(int(4 * SUPERVISE_SECONDS / 0.25)):  # the worker rereads the ledger's keys
            await asyncio.sleep(0.25)
            document = await asyncio.to_thread(fetch_keys, url)
            if document != before:
                break
        assert service.process is child and child is not None and child.poll() is None  # not restarted
        statements = rotation_statements(json.dumps(document))
        assert [(s.old_key_id, s.new_key.key_id) for s in statements] == [(old.key_id, new.key_id)]
        # a subscriber that pinned the old key follows the statement to the new one
        assert KeySet([old.public_entry()]).following(statements).key_ids == [old.key_id, new.key_id]
    finally:
        await service.stop()
        ledger.close()
