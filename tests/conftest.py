"""Shared test configuration.

Tests marked ``kafka`` need Apache Kafka (features the embedded broker lacks, such as transactions);
they run only when ``PRIVSTREAM_KAFKA_BOOTSTRAP`` names one, and are reported as skipped
with that reason otherwise.

Tests that need PostgreSQL take ``pg_server``: one real server per test session (``initdb`` and
``postgres`` from the machine's PostgreSQL, on 127.0.0.1 and a free port, in a temporary
directory, run as an unprivileged user; see :mod:`privstream.stream_app.store.pg_server`), and
``pg_database``, a fresh database per test (~40 ms). Where the server binaries are missing they
skip, saying what to install; ``scripts/test.sh`` installs them where it can.
"""

import itertools
import logging
import os
import re
from collections.abc import Iterator

import pytest

from privstream.stream_app.store.pg_server import PostgresServer, PostgresUnavailableError


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PRIVSTREAM_KAFKA_BOOTSTRAP"):
        return
    skip = pytest.mark.skip(reason="needs Apache Kafka: set PRIVSTREAM_KAFKA_BOOTSTRAP=host:port")
    for item in items:
        if item.get_closest_marker("kafka") is not None:  # the mark (not the tests/.../kafka package)
            item.add_marker(skip)


_numbers = itertools.count()


@pytest.fixture(scope="session", autouse=True)
def _own_slot_cache_and_priority(tmp_path_factory) -> Iterator[None]:
    """Workers started by the tests remember slot measurements in the session's own cache
    directory, not the machine's (which other checkouts share), and run their learner processes
    at their own priority: on a machine shared by several test suites, fits at a lower one would
    pass the tests' short slots (tests/stream_app/test_learner_process.py covers the niceness)."""
    saved = {name: os.environ.get(name) for name in ("XDG_CACHE_HOME", "PRIVSTREAM_LEARNER_NICENESS")}
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    os.environ["PRIVSTREAM_LEARNER_NICENESS"] = "0"
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    server = PostgresServer(durable=False)  # a process crash loses nothing; no fsync to wait for
    try:
        server.start()
    except PostgresUnavailableError as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


def database_name(request: pytest.FixtureRequest) -> str:
    """A fresh database name per test (PostgreSQL identifiers: at most 63 bytes)."""
    return f"t{next(_numbers)}_" + re.sub(r"\W+", "_", request.node.name).strip("_").lower()[:50]


@pytest.fixture
def pg_database(request: pytest.FixtureRequest, pg_server: PostgresServer) -> str:
    """The URL of a fresh, empty database on the session's server."""
    return pg_server.create_database(database_name(request))


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """The CLI's commands configure the root logger on the standard error they see, which in a test
    is pytest's capture of that test: put the root logger back afterwards, so a later test never
    logs into a closed stream."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
