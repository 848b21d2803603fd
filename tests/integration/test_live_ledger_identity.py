"""A live worker on the embedded broker and a ledger that knows itself.

One worker serves the checks (lean: one start, two refused starts):

* a second worker with another privacy configuration on the same ledger refuses to start: one
  line on stderr naming the command that accepts it, exit status 2, the first worker's budget
  untouched;
* the releases' certificates name the ledger and its epoch;
* the ledger file deleted under the running worker: ``/readyz`` fails with the reason, logged once;
* a restart with ``ledger_create_if_missing`` still set refuses (one line, exit 2) instead of
  starting a fresh ledger over the recorded history.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import urllib.error
import urllib.request

import pytest

from privstream.stream_app.embedded.broker import free_listener_ports
from privstream.stream_app.embedded.demo import WorkerProcess, fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.signing import KeySet, Signer

from .conftest import run, start_worker, wait_until

pytestmark = pytest.mark.live


def settings_with(base: Settings, budget: float) -> Settings:
    stream = StreamConfig(
        name="s",
        hypothesis_class="thresholds:64",
        release=ReleaseConfig(window=WindowConfig(size=10), epsilon=0.5, epsilon_budget=budget),
    )
    return base.model_copy(update={"streams": [stream], "ledger_create_if_missing": True})


def probe(url: str) -> tuple[int, dict]:
    """A probe's status and JSON body (a 503 has one too)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def ledger_row(settings: Settings, query: str) -> tuple:
    """One row of the worker's ledger file, read-only (the worker keeps it open)."""
    with sqlite3.connect(f"{settings.resolved_ledger_path.as_uri()}?mode=ro", uri=True) as raw:
        row = raw.execute(query).fetchone()
    raw.close()
    return row


def refused_start(settings: Settings, log_path, *, new_state: bool = False) -> str:
    """Start a worker that must refuse: its exit status 2 and its one line of output (besides,
    with ``new_state``, the INFO lines of its new state store's creation)."""
    worker = WorkerProcess(settings, log_path).start()
    assert worker.process is not None
    try:
        status = worker.process.wait(90)
    except subprocess.TimeoutExpired:
        worker.stop()
        raise AssertionError(
            "the worker started instead of refusing:\n" + log_path.read_text()[-2000:]
        ) from None
    output = log_path.read_text()
    assert status == 2, output
    assert "Traceback" not in output
    [line] = [line for line in output.splitlines() if line.strip() and not (new_state and " INFO " in line)]
    assert line.startswith("privstream worker: error: ")
    return line


def test_a_ledger_that_knows_itself_refuses_what_would_reset_the_budget(unique_settings, tmp_path):
    settings = settings_with(unique_settings, budget=10.0)
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    try:
        ready = f"{worker.operator_url}/readyz"
        wait_until(lambda: fetch_json(ready) == {"status": "ready", "reason": "ok"}, 120, what="ready")

        # Another worker, another budget, the same ledger: it refuses and changes nothing.
        other = settings_with(unique_settings, budget=100.0).model_copy(update=free_listener_ports())
        line = refused_start(other, tmp_path / "other.log", new_state=True)
        assert "stream 's'" in line and "privstream ledger accept-config --stream s" in line
        assert "epsilon_budget 10.0 -> 100.0" in line
        assert ledger_row(settings, "SELECT epsilon_budget FROM streams") == ("10",)

        # Releases name the ledger and its epoch.
        examples = [("s", {"stream_id": "s", "x": i % 64, "y": int(i % 64 >= 20)}) for i in range(20)]
        run(produce_json(settings, settings.topic("examples"), examples))
        wait_until(
            lambda: (fetch_json(f"{worker.public_url}/streams/s/budget") or {}).get("releases") == 2,
            120,
            what="two releases",
        )
        ledger_id, epoch = ledger_row(settings, "SELECT ledger_id, epoch FROM identity")
        latest = fetch_json(f"{worker.public_url}/streams/s/releases/latest")
        assert latest is not None
        assert (latest["certificate"]["ledger_id"], latest["certificate"]["ledger_epoch"]) == (
            ledger_id,
            epoch,
        )

        # The ledger deleted under the running worker: out of service, with the reason, logged once.
        for path in settings.resolved_ledger_path.parent.glob(settings.resolved_ledger_path.name + "*"):
            path.unlink()
        _, answer = wait_until(lambda: (lambda r: r if r[0] == 503 else None)(probe(ready)), 30, what="a 503")
        assert "the privacy ledger" in answer["reason"] and "is gone" in answer["reason"]
        wait_until(lambda: "not ready: the privacy ledger" in worker.log_path.read_text(), 10, what="the log")
        assert worker.log_path.read_text().count("not ready: the privacy ledger") == 1
    finally:
        assert worker.stop() == 0

    # A restart does not create a fresh ledger over the recorded history.
    line = refused_start(settings, tmp_path / "restart.log")
    assert "the privacy ledger is missing" in line and f"holds the history of ledger {ledger_id}" in line
    assert "PRIVSTREAM_LEDGER_PATH" in line and "privstream ledger adopt" in line
    assert not settings.resolved_ledger_path.exists()


def test_one_signing_key_per_deployment(unique_settings, tmp_path):
    # The default key file, made with the new ledger, which records it.
    settings = settings_with(unique_settings, budget=10.0).model_copy(update={"signing_key_file": None})
    run(ensure_topics(settings))
    key = settings.data_dir / "signing_key.pem"
    worker = start_worker(settings, tmp_path)
    try:
        deployment = Signer.from_pem(key.read_bytes()).key_id
        with urllib.request.urlopen(f"{worker.public_url}/keys", timeout=10) as response:
            assert KeySet.from_json(response.read()).key_ids == [deployment]
        assert ledger_row(settings, "SELECT key_id FROM signing_keys") == (deployment,)

        # A second worker of the deployment with the default key path of its own data folder: it
        # would have made a key of its own; it refuses, naming the deployment's key.
        other_dir = tmp_path / "other"
        shared_ledger = {"ledger_path": settings.resolved_ledger_path}
        other = settings.model_copy(update={"data_dir": other_dir, **shared_ledger, **free_listener_ports()})
        line = refused_start(other, tmp_path / "other.log", new_state=True)
        assert f"the signing key {other_dir / 'signing_key.pem'} is missing" in line
        assert f"signs with key {deployment}" in line
        assert not (other_dir / "signing_key.pem").exists()
        # With a key of its own: refused too, naming both.
        own = Signer.generate()
        (other_dir / "signing_key.pem").write_bytes(own.private_pem())
        line = refused_start(other, tmp_path / "other-own.log")
        assert f"this worker's signing key {own.key_id}" in line and f"records key {deployment}" in line
    finally:
        assert worker.stop() == 0

    # The key file deleted: the restart refuses instead of signing with a new key.
    key.unlink()
    line = refused_start(settings, tmp_path / "restart.log")
    assert f"the signing key {key} is missing" in line and f"signs with key {deployment}" in line
    assert not key.exists()
