"""The ingest consumer's Kafka options come from the settings (and aiokafka accepts them)."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaConsumer
from pydantic import ValidationError

from privstream.stream_app.kafka.ingest import ingest_consumer_options
from privstream.stream_app.settings import Settings


def settings(**kwargs) -> Settings:
    return Settings(kafka_bootstrap="127.0.0.1:9092", app_id="app", _env_file=None, **kwargs)


async def test_the_ingest_consumer_commits_by_hand_and_waits_at_most_the_configured_fetch_time():
    options = ingest_consumer_options(settings(kafka_fetch_max_wait_ms=20, kafka_session_timeout_seconds=12))
    assert options["group_id"] == "app.ingest"
    assert options["enable_auto_commit"] is False  # at-least-once: commits follow acknowledged outputs
    assert options["fetch_max_wait_ms"] == 20
    assert options["session_timeout_ms"] == 12_000
    await AIOKafkaConsumer(**options).stop()  # every option is one aiokafka knows (else TypeError)


def test_the_fetch_wait_defaults_low_and_is_read_from_the_environment(monkeypatch):
    # Kafka's own default (500 ms) put ~0.6 s into p50 latency on the embedded broker.
    assert settings().kafka_fetch_max_wait_ms == 50
    monkeypatch.setenv("PRIVSTREAM_KAFKA_FETCH_MAX_WAIT_MS", "200")
    assert settings().kafka_fetch_max_wait_ms == 200
    with pytest.raises(ValidationError, match="kafka_fetch_max_wait_ms"):
        settings(kafka_fetch_max_wait_ms=-1)
