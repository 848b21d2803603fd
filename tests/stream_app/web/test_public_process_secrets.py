"""The public listener's process holds no secret: no operator token, signing key or password in its
environment or arguments, no key to sign with; it serves the signatures the worker stored, and
they verify.

Before: the child got every setting through ``Settings.to_env`` (the operator token, the signing
key PEM, the passwords in ``/proc/PID/environ``) and re-signed each response with the private key.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from pydantic import SecretStr

from privstream.agents.ledger_port import NodeRange
from privstream.stream_app.embedded.broker import free_listener_ports, free_port
from privstream.stream_app.settings import Settings, StreamConfig
from privstream.stream_app.signing import KEY_ID_HEADER, SIGNATURE_HEADER, KeySet, Signer
from privstream.stream_app.store.signatures import ReleaseSignatures
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.web import public_process
from privstream.stream_app.web.listener import HttpListener
from privstream.stream_app.web.public import public_routes

STREAMS = [
    StreamConfig(
        name="clicks", hypothesis_class="thresholds:16", release={"epsilon": 1.0, "epsilon_budget": 3.0}
    )
]
TOKEN = "operator-token-" + "x" * 24
PASSWORD = "a-postgres-password-9f3c"


def release(w: int) -> bytes:
    certificate = {"epsilon": 1.0, "delta": 0.0, "ledger_entry_id": f"clicks/w{w}/learner:generic"}
    return json.dumps({"stream_id": "clicks", "hypothesis": {"w": w}, "certificate": certificate}).encode()


def fetch(url: str) -> tuple[int, bytes, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def publish(ledger: SqliteLedger, w: int) -> bytes:
    reservation = ledger.reserve("clicks", f"w{w}", "learner:generic", 1.0, 0.0, NodeRange.of(0, w))
    body = release(w)
    ledger.mark_published(ledger.complete(reservation.entry_id, body).entry_id)
    return body


def proc(pid: int, name: str) -> bytes:
    return Path(f"/proc/{pid}/{name}").read_bytes()


@pytest.mark.live  # starts the public listener's process (a server)
async def test_the_public_listener_process_gets_no_secret_and_serves_the_workers_signatures(tmp_path) -> None:
    signer = Signer.generate()
    settings = Settings(
        kafka_bootstrap="127.0.0.1:1",
        data_dir=tmp_path,
        streams=STREAMS,
        ledger_create_if_missing=True,
        operator_token=SecretStr(TOKEN),
        signing_key=SecretStr(signer.private_pem().decode()),
        store_password=SecretStr(PASSWORD),
        _env_file=None,
        **free_listener_ports(),
    )
    ledger = SqliteLedger.open(
        settings.resolved_ledger_path, create_if_missing=True, budgets={"clicks": (3.0, 0.0)}
    )
    first = publish(ledger, 0)  # published before the worker started: signed at its start
    signatures = ReleaseSignatures(tmp_path / "release_signatures.sqlite3")
    service = public_process.PublicListenerProcess(settings, signer=signer, signatures=signatures)
    await service.start()
    base = f"http://127.0.0.1:{settings.public_port}"
    try:
        child = service.process
        assert child is not None
        held = proc(child.pid, "environ") + proc(child.pid, "cmdline")
        secrets = [TOKEN, PASSWORD, signer.private_pem().decode().splitlines()[1], "PRIVATE KEY"]
        assert [s for s in secrets if s.encode() in held] == []
        assert b"PRIVSTREAM_SIGNING_KEY" not in held and b"PRIVSTREAM_OPERATOR_TOKEN" not in held
        # the child never had a key: it has not read one (no key file, none in its environment)
        assert not (tmp_path / "signing_key.pem").exists()

        status, body, _ = await asyncio.to_thread(fetch, f"{base}/keys")
        keys = KeySet.from_json(body)
        assert status == 200 and keys.key_ids == [signer.key_id]
        status, body, headers = await asyncio.to_thread(fetch, f"{base}/streams/clicks/releases/latest")
        assert status == 200 and body == first
        assert keys.problem(body, headers[KEY_ID_HEADER], headers[SIGNATURE_HEADER]) is None

        # published by another worker of the deployment: the worker's sweep signs it within seconds
        later = await asyncio.to_thread(publish, ledger, 1)
        for _ in range(100):
            await asyncio.sleep(0.2)
            status, body, headers = await asyncio.to_thread(fetch, f"{base}/streams/clicks/releases/best")
            if status == 200 and body == later:
                break
        assert status == 200 and body == later
        assert keys.problem(body, headers[KEY_ID_HEADER], headers[SIGNATURE_HEADER]) is None
    finally:
        await service.stop()
        ledger.close()


async def test_a_release_whose_signature_is_not_stored_yet_is_503_not_unsigned(tmp_path) -> None:
    signer = Signer.generate()
    ledger = SqliteLedger.open(
        tmp_path / "ledger.sqlite3", create_if_missing=True, budgets={"clicks": (3.0, 0.0)}
    )
    signatures = ReleaseSignatures(tmp_path / "release_signatures.sqlite3")
    signatures.put_keys(KeySet([signer.public_entry()]))
    reader = ReleaseSignatures(tmp_path / "release_signatures.sqlite3", readonly=True)
    routes = public_routes(STREAMS, ledger, signatures=reader, published_keys=reader.keys())
    listener = HttpListener("public", "127.0.0.1", free_port(), routes)
    await listener.start()
    base = f"http://127.0.0.1:{listener.port}"
    try:
        body = publish(ledger, 0)
        status, _, headers = await asyncio.to_thread(fetch, f"{base}/streams/clicks/releases/latest")
        assert status == 503 and headers.get("Retry-After") == "5" and KEY_ID_HEADER not in headers
        signatures.put(body, *signer.sign(body))
        await asyncio.sleep(1.1)  # the read cache
        status, served, headers = await asyncio.to_thread(fetch, f"{base}/streams/clicks/releases/latest")
        keys = KeySet.from_json((await asyncio.to_thread(fetch, f"{base}/keys"))[1])
        assert status == 200 and served == body and keys.key_ids == [signer.key_id]
        assert keys.problem(served, headers[KEY_ID_HEADER], headers[SIGNATURE_HEADER]) is None
    finally:
        await listener.stop()
        ledger.close()


def test_the_child_gets_an_inline_password_on_stdin_and_nothing_else_secret() -> None:
    settings = Settings(
        operator_token=SecretStr(TOKEN),
        store_password=SecretStr(PASSWORD),
        kafka_sasl_password=SecretStr("sasl-secret"),
        signing_key_file=Path("/run/secrets/key.pem"),
        _env_file=None,
    )
    env, stdin = public_process.child_environment(settings)
    flat = json.dumps(env)
    assert TOKEN not in flat and PASSWORD not in flat and "sasl-secret" not in flat and "key.pem" not in flat
    assert json.loads(stdin) == {"store_password": PASSWORD}
    assert Settings(**json.loads(stdin), _env_file=None).store_password_value() == PASSWORD


def test_the_child_of_a_worker_on_sasl_kafka_loads_its_settings(monkeypatch) -> None:
    # The child never talks to Kafka: it gets no SASL setting, and its settings load without them.
    settings = Settings(
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_mechanism="SCRAM-SHA-256",
        kafka_sasl_username="privstream",
        kafka_sasl_password=SecretStr("sasl-secret"),
        _env_file=None,
    )
    env, stdin = public_process.child_environment(settings)
    assert not [name for name in env if "SASL" in name or "SECURITY_PROTOCOL" in name]
    for name in [name for name in os.environ if name.startswith("PRIVSTREAM_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert Settings(**json.loads(stdin), _env_file=None).kafka_security_protocol == "PLAINTEXT"


def test_a_pgpassword_of_the_worker_goes_to_the_child_on_stdin(monkeypatch) -> None:
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    env, stdin = public_process.child_environment(Settings(_env_file=None))
    assert PASSWORD not in json.dumps(env) and json.loads(stdin) == {"store_password": PASSWORD}


@pytest.mark.parametrize("name", public_process.WITHHELD)
def test_every_withheld_setting_exists(name: str) -> None:
    assert name in Settings.model_fields
