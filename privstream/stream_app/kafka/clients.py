"""Small Kafka helpers shared by the CLI commands: client options, topic creation, producing.

They use aiokafka directly (faust is for the worker's agents); every client gets the same
security options from :class:`Settings`. Clients are started with :func:`start_client`, which
bounds the wait and turns aiokafka's "Unable to bootstrap" into an error that says whether
Kafka was unreachable or refused the SASL credentials (``privstream worker`` creates its topics
this way before faust starts, so a wrong password stops it with that one line).
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
from aiokafka.conn import create_conn
from aiokafka.errors import TopicAlreadyExistsError
from privstream_client.kafka_logs import held_bootstrap_logs

from privstream.agents.validation import MAX_MESSAGE_BYTES
from privstream.learning.errors import InvariantError
from privstream.stream_app.settings import TOPIC_NAMES, Settings

log = logging.getLogger(__name__)

#: How long a client may take to connect, authenticate and read metadata before we give up.
CONNECT_TIMEOUT_SECONDS = 30.0


class KafkaUnavailableError(ConnectionError):
    """Kafka could not be reached (a ConnectionError, so the CLI prints one line and exits 2)."""


class KafkaAuthenticationError(KafkaUnavailableError):
    """Kafka answered but refused the configured SASL credentials."""


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
        if settings.kafka_sasl_password is None:  # Settings requires it with SASL
            raise InvariantError("invariant broken: a SASL protocol has kafka_sasl_password")
        options.update(
            sasl_mechanism=settings.kafka_sasl_mechanism,
            sasl_plain_username=settings.kafka_sasl_username,
            sasl_plain_password=settings.kafka_sasl_password.get_secret_value(),
        )
    return options


async def start_client(client: Any, settings: Settings, timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
    """``await client.start()`` for an aiokafka producer, consumer or admin client, bounded by
    ``timeout``; on failure, raise :class:`KafkaAuthenticationError` or :class:`KafkaUnavailableError`
    naming the cause (aiokafka reports every bootstrap failure as "Unable to bootstrap"), without
    aiokafka's own log lines about it (:func:`~privstream_client.kafka_logs.held_bootstrap_logs`)."""
    with held_bootstrap_logs() as held:
        try:
            await asyncio.wait_for(client.start(), timeout)
        # Not only KafkaError: a broker's malformed SASL answer surfaces as whatever aiokafka's
        # parser raises (the embedded broker's SCRAM refusal comes out as KeyError('v')).
        except Exception as exc:
            held.failed()
            stop = getattr(client, "close", None) or client.stop
            with contextlib.suppress(Exception):
                await stop()
            # Each diagnostic probe gets at most 10 s, so the whole failure stays bounded.
            raise await connection_problem(settings, exc, min(timeout, 10.0)) from exc


async def connection_problem(
    settings: Settings, error: BaseException, timeout: float = CONNECT_TIMEOUT_SECONDS
) -> KafkaUnavailableError:
    """Why a client could not start: probe the first bootstrap server without SASL (Kafka answers
    ApiVersions before authentication), then with it; a failure only in the second step means the
    broker refused the credentials."""
    options = client_options(settings)
    host, _, port = options["bootstrap_servers"][0].rpartition(":")
    where = f"Kafka at {host}:{port}"
    sasl = settings.kafka_security_protocol.startswith("SASL_")
    probe = {
        "security_protocol": "SSL" if "ssl_context" in options else "PLAINTEXT",
        "ssl_context": options.get("ssl_context"),
        "request_timeout_ms": int(timeout * 1000),
    }
    try:
        conn = await asyncio.wait_for(create_conn(host, int(port), **probe), timeout)
        conn.close()
    except Exception as exc:  # unreachable, TLS failure, not Kafka
        tls = ", kafka_ssl_cafile" if "ssl_context" in options else ""
        return KafkaUnavailableError(
            f"cannot reach {where} ({settings.kafka_security_protocol}): {type(exc).__name__}: "
            f"{str(exc) or error}; check kafka_bootstrap, kafka_security_protocol{tls}"
        )
    if sasl:
        credentials = ("sasl_mechanism", "sasl_plain_username", "sasl_plain_password")
        with_sasl = {
            **probe,
            "security_protocol": settings.kafka_security_protocol,
            **{k: options[k] for k in credentials},
        }
        try:
            conn = await asyncio.wait_for(create_conn(host, int(port), **with_sasl), timeout)
            conn.close()
        except Exception as exc:
            return KafkaAuthenticationError(
                f"{where} refused SASL {settings.kafka_sasl_mechanism} authentication as user "
                f"{settings.kafka_sasl_username!r} ({type(exc).__name__}: {exc}); check "
                "kafka_sasl_username, kafka_sasl_password and kafka_sasl_mechanism"
            )
    return KafkaUnavailableError(
        f"cannot use {where}: {type(error).__name__}: {error}; check kafka_bootstrap and the kafka_* settings"
    )


async def ensure_topics(settings: Settings, names: Iterable[str] = TOPIC_NAMES) -> None:
    """Create the service's topics if they do not exist (idempotent).

    Created up front so producers never auto-create a topic with the broker's default
    partition count before the worker declares it. The examples topic takes messages up to the
    largest the worker reads (``max.message.bytes``): Kafka refuses a larger one to its producer.
    Its records are stamped by the broker when it appends them (``LogAppendTime``): a count
    window closes at its last example's record timestamp, so that moment must be the broker's, not
    a producer's to choose. The keys topic (the signed key rotations,
    :mod:`.rotation_log`) keeps its records for ever: a subscriber pinned to a key from years ago
    follows the chain from there.
    """
    admin = AIOKafkaAdminClient(**client_options(settings))
    await start_client(admin, settings)
    try:
        existing = set(await admin.list_topics())
        wanted = [settings.topic(n) for n in names]
        limits = {
            settings.topic("examples"): {
                "max.message.bytes": str(MAX_MESSAGE_BYTES),
                "message.timestamp.type": "LogAppendTime",
            },
            settings.topic("keys"): {"retention.ms": "-1"},
        }
        missing = [
            NewTopic(
                t,
                num_partitions=settings.topic_partitions,
                replication_factor=settings.topic_replication_factor,
                topic_configs=limits.get(t, {}),
            )
            for t in wanted
            if t not in existing
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
    records: Iterable[tuple[str | None, dict[str, Any] | bytes]],
    flush_every: int = 5000,
) -> int:
    """Send ``(key, value)`` records (values JSON-encoded unless already bytes; a key None goes to a
    partition at random); returns the count."""
    producer = AIOKafkaProducer(**client_options(settings), linger_ms=5, acks="all")
    await start_client(producer, settings)
    sent = 0
    try:
        pending: list[asyncio.Future[Any]] = []
        for key, value in records:
            payload = value if isinstance(value, bytes) else json.dumps(value, separators=(",", ":")).encode()
            # A key picks the partition (None: one at random): the stream's partition_by decides it.
            pending.append(await producer.send(topic, payload, key=None if key is None else key.encode()))
            sent += 1
            if len(pending) >= flush_every:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return sent
