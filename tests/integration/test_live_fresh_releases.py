"""Fresh releases only, on a real broker with a real worker: a verbatim replay of a real release and
another deployment's release signed with the same key, put on the public topic, are refused by the
CLI (also after its restart, through ``--state-file``) and do not freeze ``level="best"``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.sdk import subscribe
from privstream.stream_app.signing import Signer

from .conftest import consume_all, run, start_worker, wait_until
from .test_live_releases import releasing_stream, stream_records
from .test_live_signed_releases import write

pytestmark = pytest.mark.live

FOREIGN = "f" * 16


def cli(settings, keys_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
    env.update(
        PRIVSTREAM_KAFKA_BOOTSTRAP=settings.kafka_bootstrap,
        PRIVSTREAM_TOPIC_PREFIX=settings.topic_prefix,
        PRIVSTREAM_KEYS_URL=keys_url,
    )
    command = [sys.executable, "-m", "privstream", "subscribe", "s", "--until-caught-up", "--json", *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def windows(out: str) -> list[tuple[int, int]]:
    certificates = [json.loads(line)["certificate"] for line in out.splitlines()]
    return [(c["level"], c["window"]["last_window"]) for c in certificates]


def test_a_replay_and_a_foreign_release_are_refused_and_best_is_not_frozen(unique_settings, tmp_path):
    settings = unique_settings.model_copy(
        update={"streams": [releasing_stream("s", 500, 0.5, 1.0, levels=1)], "ledger_create_if_missing": True}
    )
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    keys_url = f"{worker.public_url}/keys"
    budget_url = f"{worker.public_url}/streams/s/budget"
    state = tmp_path / "subscriber.state"
    try:
        _, records = stream_records("s", 2000, seed=5)
        run(produce_json(settings, settings.topic("examples"), records[:1000]))
        wait_until(lambda: (fetch_json(budget_url) or {}).get("releases") == 3, 120, what="3 releases")
        first = cli(settings, keys_url, "--state-file", str(state))
        assert windows(first.stdout) == [(0, 0), (0, 1), (1, 1)]

        real = run(consume_all(settings, settings.topic("hypotheses"), 3))
        window_0 = next(r for r in real if json.loads(r.value)["certificate"]["level"] == 0)
        top = json.loads(next(r for r in real if json.loads(r.value)["certificate"]["level"] == 1).value)
        top["certificate"].update(
            ledger_id=FOREIGN, window={**top["certificate"]["window"], "last_window": 99}
        )
        key_file = settings.signing_key_file or settings.data_dir / "signing_key.pem"
        shared = Signer.from_pem(key_file.read_bytes())  # staging signing with production's key
        foreign = json.dumps(top, separators=(",", ":")).encode()
        run(write(settings, [(window_0.value, list(window_0.headers)), (foreign, shared.headers(foreign))]))

        # restarted with its state file: nothing new yielded, both refused and counted
        again = cli(settings, keys_url, "--state-file", str(state))
        assert again.stdout == ""
        assert "0 releases; 2 records skipped (1 foreign_deployment, 1 stale)" in again.stderr

        # the deployment's next releases still come through "best" (before: the foreign level-1
        # node "99" froze it, and window 0's replay was yielded to a subscriber holding window 1)
        run(produce_json(settings, settings.topic("examples"), records[1000:]))
        wait_until(lambda: (fetch_json(budget_url) or {}).get("releases") == 6, 120, what="6 releases")

        async def best() -> tuple[list, object]:
            subscription = subscribe("s", settings=settings, keys_url=keys_url, until_caught_up=True)
            return [r async for r in subscription], subscription

        got, subscription = run(best())
        assert [(r.level, r.last_window) for r in got][-1] == (1, 3)
        assert all(r.certificate.ledger_id != FOREIGN for r in got)
        assert subscription.skipped == {"foreign_deployment": 1}  # the replay: the same bytes, once
        last = cli(settings, keys_url, "--state-file", str(state))
        assert windows(last.stdout) == [(1, 3)]
    finally:
        assert worker.stop() == 0
