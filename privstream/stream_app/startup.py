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

__all__ = ["StartupError", "check_before_start", "ledger_startup_error", "port_problem", "setting_names"]


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
    ledger does not exist (before a broker is started for nothing; the store checks it again)."""
    _check_directory(settings.data_dir, "data_dir")
    if settings.store_backend == "sqlite":
        _check_directory(settings.resolved_state_path.parent, "state_path")
        releasing = any(s.release is not None for s in settings.streams)
        if releasing and not settings.ledger_create_if_missing and not settings.resolved_ledger_path.exists():
            raise StartupError(_missing_ledger(settings))
    for zone in ("public", "operator"):
        _check_port(getattr(settings, f"{zone}_host"), getattr(settings, f"{zone}_port"), zone)


def _check_directory(path: Path, setting: str) -> None:
    from privstream.stream_app.store.private_files import private_directory

    try:
        if setting == "data_dir":
            private_directory(path)  # 0700: the ledger's seeds and the raw examples live there
        else:
            path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StartupError(
            f"cannot create the directory {path} ({exc.strerror or exc}): set {setting_names(setting)} "
            "to a directory this worker may write"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise StartupError(
            f"the directory {path} is not writable by this worker: set {setting_names(setting)} "
            "to a directory it may write"
        )


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
