"""Fixtures of the storage tests: the backends the contract suites run over (the PostgreSQL
server itself, ``pg_server``, is in ``tests/conftest.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import database_name
from tests.stream_app.store.backends import (
    BACKENDS,
    LedgerBackend,
    PostgresLedgerBackend,
    PostgresStateBackend,
    SqliteLedgerBackend,
    SqliteStateBackend,
    StateBackend,
)


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
