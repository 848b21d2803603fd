"""The embedded broker: loopback only, answers Kafka requests, stops cleanly."""

import socket

import pytest

from privstream.stream_app.embedded.broker import LOOPBACK, EmbeddedBroker, free_port, kafka_api_versions_ok


def test_probe_is_false_on_a_closed_port():
    assert not kafka_api_versions_ok(LOOPBACK, free_port(), timeout=0.2)


def test_probe_is_false_for_a_server_that_is_not_kafka():
    with socket.socket() as server:
        server.bind((LOOPBACK, 0))
        server.listen()
        port = server.getsockname()[1]
        # Accepts the connection but never answers: the probe must time out, not hang or pass.
        assert not kafka_api_versions_ok(LOOPBACK, port, timeout=0.3)


@pytest.mark.live  # starts the embedded broker
def test_embedded_broker_binds_loopback_and_stops():
    with EmbeddedBroker() as broker:
        host, port = broker.bootstrap.rsplit(":", 1)
        assert host == "127.0.0.1"
        assert kafka_api_versions_ok(host, int(port))
        process = broker.process
        # Not reachable on another local address: it listens on loopback only.
        outside = socket.gethostbyname(socket.gethostname())
        if outside != host and not outside.startswith("127."):
            assert not kafka_api_versions_ok(outside, int(port), timeout=0.3)
    assert process.poll() is not None
    assert not kafka_api_versions_ok(host, int(port), timeout=0.3)


def test_a_service_on_the_embedded_broker_gets_a_short_session_timeout_unless_one_is_set():
    from types import SimpleNamespace

    from privstream.stream_app.embedded.broker import EMBEDDED_SESSION_TIMEOUT_SECONDS, on_embedded_broker
    from privstream.stream_app.settings import Settings

    broker = SimpleNamespace(bootstrap="127.0.0.1:9")
    default = on_embedded_broker(Settings(_env_file=None), broker)  # type: ignore[arg-type]
    assert (default.kafka_bootstrap, default.kafka_session_timeout_seconds) == (
        "127.0.0.1:9",
        EMBEDDED_SESSION_TIMEOUT_SECONDS,
    )
    chosen = on_embedded_broker(Settings(_env_file=None, kafka_session_timeout_seconds=45), broker)  # type: ignore[arg-type]
    assert chosen.kafka_session_timeout_seconds == 45
