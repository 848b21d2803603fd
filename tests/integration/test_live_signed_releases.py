"""Signed releases on a real broker: a worker's real releases with a garbage record and forged
releases around them on the public topic; the SDK and the CLI yield only the real ones, count the
rest, and ``level="best"`` follows the real tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import pytest

from privstream.learning.hypothesis_classes import threshold_hypothesis
from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.sdk import subscribe
from privstream.stream_app.signing import KEY_ID_HEADER, SIGNATURE_HEADER, KeySet, Signer
from privstream.stream_app.store.sqlite_ledger import SqliteLedger

from .conftest import consume_all, run, start_worker, wait_until
from .test_live_releases import releasing_stream, stream_records

pytestmark = pytest.mark.live

GARBAGE = b"\x00not a release"


def forgeries(real: dict) -> list[bytes]:
    """Releases nobody's worker made, shaped after a real one: a level-20 node of a constant
    hypothesis, one claiming the real release's entry id, and ε far over the budget."""
    constant = threshold_hypothesis(4096, 0).to_dict()
    top = json.loads(json.dumps(real))
    top["hypothesis"] = constant
    top["certificate"].update(level=20, window={**top["certificate"]["window"], "last_window": 10**6})
    same_entry = json.loads(json.dumps(real))
    same_entry["hypothesis"] = constant
    greedy = json.loads(json.dumps(real))
    greedy["certificate"]["epsilon"] = 1000.0
    return [json.dumps(f).encode() for f in (top, same_entry, greedy)]


async def write(settings, values: list[tuple[bytes, list[tuple[str, bytes]]]]) -> None:
    """Put records on the public topic, as anyone allowed to write there could."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap)
    await producer.start()
    try:
        for value, headers in values:
            await producer.send_and_wait(settings.topic("hypotheses"), value, key=b"s", headers=headers)
    finally:
        await producer.stop()


async def read(settings, keys_url: str, level) -> tuple[list, object]:
    subscription = subscribe("s", settings=settings, level=level, keys_url=keys_url, until_caught_up=True)
    return [r async for r in subscription], subscription


def test_forged_and_garbage_records_are_skipped_by_the_sdk_and_the_cli(unique_settings, tmp_path):
    settings = unique_settings.model_copy(
        update={"streams": [releasing_stream("s", 500, 0.5, 1.0, levels=1)], "ledger_create_if_missing": True}
    )
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    keys_url = f"{worker.public_url}/keys"
    budget_url = f"{worker.public_url}/streams/s/budget"
    try:
        _, records = stream_records("s", 2000, seed=4)
        run(write(settings, [(GARBAGE, [])]))  # before any release: every subscriber meets it first
        run(produce_json(settings, settings.topic("examples"), records[:1000]))
        wait_until(lambda: (fetch_json(budget_url) or {}).get("releases") == 3, 120, what="3 releases")
        first = json.loads(run(consume_all(settings, settings.topic("hypotheses"), 4))[1].value)
        rogue = Signer.generate()
        fakes = forgeries(first)
        run(write(settings, [(f, []) for f in fakes] + [(fakes[0], rogue.headers(fakes[0]))]))
        run(write(settings, [(GARBAGE, rogue.headers(GARBAGE))]))
        run(produce_json(settings, settings.topic("examples"), records[1000:]))
        wait_until(lambda: (fetch_json(budget_url) or {}).get("releases") == 6, 120, what="6 releases")

        ledger = SqliteLedger.open(settings.resolved_ledger_path)
        real = [c.release for c in ledger.entries("s")]
        on_topic = run(consume_all(settings, settings.topic("hypotheses"), 6 + 6))
        with urllib.request.urlopen(keys_url) as response:
            keys = KeySet.from_json(response.read())
        signed = [r for r in on_topic if keys.header_problem(r.value, r.headers) is None]
        assert [r.value for r in signed] == real  # the worker signed exactly the ledger's bytes
        assert {dict(r.headers)[KEY_ID_HEADER].decode() for r in signed} == set(keys.key_ids)

        releases, subscription = run(read(settings, keys_url, "all"))
        assert [r.to_json().encode() for r in releases] == real
        assert subscription.caught_up
        assert subscription.skipped == {"unsigned": 4, "unknown_key": 2}
        best, _ = run(read(settings, keys_url, "best"))
        top = [json.loads(b) for b in real if json.loads(b)["certificate"]["level"] == 1][-1]
        assert best[-1].hypothesis_dict == top["hypothesis"]
        assert best[-1].ledger_entry_id == top["certificate"]["ledger_entry_id"]  # not frozen by a fake

        env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
        env.update(
            PRIVSTREAM_KAFKA_BOOTSTRAP=settings.kafka_bootstrap,
            PRIVSTREAM_TOPIC_PREFIX=settings.topic_prefix,
            PRIVSTREAM_KEYS_URL=keys_url,
        )
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "privstream",
                "subscribe",
                "s",
                "--level",
                "all",
                "--until-caught-up",
                "--json",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert cli.returncode == 0, cli.stderr
        assert [json.loads(line) for line in cli.stdout.splitlines()] == [json.loads(b) for b in real]
        assert "caught up: 6 releases; 6 records skipped (2 unknown_key, 4 unsigned)" in cli.stderr

        latest = fetch_json(f"{worker.public_url}/streams/s/releases/latest")
        assert (
            latest["certificate"]["ledger_entry_id"] == json.loads(real[-1])["certificate"]["ledger_entry_id"]
        )
        with urllib.request.urlopen(f"{worker.public_url}/streams/s/releases/latest") as response:
            body, headers = response.read(), response.headers
        assert keys.problem(body, headers[KEY_ID_HEADER], headers[SIGNATURE_HEADER]) is None
    finally:
        assert worker.stop() == 0
