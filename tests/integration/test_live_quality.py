"""A live worker scores each release on the next window and a subscriber follows the estimates.

A two-level stream of count windows with ``quality_epsilon`` on the embedded broker: every
level-0 release carries the private error estimates of the releases that ended just before its
window, each charged to that window in the ledger; the SDK's ``level="most-accurate"``, reading
the signed topic, ends on the release whose newest estimate is the lowest.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.sdk import subscribe
from privstream.stream_app.settings import ReleaseConfig, StreamConfig, WindowConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger

from .conftest import run, start_worker, wait_until
from .test_live_releases import CLASS, stream_records

pytestmark = pytest.mark.live

WINDOW, EPSILON, QUALITY = 500, 0.5, 0.5


async def followed(settings, keys_url: str) -> list:
    subscription = subscribe(
        "s", settings=settings, level="most-accurate", keys_url=keys_url, until_caught_up=True
    )
    return [release async for release in subscription]


def test_most_accurate_follows_the_estimates_the_worker_publishes(unique_settings, tmp_path):
    stream = StreamConfig(
        name="s",
        hypothesis_class=CLASS,
        release=ReleaseConfig(
            window=WindowConfig(size=WINDOW),
            epsilon=EPSILON,
            top_level=1,
            quality_epsilon=QUALITY,
            epsilon_budget=2 * EPSILON + 2 * QUALITY,
        ),
    )
    settings = unique_settings.model_copy(update={"streams": [stream], "ledger_create_if_missing": True})
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    try:
        _, records = stream_records("s", 4 * WINDOW, seed=11)
        run(produce_json(settings, settings.topic("examples"), records))
        budget_url = f"{worker.public_url}/streams/s/budget"
        # windows 0..3 and the level-1 nodes (1, 0), (1, 1)
        wait_until(lambda: (fetch_json(budget_url) or {}).get("releases") == 6, 120, what="6 releases")
        budget = fetch_json(budget_url)
        assert budget["quality_epsilon"] == QUALITY
        assert budget["lifetime_epsilon_spent"] == pytest.approx(2 * EPSILON + 2 * QUALITY)  # window 2's

        ledger = SqliteLedger.open(settings.resolved_ledger_path)
        entries = ledger.entries("s")
        quality = sorted(
            (c.window_id.rsplit("-", 1)[1], c.mechanism)
            for c in entries
            if c.mechanism.startswith("quality:")
        )
        assert [(w, m.rsplit(":", 1)[1]) for w, m in quality] == [
            ("1", "L0"),
            ("2", "L0"),
            ("2", "L1"),
            ("3", "L0"),
        ]
        releases = [json.loads(c.release) for c in entries if c.mechanism.startswith("learner:")]
        newest: dict[int, tuple[str, float]] = {}
        for release in releases:  # in publication order: the newest estimate of each level
            for evaluation in release.get("evaluations", []):
                assert 0 <= evaluation["estimate"]["low"] <= evaluation["estimate"]["high"] <= 1
                newest[evaluation["level"]] = (evaluation["release"], evaluation["estimate"]["error"])
        assert set(newest) == {0, 1}
        expected = min(newest.items(), key=lambda item: (item[1][1], -item[0]))[1][0]

        got = asyncio.run(followed(settings, f"{worker.public_url}/keys"))
        assert got and got[-1].ledger_entry_id == expected
    finally:
        worker.stop()
