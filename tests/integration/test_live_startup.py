"""A worker's start and stop on the embedded broker: one consumer group, joined once, left at once.

The worker consumes with its own ingest consumer (group ``<app_id>.ingest``); faust's own consumer
would join a second group first, one more group join (half the session timeout on the embedded
broker) before the worker is ready. A stopped worker leaves its group at once, so the next worker
(a restart, a rolling update) gets the partitions without waiting for its session to expire.
"""

from __future__ import annotations

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from privstream.stream_app.embedded.broker import runs_embedded_broker
from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.kafka.clients import client_options, ensure_topics
from privstream.stream_app.settings import Settings, StreamConfig

from .conftest import run, start_worker, wait_until

pytestmark = pytest.mark.live


async def ingest_members(settings: Settings) -> int:
    """The members of the ingest consumer's group (``<app_id>.ingest``)."""
    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        (response,) = await admin.describe_consumer_groups([f"{settings.app_id}.ingest"])
        ((_error, _group, _state, _protocol_type, _protocol, members),) = response.groups
        return len(members)
    finally:
        await admin.close()


async def faust_consumer_topics(settings: Settings) -> list[str]:
    """The topics faust's own consumer creates when it starts (its leader assignor's)."""
    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        return [t for t in await admin.list_topics() if t.startswith(f"{settings.app_id}-__assignor")]
    finally:
        await admin.close()


def test_a_worker_joins_one_group_and_leaves_it_when_stopped(unique_settings, tmp_path):
    settings = unique_settings.model_copy(
        update={"streams": [StreamConfig(name="s", hypothesis_class="thresholds:64")]}
    )
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    try:
        wait_until(
            lambda: fetch_json(f"{worker.operator_url}/readyz") == {"status": "ready", "reason": "ok"},
            60,
            what="worker ready",
        )
        assert run(ingest_members(settings)) == 1
        assert run(faust_consumer_topics(settings)) == []
    finally:
        assert worker.stop() == 0
    # Well within the session timeout (6 s): the member is gone because it left, not because it expired.
    assert run(ingest_members(settings)) == 0


def test_the_embedded_broker_is_recognised_whoever_started_it(unique_settings):
    """A worker given the address of a running embedded broker (``privstream broker``'s) uses its
    short group timings, as one that starts its own does."""
    assert run(runs_embedded_broker(unique_settings)) is True
