"""The faust app the worker runs on: its broker URL and credentials from the settings, its topics, and
faust's own Kafka machinery left off (the worker's ingest consumer has clients of its own).
"""

from __future__ import annotations

from typing import Any

import faust
from faust.app.base import BootStrategy

from privstream.learning.errors import InvariantError
from privstream.stream_app.settings import FAUST_ENV_PREFIX, Settings
from privstream.stream_app.store.private_files import private_directory


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
    if settings.kafka_sasl_password is None:  # Settings requires it with SASL
        raise InvariantError("invariant broken: a SASL protocol has kafka_sasl_password")
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
    private_directory(settings.data_dir)  # the ledger, the state store, the key: this user's only
    app = faust.App(
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
        # privstream serves its own two listeners (web/listener.py): faust's single web server
        # would mix its debug views with the public pages and cannot separate the trust zones.
        web_enabled=False,
        worker_redirect_stdouts=False,
        logging_config=None,
    )
    # The app has no agents, tables or topics of its own: the ingest service consumes and produces
    # with its own clients (kafka/ingest.py). faust's consumer would only join a consumer group of
    # its own before the ingest consumer's (a second, sequential group join at start-up: half the
    # session timeout on the embedded broker) and run a fetcher thread for nothing.
    app.boot_strategy = BootStrategy(app, enable_kafka=False)
    return app
