"""The service: a ``faust.App`` built from :class:`Settings`, with its topics, agents and pages.

``stream_app`` owns the app and hands topics, metrics and collaborators to the agents'
registration functions, so the agents never import the service (DESIGN.md §2).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import faust

from privstream.agents.ingest import register_ingest_agent
from privstream.agents.online import OnlineLearners, OnlineStream
from privstream.agents.progress import Progress
from privstream.agents.validation import ExampleValidator
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.stream_app import web
from privstream.stream_app.metrics import ServiceMetrics
from privstream.stream_app.settings import FAUST_ENV_PREFIX, Settings

log = logging.getLogger(__name__)


@dataclass
class Service:
    """Everything a running worker is made of."""

    settings: Settings
    app: faust.App
    topics: dict[str, Any]
    metrics: ServiceMetrics
    learners: OnlineLearners
    progress: Progress


def faust_broker_url(bootstrap: str) -> str:
    return ";".join(f"kafka://{server}" for server in bootstrap.split(","))


def faust_credentials(settings: Settings) -> Any:
    """SASL/TLS credentials for faust's Kafka clients, or None for PLAINTEXT."""
    protocol = settings.kafka_security_protocol
    if protocol == "PLAINTEXT":
        return None
    ssl_context = None
    if protocol in ("SSL", "SASL_SSL"):
        import ssl

        ssl_context = ssl.create_default_context(
            cafile=str(settings.kafka_ssl_cafile) if settings.kafka_ssl_cafile else None
        )
    if protocol == "SSL":
        return faust.SSLCredentials(ssl_context)
    assert settings.kafka_sasl_password is not None  # checked by Settings
    return faust.SASLCredentials(
        username=settings.kafka_sasl_username,
        password=settings.kafka_sasl_password.get_secret_value(),
        mechanism=settings.kafka_sasl_mechanism,
        ssl_context=ssl_context,
    )


def build_app(settings: Settings) -> faust.App:
    """A ``faust.App`` configured from ``settings`` only.

    faust reads ~80 of its own settings from *unprefixed* environment variables and lets them
    override keyword arguments (``WEB_PORT`` beats ``web_port=``; Kubernetes injects such
    variables for Services). ``env_prefix`` confines that to ``PRIVSTREAM_FAUST_*``.
    """
    if settings.kafka_bootstrap is None:
        raise ValueError("kafka_bootstrap is not set (the CLI starts the embedded broker when unset)")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return faust.App(
        settings.app_id,
        env_prefix=FAUST_ENV_PREFIX,
        broker=faust_broker_url(settings.kafka_bootstrap),
        broker_credentials=faust_credentials(settings),
        # at-least-once: exactly_once is unreliable in faust and impossible on the embedded broker.
        processing_guarantee="at_least_once",
        producer_enable_idempotence=False,
        store="memory://",
        autodiscover=False,
        datadir=str(settings.data_dir / "faust"),
        topic_partitions=settings.topic_partitions,
        topic_replication_factor=settings.topic_replication_factor,
        table_standby_replicas=0,
        broker_session_timeout=settings.kafka_session_timeout_seconds,
        broker_heartbeat_interval=settings.kafka_heartbeat_interval_seconds,
        consumer_auto_offset_reset="earliest",
        web_enabled=True,
        web_host=settings.web_host,
        web_bind=settings.web_host,
        web_port=settings.web_port,
        # faust's /table pages would serve raw state; /graph and /router are debug aids.
        web_tables_enabled=False,
        web_graph_enabled=False,
        web_router_enabled=False,
        worker_redirect_stdouts=False,
        logging_config=None,
    )


def build_service(settings: Settings) -> Service:
    """Build the app and register the agents and web pages on it."""
    app = build_app(settings)
    raw = {"key_serializer": "raw", "value_serializer": "raw"}
    topics = {
        name: app.topic(settings.topic(name), partitions=settings.topic_partitions, **raw)
        for name in ("examples", "examples.dlq", "predictions")
    }
    streams = {
        s.name: OnlineStream(s.name, parse_class_spec(s.hypothesis_class), s.soa_tie)
        for s in settings.streams
    }
    if not streams:
        log.warning("no streams are configured: every example will go to the dead-letter topic")
    metrics = ServiceMetrics(list(streams))
    learners = OnlineLearners(streams, metrics)
    progress = Progress()
    validator = ExampleValidator({sid: s.hypothesis_class.check_point for sid, s in streams.items()})
    register_ingest_agent(
        app,
        source=topics["examples"],
        dead_letters=topics["examples.dlq"],
        predictions=topics["predictions"],
        validator=validator,
        learners=learners,
        metrics=metrics,
        progress=progress,
    )
    service = Service(settings, app, topics, metrics, learners, progress)
    web.register_pages(service)
    return service
