"""What a worker checks before it starts, and the one-line errors that name the setting to change.

A worker that cannot start says why in one line and which setting fixes it (the CLI prints the
line and exits with status 2): a port in use, a ``data_dir`` it cannot write, a ledger that does
not exist yet (the first start of a deployment), is damaged, or is out of reach.

>>> error = StartupError("public_port 6066 on 127.0.0.1 is in use")
>>> str(error)
'public_port 6066 on 127.0.0.1 is in use'
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when needed: the CLI imports this module on every command
    from privstream.agents.ledger_port import LedgerError
    from privstream.stream_app.settings import Settings

#: The environment variables' prefix (``privstream.stream_app.settings.ENV_PREFIX``, checked by its tests).
ENV_PREFIX = "PRIVSTREAM_"

__all__ = [
    "StartupError",
    "check_before_start",
    "directory_problem",
    "ledger_startup_error",
    "port_problem",
    "setting_names",
    "worker_directories",
]


class StartupError(Exception):
    """The worker cannot start; the message names the setting to change."""


def setting_names(name: str) -> str:
    """How a setting is written in a config file and in the environment.

    >>> setting_names("ledger_create_if_missing")
    'ledger_create_if_missing (PRIVSTREAM_LEDGER_CREATE_IF_MISSING)'
    """
    return f"{name} ({ENV_PREFIX}{name.upper()})"


def check_before_start(settings: Settings) -> None:
    """Raise :class:`StartupError` if the worker's directories or ports cannot be used, or its SQLite
    ledger does not exist (before a broker is started for nothing; the store checks it again).
    Read-only: a worker refused here, or later by an unreachable Kafka, leaves no ``data_dir``
    behind (the service creates it once Kafka answered)."""
    for path, setting in worker_directories(settings):
        if why := directory_problem(path):
            raise StartupError(
                f"cannot create the directory {path} ({why}): set {setting_names(setting)} to a "
                "directory this worker may write"
            )
    if settings.store_backend == "sqlite":
        releasing = any(s.release is not None for s in settings.streams)
        if releasing and not settings.ledger_create_if_missing and not settings.resolved_ledger_path.exists():
            raise StartupError(_missing_ledger(settings))
    for zone in ("public", "operator"):
        _check_port(getattr(settings, f"{zone}_host"), getattr(settings, f"{zone}_port"), zone)


def worker_directories(settings: Settings) -> list[tuple[Path, str]]:
    """The directories a worker creates where missing, each with the setting that names it."""
    directories = [(settings.data_dir, "data_dir")]
    if settings.store_backend == "sqlite":
        directories += [
            (settings.resolved_state_path.parent, "state_path"),
            (settings.resolved_ledger_path.parent, "ledger_path"),
        ]
    return directories


def directory_problem(path: Path) -> str | None:
    """Why a worker could not create (or write) the directory ``path``, or None; creates nothing: the
    nearest existing directory on its way must be writable.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> directory_problem(folder / "var" / "state"), (folder / "var").exists()
    (None, False)
    >>> (folder / "a-file").write_text("")
    0
    >>> directory_problem(folder / "a-file" / "var")  # doctest: +ELLIPSIS
    '.../a-file is not a directory'
    """
    existing = path.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable by this user"
    return None


def port_problem(host: str, port: int) -> str | None:
    """Why a listener could not bind ``host:port`` (out of range, in use, ...), or None: binds and
    releases the address as a listener will (address reuse on).

    >>> port_problem("127.0.0.1", 99999)
    'is not a port (1 to 65535)'
    >>> with socket.socket() as taken:
    ...     taken.bind(("127.0.0.1", 0)); taken.listen()
    ...     port_problem("127.0.0.1", taken.getsockname()[1])
    'is in use'
    """
    if not 1 <= port <= 65535:
        return "is not a port (1 to 65535)"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        return "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror or exc})"
    return None


def _check_port(host: str, port: int, zone: str) -> None:
    why = port_problem(host, port)
    if why is not None:
        raise StartupError(
            f"the {zone} listener's address {host}:{port} {why}: set {setting_names(f'{zone}_port')} "
            f"(or --{zone}-port) to a free port, or {setting_names(f'{zone}_host')}"
        )


def _where(settings: Settings) -> str:
    if settings.store_backend == "postgresql":
        return f"the privacy ledger in the database of store_url {settings.store_url}"
    return f"the privacy ledger {settings.resolved_ledger_path}"


def _location(settings: Settings) -> str:
    """The setting that says where the ledger is."""
    return "ledger_path" if settings.ledger_path or settings.store_url is None else "store_url"


def _missing_ledger(settings: Settings) -> str:
    return (
        f"{_where(settings)} does not exist: on the first start of a deployment set "
        "ledger_create_if_missing = true in the config file (or "
        f"{ENV_PREFIX}LEDGER_CREATE_IF_MISSING=true), then remove it (a new ledger resets every "
        f"budget); else point {setting_names(_location(settings))} at the deployment's ledger"
    )


def ledger_startup_error(exc: LedgerError, settings: Settings) -> StartupError:
    """The one line for a ledger the worker could not open, naming the setting to change."""
    from privstream.agents.ledger_port import (
        LedgerBusyError,
        LedgerCorruptError,
        LedgerMissingError,
        LedgerUnavailableError,
    )

    where, location = _where(settings), _location(settings)
    if isinstance(exc, LedgerMissingError):
        return StartupError(_missing_ledger(settings))
    if isinstance(exc, LedgerCorruptError):
        return StartupError(
            f"{where} is not usable ({exc}): point {setting_names(location)} at the deployment's "
            "ledger (never replace a ledger to start afresh: that resets every budget)"
        )
    if isinstance(exc, LedgerUnavailableError):
        return StartupError(
            f"cannot reach {where} ({exc}): check store_url, store_password (or "
            "store_password_file), store_sslmode and store_sslrootcert"
        )
    if isinstance(exc, LedgerBusyError):
        return StartupError(f"{where} stayed locked by another process ({exc}); start the worker again")
    return StartupError(f"cannot open {where}: {exc}")
