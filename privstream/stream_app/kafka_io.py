"""Small Kafka helpers shared by the CLI commands: client options, topic creation, producing.

They use aiokafka directly (faust is for the worker's agents); every client gets the same
security options from :class:`Settings`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterable
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from privstream.stream_app.settings import TOPIC_NAMES, Settings

log = logging.getLogger(__name__)


def client_options(settings: Settings) -> dict[str, Any]:
    """Connection and security options for aiokafka clients."""
    if settings.kafka_bootstrap is None:
        raise ValueError("kafka_bootstrap is not set")
    options: dict[str, Any] = {
        "bootstrap_servers": settings.kafka_bootstrap.split(","),
        "security_protocol": settings.kafka_security_protocol,
    }
    if settings.kafka_security_protocol in ("SSL", "SASL_SSL"):
        from aiokafka.helpers import create_ssl_context

        options["ssl_context"] = create_ssl_context(
            cafile=str(settings.kafka_ssl_cafile) if settings.kafka_ssl_cafile else None
        )
    if settings.kafka_security_protocol.startswith("SASL_"):
        assert settings.kafka_sasl_password is not None
        options.update(
            sasl_mechanism=settings.kafka_sasl_mechanism,
            sasl_plain_username=settings.kafka_sasl_username,
            sasl_plain_password=settings.kafka_sasl_password.get_secret_value(),
        )
    return options


async def ensure_topics(settings: Settings, names: Iterable[str] = TOPIC_NAMES) -> None:
    """Create the service's topics if they do not exist (idempotent).

    Created up front so producers never auto-create a topic with the broker's default
    partition count before the worker declares it.
    """
    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [settings.topic(n) for n in names]
        missing = [
            NewTopic(t, num_partitions=settings.topic_partitions,
                     replication_factor=settings.topic_replication_factor)
            for t in wanted if t not in existing
        ]
        if missing:
            # Another worker may create them at the same moment.
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics(missing)
            log.info("created topics %s", ", ".join(t.name for t in missing))
    finally:
        await admin.close()


async def produce_json(
    settings: Settings,
    topic: str,
    records: Iterable[tuple[str, dict[str, Any] | bytes]],
    flush_every: int = 5000,
) -> int:
    """Send ``(key, value)`` records (values JSON-encoded unless already bytes); returns the count."""
    producer = AIOKafkaProducer(**client_options(settings), linger_ms=5, acks="all")
    await producer.start()
    sent = 0
    try:
        pending: list[asyncio.Future[Any]] = []
        for key, value in records:
            payload = value if isinstance(value, bytes) else json.dumps(value, separators=(",", ":")).encode()
            pending.append(await producer.send(topic, payload, key=key.encode()))
            sent += 1
            if len(pending) >= flush_every:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return sent
