"""Why a Kafka client could not start, as one message that names the cause."""

from __future__ import annotations

import socket

from privstream.stream_app.kafka.clients import connection_problem
from privstream.stream_app.settings import Settings


async def test_a_broker_that_never_answers_is_reported_with_the_clients_error() -> None:
    # A socket that listens but never speaks: the probe's connection waits until its timeout, whose
    # TimeoutError has no text of its own; the message then carries the client's error instead.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        settings = Settings(kafka_bootstrap=f"127.0.0.1:{port}", app_id="app", _env_file=None)
        problem = await connection_problem(settings, ConnectionError("unable to bootstrap"), timeout=0.2)
    assert f"cannot reach Kafka at 127.0.0.1:{port} (PLAINTEXT)" in str(problem)
    assert "TimeoutError: unable to bootstrap; check kafka_bootstrap" in str(problem)
