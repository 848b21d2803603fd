"""The Kafka security settings work for real: SASL/SCRAM and TLS through privstream's aiokafka options
(:func:`client_options`), through the faust app's credentials (:func:`faust_credentials`, as
faust's aiokafka driver turns them into client options), and through a whole worker; a wrong
password fails fast with an error that names authentication.

What the embedded broker can and cannot do (shown by the first test, with the binary itself):
Tansu implements the server side of SCRAM (``broker --authentication``), but a user can only be
created with AlterUserScramCredentials, which an authenticating broker refuses before
authentication, and the memory engine keeps users in that broker's memory only. So on the embedded
broker a login can only fail. The successful logins below therefore go through
:class:`ScramProxy`, a SCRAM-terminating proxy in front of a real embedded broker: the clients run
their real SCRAM exchange (RFC 5802) against it and then talk to Tansu through it. TLS likewise:
the binary's ``broker --cert`` cannot be combined with ``--key`` ("the argument '--cert <CERT>'
cannot be used with '--key <KEY>'") and ``--cert`` alone serves plain TCP, so the proxy terminates
TLS with the test certificate in tests/deploy/tls/ (a CA and a server certificate for 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth
from pydantic import SecretStr

from privstream.stream_app.embedded.broker import (
    EmbeddedBroker,
    broker_binary,
    free_listener_ports,
    free_port,
)
from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.faust_app import faust_credentials
from privstream.stream_app.kafka.clients import (
    KafkaAuthenticationError,
    KafkaUnavailableError,
    client_options,
    ensure_topics,
    produce_json,
    start_client,
)
from privstream.stream_app.settings import Settings
from privstream.stream_app.sources.synthetic import synthetic_examples
from tests.integration.conftest import start_worker, wait_until

from .scram_proxy import ScramProxy

TLS = Path(__file__).parent / "tls"

pytestmark = pytest.mark.live

USER, PASSWORD = "privstream", "correct horse battery staple"
TIMEOUT = 20.0  # bound on every client start here: a wrong password must fail, never hang


def sasl_settings(
    bootstrap: str,
    password: str,
    mechanism: str = "SCRAM-SHA-256",
    *,
    protocol: str = "SASL_PLAINTEXT",
    **extra,
) -> Settings:
    run_id = uuid.uuid4().hex[:8]
    return Settings(
        kafka_bootstrap=bootstrap,
        kafka_security_protocol=protocol,
        kafka_sasl_mechanism=mechanism,
        kafka_sasl_username=USER,
        kafka_sasl_password=password,
        topic_prefix=f"sec-{run_id}.",
        topic_partitions=1,
        _env_file=None,
        **extra,
    )


@pytest.fixture(scope="module")
def scram_kafka():
    """An embedded broker behind a SCRAM proxy that knows USER/PASSWORD; yields the proxy."""
    proxy_port = free_port()
    with (
        EmbeddedBroker(advertised_port=proxy_port) as broker,
        ScramProxy(("127.0.0.1", broker.port), {USER: PASSWORD}, port=proxy_port) as proxy,
    ):
        yield proxy


def tls_server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(TLS / "server.crt", TLS / "server.key")
    return context


@pytest.fixture(scope="module")
def tls_kafka():
    """The embedded broker behind TLS (test CA) and SCRAM: yields (TLS-only proxy, TLS+SCRAM proxy)."""
    tls_port, sasl_port = free_port(), free_port()
    # One broker per proxy: a broker advertises one address, and clients must return through it.
    with (
        EmbeddedBroker(advertised_port=tls_port) as plain_broker,
        EmbeddedBroker(advertised_port=sasl_port) as sasl_broker,
        ScramProxy(("127.0.0.1", plain_broker.port), None, tls_port, tls_server_context()) as tls,
        ScramProxy(
            ("127.0.0.1", sasl_broker.port), {USER: PASSWORD}, sasl_port, tls_server_context()
        ) as sasl_ssl,
    ):
        yield tls, sasl_ssl


async def round_trip(settings: Settings, options: dict) -> list[bytes]:
    """Produce one record and read it back with clients built from ``options``."""
    topic = settings.topic("examples")
    producer = AIOKafkaProducer(**options)
    await start_client(producer, settings, TIMEOUT)
    try:
        await producer.send_and_wait(topic, b"hello", key=b"k")
    finally:
        await producer.stop()
    # No consumer group (assign, not subscribe): a group join costs seconds on the embedded broker.
    consumer = AIOKafkaConsumer(**options, enable_auto_commit=False)
    await start_client(consumer, settings, TIMEOUT)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        await consumer.seek_to_beginning()
        batch = await consumer.getmany(timeout_ms=int(TIMEOUT * 1000))
        return [m.value for messages in batch.values() for m in messages]
    finally:
        await consumer.stop()


async def start_producer(settings: Settings, options: dict) -> None:
    """Start (and stop) a producer built from ``options``; raises what :func:`start_client` raises."""
    producer = AIOKafkaProducer(**options)
    await start_client(producer, settings, TIMEOUT)
    await producer.stop()


def faust_client_options(settings: Settings) -> dict:
    """The aiokafka options faust's driver builds from the app's ``broker_credentials``."""
    assert settings.kafka_bootstrap is not None
    return {
        "bootstrap_servers": settings.kafka_bootstrap.split(","),
        **credentials_to_aiokafka_auth(faust_credentials(settings)),
    }


def test_the_embedded_binary_cannot_create_a_scram_user_on_an_authenticating_broker():
    with EmbeddedBroker(authentication=True) as broker:
        result = subprocess.run(
            [
                str(broker_binary()),
                "user",
                "create",
                "--broker",
                f"tcp://{broker.bootstrap}",
                "--mechanism",
                "scram256",
                USER,
                PASSWORD,
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    # The broker answers the unauthenticated AlterUserScramCredentials by closing the connection.
    # If this starts to pass, provision a user here and log in to Tansu directly.
    assert result.returncode == 1
    assert "early eof" in result.stderr


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_produce_and_consume_with_client_options(scram_kafka, mechanism):
    settings = sasl_settings(f"127.0.0.1:{scram_kafka.port}", PASSWORD, mechanism)
    asyncio.run(ensure_topics(settings, ["examples"]))
    assert asyncio.run(round_trip(settings, client_options(settings))) == [b"hello"]
    assert USER in scram_kafka.authenticated


def test_scram_login_produce_and_consume_with_the_faust_credentials(scram_kafka):
    settings = sasl_settings(f"127.0.0.1:{scram_kafka.port}", PASSWORD, "SCRAM-SHA-512")
    options = faust_client_options(settings)
    assert options["security_protocol"] == "SASL_PLAINTEXT" and options["sasl_mechanism"] == "SCRAM-SHA-512"
    asyncio.run(ensure_topics(settings, ["examples"]))
    before = len(scram_kafka.authenticated)
    assert asyncio.run(round_trip(settings, options)) == [b"hello"]
    assert len(scram_kafka.authenticated) > before


@pytest.mark.parametrize("options", ["privstream", "faust"])
def test_a_wrong_password_fails_fast_naming_authentication(scram_kafka, options):
    settings = sasl_settings(f"127.0.0.1:{scram_kafka.port}", "wrong password")
    kwargs = client_options(settings) if options == "privstream" else faust_client_options(settings)
    failures = scram_kafka.failures
    with pytest.raises(
        KafkaAuthenticationError,
        match=r"refused SASL SCRAM-SHA-256 authentication as "
        r"user 'privstream' \(SaslAuthenticationFailed",
    ):
        asyncio.run(start_producer(settings, kwargs))
    assert scram_kafka.failures > failures  # the broker side really rejected a proof


def test_a_wrong_login_on_the_authenticating_embedded_broker_fails_fast_naming_authentication():
    with EmbeddedBroker(authentication=True) as broker:
        settings = sasl_settings(broker.bootstrap, "any password: no user can exist here")
        with pytest.raises(KafkaAuthenticationError, match="refused SASL SCRAM-SHA-256 authentication"):
            asyncio.run(ensure_topics(settings))
        with pytest.raises(KafkaAuthenticationError, match="authentication"):
            asyncio.run(start_producer(settings, faust_client_options(settings)))


def test_a_worker_with_scram_credentials_learns_and_a_wrong_password_stops_it(scram_kafka, tmp_path):
    settings = sasl_settings(
        f"127.0.0.1:{scram_kafka.port}",
        PASSWORD,
        "SCRAM-SHA-512",
        app_id=f"privstream-sec-{uuid.uuid4().hex[:8]}",
        **free_listener_ports(),
        data_dir=tmp_path / "data",
        kafka_session_timeout_seconds=6,  # a group join on the embedded broker waits half of it
        kafka_heartbeat_interval_seconds=2,
        streams=[{"name": "s", "hypothesis_class": "thresholds:64"}],
    )
    asyncio.run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)  # its faust app connects with faust_credentials()
    try:
        batch = synthetic_examples("thresholds:64", 50, seed=5)
        records = [("s", m) for m in batch.messages("s")]
        asyncio.run(produce_json(settings, settings.topic("examples"), records))
        wait_until(
            lambda: (
                (fetch_json(f"{worker.operator_url}/status") or {})
                .get("streams", {})
                .get("s", {})
                .get("examples")
                == 50
            ),
            120,
            what="50 examples learned over SCRAM",
        )
    finally:
        worker.stop()

    wrong = settings.model_copy(
        update={"kafka_sasl_password": SecretStr("wrong password"), **free_listener_ports()}
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")} | wrong.to_env()
    result = subprocess.run(
        [sys.executable, "-m", "privstream", "worker"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stderr[-2000:]
    last_line = result.stderr.strip().splitlines()[-1]
    assert "refused SASL SCRAM-SHA-512 authentication as user 'privstream'" in last_line


def ssl_settings(port: int, cafile: Path | None) -> Settings:
    return Settings(
        kafka_bootstrap=f"127.0.0.1:{port}",
        kafka_security_protocol="SSL",
        kafka_ssl_cafile=cafile,
        topic_prefix=f"tls-{uuid.uuid4().hex[:8]}.",
        topic_partitions=1,
        _env_file=None,
    )


@pytest.mark.parametrize("options", ["privstream", "faust"])
def test_tls_with_the_ca_file_produces_and_consumes(tls_kafka, options):
    tls, _ = tls_kafka
    settings = ssl_settings(tls.port, TLS / "ca.crt")
    kwargs = client_options(settings) if options == "privstream" else faust_client_options(settings)
    assert kwargs["security_protocol"] == "SSL" and kwargs["ssl_context"].verify_mode == ssl.CERT_REQUIRED
    asyncio.run(ensure_topics(settings, ["examples"]))
    assert asyncio.run(round_trip(settings, kwargs)) == [b"hello"]


def test_tls_without_the_ca_file_fails_naming_the_certificate(tls_kafka):
    tls, _ = tls_kafka
    settings = ssl_settings(tls.port, None)  # the system's CAs do not know the test CA
    for kwargs in (client_options(settings), faust_client_options(settings)):
        with pytest.raises(
            KafkaUnavailableError,
            match=r"cannot reach Kafka at 127\.0\.0\.1:\d+ \(SSL\): "
            r".*CERTIFICATE_VERIFY_FAILED",
        ) as error:
            asyncio.run(start_producer(settings, kwargs))
        assert not isinstance(error.value, KafkaAuthenticationError)


@pytest.mark.parametrize("options", ["privstream", "faust"])
def test_sasl_ssl_scram_produces_and_consumes_and_refuses_a_wrong_password(tls_kafka, options):
    _, sasl_ssl = tls_kafka
    bootstrap = f"127.0.0.1:{sasl_ssl.port}"
    settings = sasl_settings(
        bootstrap, PASSWORD, "SCRAM-SHA-512", protocol="SASL_SSL", kafka_ssl_cafile=TLS / "ca.crt"
    )
    build = client_options if options == "privstream" else faust_client_options
    assert build(settings)["security_protocol"] == "SASL_SSL"
    asyncio.run(ensure_topics(settings, ["examples"]))
    assert asyncio.run(round_trip(settings, build(settings))) == [b"hello"]
    wrong = sasl_settings(
        bootstrap, "wrong", "SCRAM-SHA-512", protocol="SASL_SSL", kafka_ssl_cafile=TLS / "ca.crt"
    )
    with pytest.raises(KafkaAuthenticationError, match="refused SASL SCRAM-SHA-512 authentication"):
        asyncio.run(start_producer(wrong, build(wrong)))


def test_an_unreachable_broker_is_reported_as_unreachable_not_as_authentication():
    settings = sasl_settings(f"127.0.0.1:{free_port()}", PASSWORD)  # nothing listens there
    expected = r"cannot reach Kafka at 127\.0\.0\.1:\d+ \(SASL_PLAINTEXT\): ConnectionRefusedError"
    with pytest.raises(KafkaUnavailableError, match=expected) as error:
        asyncio.run(ensure_topics(settings))
    assert not isinstance(error.value, KafkaAuthenticationError)
    assert isinstance(error.value, OSError)  # the CLI prints OSErrors as one line and exits 2


async def first_release(settings: Settings) -> object:
    from privstream.stream_app.sdk import subscribe

    async for release in subscribe("s", settings=settings):
        return release
    return None


def test_subscribe_names_an_unreachable_broker_and_a_refused_login(tls_kafka):
    """The SDK's subscriber starts through ``start_client``: a clear error, never a bare
    "Unable to bootstrap" nor a hang."""
    nowhere = sasl_settings(f"127.0.0.1:{free_port()}", PASSWORD)
    with pytest.raises(KafkaUnavailableError, match=r"cannot reach Kafka at 127\.0\.0\.1:\d+") as error:
        asyncio.run(first_release(nowhere))
    assert not isinstance(error.value, KafkaAuthenticationError)
    _, sasl_ssl = tls_kafka
    wrong = sasl_settings(
        f"127.0.0.1:{sasl_ssl.port}",
        "wrong",
        "SCRAM-SHA-512",
        protocol="SASL_SSL",
        kafka_ssl_cafile=TLS / "ca.crt",
    )
    with pytest.raises(KafkaAuthenticationError, match="refused SASL SCRAM-SHA-512 authentication"):
        asyncio.run(first_release(wrong))
