"""The ingest agent offline, with faust's ``test_context()`` (no broker)."""

from __future__ import annotations

import asyncio
import json
from unittest.mock import AsyncMock

import pytest

from privstream.schemas import Prediction
from privstream.stream_app.service import build_service
from privstream.stream_app.settings import Settings


@pytest.fixture
async def service(tmp_path):
    settings = Settings(
        app_id="privstream-agent-test",
        kafka_bootstrap="127.0.0.1:9",  # never contacted: every send is mocked
        streams=[{"name": "s", "hypothesis_class": "thresholds:8"}],
        data_dir=tmp_path,
        _env_file=None,
    )
    svc = build_service(settings)
    app = svc.app
    app.loop = asyncio.get_running_loop()
    app.finalize()
    app.flow_control.resume()  # otherwise put() waits forever
    for topic in svc.topics.values():
        topic.send = AsyncMock()
    return svc


def sent_values(topic):
    return [call.kwargs["value"] for call in topic.send.await_args_list]


async def test_valid_examples_are_predicted_learned_and_published(service):
    agent = service.app.agents["ingest"]
    # Binary-search order on thresholds:8 (Ldim 3) with target t = 5: the SOA errs at most 3 times.
    xs = [4, 6, 5, 4, 6, 5, 0, 7]
    async with agent.test_context() as ctx:
        for x in xs:
            await ctx.put(json.dumps({"stream_id": "s", "x": x, "y": int(x >= 5)}).encode(), key=b"s")
    predictions = [Prediction.model_validate_json(v) for v in sent_values(service.topics["predictions"])]
    assert [p.x for p in predictions] == xs
    assert all(p.mistake_bound == 3 for p in predictions)
    assert predictions[-1].mistakes <= 3
    assert [p.mistake for p in predictions[3:]] == [False] * 5  # consistent after learning them
    assert service.topics["examples.dlq"].send.await_count == 0
    assert service.progress.handled == len(xs)
    assert service.learners.soa("s").mistakes == predictions[-1].mistakes


async def test_invalid_messages_go_to_the_dead_letter_topic_and_the_stream_continues(service):
    agent = service.app.agents["ingest"]
    async with agent.test_context() as ctx:
        await ctx.put(b"{broken", key=b"s")
        await ctx.put(json.dumps({"stream_id": "s", "x": 8, "y": 1}).encode(), key=b"s")
        await ctx.put(json.dumps({"stream_id": "s", "x": 7, "y": 1}).encode(), key=b"s")
    dlq = service.topics["examples.dlq"].send.await_args_list
    assert [dict(c.kwargs["headers"])["error.reason"] for c in dlq] == [b"invalid_json", b"out_of_domain"]
    assert dlq[0].kwargs["value"] == b"{broken"
    assert len(sent_values(service.topics["predictions"])) == 1
    assert service.metrics.invalid_counts["invalid_json"] == 1
    assert service.metrics.received_count == 3
