"""The privacy boundary, scanned on a live worker: nothing of the raw data leaves the trusted zone.

Canary examples (distinctive ``x`` values, distinctive user ids, one user contributing far more
than the contribution bound) are planted in a user-level stream. Then every byte of every message
on the public topics (``hypotheses``, ``sanitized``) and the whole ``/metrics`` text are searched
for them; every public message must parse as a release whose ledger entry holds the same bytes;
and no count the ledger did not pay for is published (for a user-level stream, how many examples
survive the per-user bound depends on the users' contributions: it is private).
"""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request

import numpy as np
import pytest

from privstream.schemas import SanitizedRelease
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.settings import ReleaseConfig, StreamConfig, WindowConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger

from .conftest import consume_all, run, start_worker, wait_until
from .test_live_releases import check_public_topic

pytestmark = pytest.mark.live

DOMAIN = 2**32
CLASS = f"thresholds:{DOMAIN}"
WINDOW = 1000
BOUND = 3  # each user's first 3 examples per window reach the learner
WINDOWS = 2


def canary_stream() -> tuple[list[dict], list[bytes]]:
    """Examples of a user-level stream with canaries planted; returns (examples, canary strings)."""
    rng = np.random.default_rng(11)
    tag = secrets.token_hex(4)
    canary_xs = [3_141_592_653, 2_718_281_828, 1_414_213_562, 1_732_050_807]  # distinctive digits
    canary_users = [f"canary-{tag}-alice", f"canary-{tag}-bob", f"canary-{tag}-\u00e9ve"]
    examples: list[dict] = []
    for i in range(WINDOWS * WINDOW):
        if i % 10 == 0:
            # The canaries: planted values, planted users; "alice" sends far more than the bound.
            x, user = canary_xs[(i // 10) % len(canary_xs)], canary_users[(i // 10) % len(canary_users)]
        else:
            x, user = int(rng.integers(0, DOMAIN)), f"u{int(rng.integers(0, 400))}"
        examples.append({"stream_id": "users", "x": x, "y": int(x >= DOMAIN // 2), "user_id": user})
    canaries = [str(x).encode() for x in canary_xs]
    canaries += [u.encode() for u in canary_users] + [json.dumps(u).encode() for u in canary_users]
    canaries.append(tag.encode())
    return examples, canaries


def test_public_topics_and_metrics_hold_no_raw_values_user_ids_or_uncharged_counts(unique_settings, tmp_path):
    # User level runs on the public clock: time windows of 2 s, closed whether or not
    # they hold examples; the release count depends on how long the worker ran, never on the data.
    settings = unique_settings.model_copy(
        update={
            "streams": [
                StreamConfig(
                    name="users",
                    hypothesis_class=CLASS,
                    release=ReleaseConfig(
                        window=WindowConfig(kind="time", seconds=2.0),
                        epsilon=1.0,
                        epsilon_budget=1000.0,
                        privacy_unit="user",
                        user_contribution_bound=BOUND,
                        expected_size=WINDOW,
                        sanitizer="mwem",
                    ),
                )
            ],
            "user_epsilon_budget": 1000.0,
            "ledger_create_if_missing": True,
        }
    )
    run(ensure_topics(settings))
    examples, canaries = canary_stream()
    worker = start_worker(settings, tmp_path)
    try:
        run(produce_json(settings, settings.topic("examples"), [("users", e) for e in examples]))
        ledger = SqliteLedger.open(settings.resolved_ledger_path)

        def handled() -> bool:
            status = json.loads(urllib.request.urlopen(f"{worker.operator_url}/status").read())
            return status["handled"] == len(examples) and len(ledger.entries("users")) >= 2 * WINDOWS

        wait_until(handled, 150, what="every example handled and a few windows released")
        metrics = urllib.request.urlopen(f"{worker.operator_url}/metrics").read()
        status = json.loads(urllib.request.urlopen(f"{worker.operator_url}/status").read())
        for operator_path in ("/metrics", "/status"):  # raw figures are not on the public listener
            with pytest.raises(urllib.error.HTTPError, match="404"):
                urllib.request.urlopen(f"{worker.public_url}{operator_path}")
    finally:
        assert worker.stop() == 0
    assert status["handled"] == len(examples) and status["invalid"] == 0  # the canaries were learned
    entries = ledger.entries("users")
    learned = [c for c in entries if c.mechanism.startswith("learner:") and c.published]
    synthetic = [c for c in entries if c.mechanism.startswith("sanitizer:") and c.published]
    hypotheses = run(consume_all(settings, settings.topic("hypotheses"), len(learned)))
    sanitized = run(consume_all(settings, settings.topic("sanitized"), len(synthetic)))

    # Every public message is a charged release, byte for byte as in the ledger.
    releases = check_public_topic(hypotheses, ledger)["users"]
    assert len(releases) == len(learned) >= WINDOWS
    charged = {c.public_id: c.release for c in entries}
    sanitized_entries = set()
    for record in sanitized:
        release = SanitizedRelease.model_validate_json(record.value)
        entry = release.certificate.ledger_entry_id
        assert entry is not None and charged[entry] == record.value
        sanitized_entries.add(entry)
    assert len(sanitized_entries) == len(synthetic)

    # No canary byte string anywhere: not in keys, values or headers, not in /metrics.
    for record in hypotheses + sanitized:
        blob = b"".join(
            [record.key or b"", record.value or b""] + [k.encode() + v for k, v in (record.headers or ())]
        )
        for canary in canaries:
            assert canary not in blob, f"canary {canary!r} on public topic {record.topic}"
    for canary in canaries:
        assert canary not in metrics, f"canary {canary!r} in /metrics"

    # No uncharged count: a user-level window's size after the per-user bound depends on how much
    # each user sent, so its certificate may state the window's public extent but not that count.
    for record in hypotheses + sanitized:
        certificate = json.loads(record.value)["certificate"]
        window = certificate["window"]
        assert certificate["privacy_unit"] == "user" and certificate["user_contribution_bound"] == BOUND
        assert window["kind"] == "time" and certificate["sample_size"] is None, certificate
        assert certificate["accuracy_guarantee_holds"] is None  # it would reveal n >= theorem n
