"""A fresh virtualenv with only ``pip install ./clients/python`` follows a live worker's stream.

The worker releases a two-level tree on the embedded broker; the subscriber, in a virtualenv that
holds the client and its three dependencies and nothing of the service, fetches the worker's keys,
verifies every release, keeps the best one (``level="best"``) and predicts with it; a forged
record on the topic is skipped.
"""

from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

import pytest

from privstream.learning.hypotheses import hypothesis_from_dict
from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.store.sqlite_ledger import SqliteLedger

from .conftest import run, start_worker, wait_until
from .test_live_releases import releasing_stream, stream_records
from .test_live_signed_releases import forgeries, write

pytestmark = [pytest.mark.live, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

SUBSCRIBER = """
import asyncio, json, sys
from privstream_client import subscribe

async def main():
    subscription = subscribe(sys.argv[1], bootstrap=sys.argv[2], topic_prefix=sys.argv[3],
                             keys_url=sys.argv[4], level="best", until_caught_up=True)
    best = [release async for release in subscription]
    release = best[-1]
    print(json.dumps({
        "levels": [r.level for r in best],
        "entry": release.ledger_entry_id,
        "predictions": release.predict(list(range(0, 4096, 64))).tolist(),
        "one": release.predict(100),
        "skipped": dict(subscription.skipped),
        "service": sorted(m for m in sys.modules if m.split(".")[0] in
                          {"privstream", "faust", "pydantic", "pydantic_settings", "psycopg"}),
    }))

asyncio.run(main())
"""


def fresh_client_venv(where: Path) -> Path:
    """A virtualenv with only the client installed from the checkout (and its dependencies)."""
    venv.EnvBuilder(with_pip=True).create(where)
    python = where / "bin" / "python"
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(ROOT / "clients" / "python"),
        ],
        check=True,
        timeout=600,
    )
    return python


def test_a_fresh_venv_with_only_the_client_subscribes_verifies_and_predicts(unique_settings, tmp_path):
    python = fresh_client_venv(tmp_path / "client-venv")
    listed = subprocess.run([python, "-m", "pip", "list", "--format=json"], capture_output=True, check=True)
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "privstream-client" in installed and "privstream" not in installed
    assert not installed & {"faust-streaming", "pydantic", "psycopg", "pydantic-settings"}

    settings = unique_settings.model_copy(
        update={"streams": [releasing_stream("s", 500, 0.5, 1.0, levels=1)], "ledger_create_if_missing": True}
    )
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    try:
        _, records = stream_records("s", 1000, seed=7)
        run(produce_json(settings, settings.topic("examples"), records))
        budget_url = f"{worker.public_url}/streams/s/budget"
        wait_until(lambda: (fetch_json(budget_url) or {}).get("releases") == 3, 120, what="3 releases")
        real = [json.loads(c.release) for c in SqliteLedger.open(settings.resolved_ledger_path).entries("s")]
        run(write(settings, [(fakes, []) for fakes in forgeries(real[0])[:1]]))  # unsigned: skipped

        out = subprocess.run(
            [
                python,
                "-c",
                SUBSCRIBER,
                "s",
                settings.kafka_bootstrap,
                settings.topic_prefix,
                f"{worker.public_url}/keys",
            ],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=tmp_path,
        )
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)
        top = [r for r in real if r["certificate"]["level"] == 1][-1]
        assert got["levels"][-1] == 1 and got["entry"] == top["certificate"]["ledger_entry_id"]
        expected = hypothesis_from_dict(top["hypothesis"])
        assert got["predictions"] == [expected.predict(x) for x in range(0, 4096, 64)]
        assert got["one"] == expected.predict(100)
        assert got["skipped"] == {"unsigned": 1} and got["service"] == []

        # The client's command prints the same releases for a person, the hypothesis in words.
        cli = subprocess.run(
            [
                python.parent / "privstream-subscribe",
                "s",
                "--bootstrap",
                settings.kafka_bootstrap,
                "--topic-prefix",
                settings.topic_prefix,
                "--keys-url",
                f"{worker.public_url}/keys",
                "--level",
                "all",
                "--until-caught-up",
            ],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=tmp_path,
        )
        assert cli.returncode == 0, cli.stderr
        lines = cli.stdout.splitlines()
        assert len(lines) == len(real) and all(" of s (level " in line for line in lines)
        assert all(": predicts " in line and "kind" not in line for line in lines), lines
        assert f"{len(real)} releases; 1 records skipped" in cli.stderr
    finally:
        assert worker.stop() == 0
