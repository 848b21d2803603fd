"""Open the ledger and the state store that the settings' ``store_url`` names.

``store_url`` unset or ``sqlite:///DIR``: the SQLite files (``ledger_path``, ``state_path``);
``postgresql://...``: both in that PostgreSQL database, with the password and TLS options of the
``store_*`` settings. One URL for both stores because they are one unit: shared by the same
workers, backed up and restored together (a ledger restored without its window store, or the
reverse, would no longer match the windows it charged), and in one database they can later
share a transaction.

>>> from privstream.stream_app.settings import Settings
>>> settings = Settings(store_url="sqlite:///var/shared", _env_file=None)
>>> settings.store_backend, str(settings.resolved_ledger_path)
('sqlite', 'var/shared/ledger.sqlite3')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeAlias

from privstream.stream_app.settings import Settings
from privstream.stream_app.store.ledger import SqlLedger
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.store.sqlite_streams import SqliteStreamStores
from privstream.stream_app.store.state import SqlStateStore

if TYPE_CHECKING:
    from privstream.stream_app.store.leases import Leases
    from privstream.stream_app.store.postgres_db import PostgresConfig

#: The ledger on either backend (the rules are the same; only the storage differs).
Ledger: TypeAlias = SqlLedger
#: The window state store on either backend.
StateStore: TypeAlias = SqlStateStore

__all__ = ["Ledger", "StateStore", "open_leases", "open_ledger", "open_state_store", "postgres_config"]


def postgres_config(settings: Settings) -> PostgresConfig:
    """The connection settings of a ``postgresql://`` store (password and TLS from the settings)."""
    from privstream.stream_app.store.postgres_db import PostgresConfig

    if settings.store_backend != "postgresql" or settings.store_url is None:
        raise ValueError(f"store_url {settings.store_url!r} is not a postgresql:// URL")
    return PostgresConfig(
        settings.store_url,
        password=settings.store_password_value(),
        sslmode=settings.store_sslmode,
        sslrootcert=None if settings.store_sslrootcert is None else str(settings.store_sslrootcert),
        pool_size=settings.store_pool_size,
        retry_seconds=settings.store_retry_seconds,
    )


def open_ledger(
    settings: Settings,
    budgets: Mapping[str, tuple[float, float]] | None = None,
    *,
    create: bool | None = None,
) -> Ledger:
    """The privacy ledger the settings name, with ``budgets`` applied; a missing one is an error
    unless ``create`` (default: the setting ``ledger_create_if_missing``)."""
    create = settings.ledger_create_if_missing if create is None else create
    if settings.store_backend == "postgresql":
        from privstream.stream_app.store.postgres_ledger import PostgresLedger

        return PostgresLedger.open(postgres_config(settings), create_if_missing=create, budgets=budgets)
    path = settings.resolved_ledger_path
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    return SqliteLedger.open(path, create_if_missing=create, budgets=budgets)


def open_state_store(settings: Settings) -> StateStore:
    """The window and SOA state store the settings name (created if missing: it holds no budget)."""
    if settings.store_backend == "postgresql":
        from privstream.stream_app.store.postgres_state import PostgresStateStore

        return PostgresStateStore(postgres_config(settings))
    # a file per stream: one stream's node build never holds another stream's writes
    return SqliteStreamStores(settings.resolved_state_path)


def open_leases(settings: Settings, owner: str | None = None) -> Leases:
    """This worker's partition leases on the examples topic (:mod:`.leases`): in the SQLite ledger
    file (open the ledger first: it creates the file) or in the PostgreSQL database."""
    from privstream.stream_app.store.leases import PostgresLeases, SqliteLeases

    source = settings.topic("examples")
    if settings.store_backend == "postgresql":
        return PostgresLeases(postgres_config(settings), source, owner)
    return SqliteLeases(settings.resolved_ledger_path, source, owner)
