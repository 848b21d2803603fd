"""Fixtures of the storage tests: a real PostgreSQL server, and the backends to run contracts over.

One PostgreSQL server per test session (``initdb`` and ``postgres`` from the machine's
PostgreSQL, on 127.0.0.1 and a free port, in a temporary directory; see
:mod:`privstream.stream_app.store.pg_server`), one fresh database per test (~40 ms). Where the
server binaries are missing, the PostgreSQL tests skip, saying what to install;
``scripts/test.sh`` installs them where it can.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from privstream.stream_app.store.pg_server import PostgresServer, PostgresUnavailableError
from tests.stream_app.store.backends import (
    BACKENDS,
    LedgerBackend,
    PostgresLedgerBackend,
    PostgresStateBackend,
    SqliteLedgerBackend,
    SqliteStateBackend,
    StateBackend,
)

_numbers = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
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


@pytest.fixture(params=BACKENDS)
def ledger_backend(request: pytest.FixtureRequest, tmp_path: Path) -> LedgerBackend:
    if request.param == "sqlite":
        return SqliteLedgerBackend(tmp_path)
    return PostgresLedgerBackend(request.getfixturevalue("pg_server"), database_name(request))


@pytest.fixture(params=BACKENDS)
def state_backend(request: pytest.FixtureRequest, tmp_path: Path) -> StateBackend:
    if request.param == "sqlite":
        return SqliteStateBackend(tmp_path)
    return PostgresStateBackend(request.getfixturevalue("pg_server"), database_name(request))


@pytest.fixture
def pg_database(request: pytest.FixtureRequest, pg_server: PostgresServer) -> str:
    """The URL of a fresh, empty database on the session's server."""
    return pg_server.create_database(database_name(request))
