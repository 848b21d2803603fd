"""A backup restored under a live deployment: the signed public log is the ledger's witness.

The documented procedure, end to end on the embedded broker, with SQLite files and with one
PostgreSQL database: a worker releases window 0, the ledger and the state store are backed up
online (SQLite's backup API; ``pg_dump -Fc``), more examples are released (L0-1, L0-2, L1-0),
the worker is killed, both stores are restored together from the backup (so they agree with each
other) and 25 unsigned junk records are written to the public topic. Then:

* the restart refuses, one line naming the three releases the ledger lacks (the junk switches
  nothing off);
* ``privstream ledger recover`` charges them from the verified public log;
* the worker starts, and nothing is released a second time: every public id on the topic has one
  content, and window 0's examples paid each level's ε once (lifetime ε 2, not 3).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from pydantic import SecretStr

from privstream.stream_app.embedded.broker import free_listener_ports
from privstream.stream_app.embedded.demo import WorkerProcess, fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.sources.synthetic import synthetic_examples
from privstream.stream_app.store.factory import open_ledger
from privstream.stream_app.store.sqlite_streams import state_files

from .conftest import consume_all, run, start_worker, wait_until

pytestmark = [pytest.mark.live, pytest.mark.slow]

CLASS = "thresholds:4096"
WINDOW = 200


def examples(n: int, seed: int) -> list:
    return [("s", m) for m in synthetic_examples(CLASS, n, seed=seed).messages("s")]


async def produce_raw(settings: Settings, topic: str, values: list[bytes]) -> None:
    """What anyone who can write to a public topic can do: records without a signature."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()


def sqlite_copy(source: Path, target: Path) -> None:
    """An online backup, or its restore (what ``sqlite3 FILE ".backup TARGET"`` does)."""
    for suffix in ("-wal", "-shm", "-journal"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


class Backup:
    """Back up and restore a deployment's ledger and state store together."""

    def __init__(self, settings: Settings, where: Path, pg=None) -> None:
        self.settings, self.where, self.pg = settings, where, pg

    def _pg(self, tool: str, *args: str) -> None:
        assert self.pg is not None and self.settings.store_url is not None
        binary = (self.pg._bindir / tool) if (self.pg._bindir / tool).exists() else shutil.which(tool)
        env = {**os.environ, "PGPASSWORD": self.pg.password}  # never in the arguments
        url = self.settings.store_url
        subprocess.run([str(binary), *args, f"--dbname={url}"], check=True, env=env, capture_output=True)

    def take(self) -> None:
        if self.pg is None:
            sqlite_copy(self.settings.resolved_ledger_path, self.where / "ledger.backup")
            (self.where / "state.backup").mkdir(exist_ok=True)
            for path in state_files(self.settings.resolved_state_path):  # the main file and each stream's
                sqlite_copy(path, self.where / "state.backup" / path.name)
        else:
            self._pg("pg_dump", "-Fc", f"--file={self.where / 'store.dump'}")

    def restore(self) -> None:
        if self.pg is None:
            sqlite_copy(self.where / "ledger.backup", self.settings.resolved_ledger_path)
            for path in state_files(self.settings.resolved_state_path):
                sqlite_copy(self.where / "state.backup" / path.name, path)
        else:
            self._pg(
                "pg_restore", "--clean", "--if-exists", "--single-transaction", str(self.where / "store.dump")
            )


def refused_start(settings: Settings, log_path: Path) -> str:
    worker = WorkerProcess(settings, log_path).start()
    assert worker.process is not None
    try:
        status = worker.process.wait(120)
    except subprocess.TimeoutExpired:
        worker.stop()
        raise AssertionError(
            "the worker started on the restored backup:\n" + log_path.read_text()[-3000:]
        ) from None
    output = log_path.read_text()
    assert status == 2, output
    assert "Traceback" not in output
    [line] = [line for line in output.splitlines() if line.startswith("privstream worker: error: ")]
    return line


def privstream(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
    env.update(settings.to_env())
    return subprocess.run(
        [sys.executable, "-m", "privstream", *args], env=env, capture_output=True, text=True, timeout=120
    )


def contents_by_id(records) -> dict[str, set[bytes]]:
    found: dict[str, set[bytes]] = defaultdict(set)
    for record in records:
        try:
            entry = json.loads(record.value)["certificate"]["ledger_entry_id"]
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(entry, str) and "/" in entry:
            found[entry].add(record.value)
    return found


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_a_restored_backup_is_refused_then_recovered_without_a_second_charge(
    unique_settings, tmp_path, store, request
):
    update: dict = {}
    pg = None
    if store == "postgresql":
        pg = request.getfixturevalue("pg_server")
        update = {
            "store_url": request.getfixturevalue("pg_database"),
            "store_password": SecretStr(pg.password),
        }
    stream = StreamConfig(
        name="s",
        hypothesis_class=CLASS,
        release=ReleaseConfig(window=WindowConfig(size=WINDOW), epsilon=1.0, epsilon_budget=2.0, top_level=1),
    )
    settings = unique_settings.model_copy(
        update={"streams": [stream], "ledger_create_if_missing": True, "topic_partitions": 1, **update}
    )
    backup = Backup(settings, tmp_path, pg)
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    budget = f"{worker.public_url}/streams/s/budget"
    try:
        run(produce_json(settings, settings.topic("examples"), examples(WINDOW, seed=1)))
        wait_until(lambda: (fetch_json(budget) or {}).get("releases") == 1, 120, what="window 0 released")
        backup.take()
        run(produce_json(settings, settings.topic("examples"), examples(2 * WINDOW, seed=2)))
        wait_until(
            lambda: (fetch_json(budget) or {}).get("releases") == 4, 180, what="L0-1, L0-2, L1-0 released"
        )
    finally:
        assert worker.process is not None
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait(10)
    backup.restore()
    junk = [b'{"certificate": {"ledger_id": "' + b"f" * 32 + b'", "ledger_epoch": 4611686018427387904}}'] * 25
    run(produce_raw(settings, settings.topic("hypotheses"), junk))

    settings = settings.model_copy(update={"ledger_create_if_missing": False})
    line = refused_start(settings, tmp_path / "refused.log")
    assert "lacks the charges of 3 signed releases on the public topics" in line, line
    for node in ("c200-L0-1", "c200-L0-2", "c200-L1-0"):
        assert node in line, line
    assert "privstream ledger recover" in line

    recovered = privstream(settings, "ledger", "recover", "--reason", "restored the 03:00 backup")
    assert recovered.returncode == 0, recovered.stderr
    assert "charged 3 releases of the verified public log" in recovered.stderr
    assert "ignored 25 records on the public topics" in recovered.stderr

    restarted = start_worker(settings.model_copy(update=free_listener_ports()), tmp_path)
    try:
        ready = f"{restarted.operator_url}/readyz"
        wait_until(lambda: fetch_json(ready) == {"status": "ready", "reason": "ok"}, 120, what="ready")
        # the next window is released as usual; nothing before it a second time
        run(produce_json(settings, settings.topic("examples"), examples(WINDOW, seed=3)))
        ledger = open_ledger(settings)
        wait_until(lambda: len(ledger.entries("s")) >= 5, 180, what="window 3 released")
        wait_until(lambda: ledger.unpublished("s") == [], 60, what="published")
        records = run(consume_all(settings, settings.topic("hypotheses"), 25 + 5))
        by_id = contents_by_id(records)
        assert {i: len(c) for i, c in by_id.items() if len(c) > 1} == {}  # one content per public id
        entries = {c.public_id: c.release for c in ledger.entries("s")}
        assert {i: next(iter(c)) for i, c in by_id.items()} == {i: entries[i] for i in by_id}
        assert len(entries) == len(by_id) == 5, sorted(entries)
        assert ledger.spent("s").epsilon == pytest.approx(2.0)  # L0 + L1 once per example, not 3
        ledger.close()
    finally:
        assert restarted.stop() == 0
