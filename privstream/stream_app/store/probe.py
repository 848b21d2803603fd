"""Is the store reachable? A probe for the operator listener's ``/readyz``.

A worker whose database does not answer cannot buffer windows, charge or release: it should leave
the load balancer's and the orchestrator's set of ready workers (Kubernetes stops counting it as
available) until the database is back, without being restarted (a restart would not bring the
database back). The probe pings with a fresh short-lived connection, not through the stores'
pools, whose transactions retry for ``store_retry_seconds`` and would hide an outage.

>>> probe = StoreProbe(lambda: None, stale_seconds=60)
>>> probe.readiness()
(False, 'the store has not been checked yet')
>>> probe.check()
True
>>> probe.readiness()
(True, 'ok')
>>> def down() -> None:
...     raise OSError("connection refused")
>>> probe = StoreProbe(down, stale_seconds=60)
>>> probe.check(), probe.readiness()
(False, (False, 'the store does not answer: connection refused'))
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privstream.agents.ledger_port import LedgerIdentity
from privstream.stream_app.settings import Settings

log = logging.getLogger(__name__)

#: Seconds a ping may take before the store counts as unreachable.
PING_TIMEOUT_SECONDS = 3.0


def store_ping(settings: Settings, ledger: LedgerIdentity | None = None) -> Callable[[], None]:
    """A function that raises unless the settings' store answers a trivial query and, given the
    ``ledger`` this worker started on, unless that ledger is still there: the same ledger (its
    id), not an older copy (its epoch). A ledger deleted or replaced under a running worker takes
    the worker out of service with the reason."""
    if settings.store_backend == "postgresql":
        import psycopg

        from privstream.stream_app.store.factory import postgres_config

        config = postgres_config(settings)

        def ping_postgres() -> None:
            conninfo = config.conninfo()
            with psycopg.connect(conninfo, connect_timeout=max(1, round(PING_TIMEOUT_SECONDS))) as conn:
                conn.execute("SELECT 1").fetchall()
                if ledger is not None:
                    try:
                        found = conn.execute("SELECT ledger_id, epoch FROM ledger_identity").fetchone()
                    except psycopg.errors.UndefinedTable:
                        found = None
                    _same_ledger(f"in {config.display}", ledger, found)

        return ping_postgres
    state_path, ledger_path = settings.resolved_state_path, settings.resolved_ledger_path

    def ping_sqlite() -> None:
        _read_only(state_path, "SELECT count(*) FROM sqlite_master")
        if ledger is not None:
            found = None
            if ledger_path.exists():
                found = _read_only(ledger_path, "SELECT ledger_id, epoch FROM identity")[0]
            _same_ledger(str(ledger_path), ledger, found)

    return ping_sqlite


def _read_only(path: Path, query: str) -> list[Any]:
    # Read-only, without creating anything: a missing or unmounted volume is an error.
    with sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=PING_TIMEOUT_SECONDS) as db:
        rows = db.execute(query).fetchall()
    db.close()
    return rows


def _same_ledger(where: str, started_on: LedgerIdentity, found: tuple[str, int] | None) -> None:
    if found is None:
        raise LedgerGoneError(
            f"the privacy ledger {where} is gone (this worker started on ledger {started_on.ledger_id})"
        )
    ledger_id, epoch = found
    if ledger_id != started_on.ledger_id:
        raise LedgerGoneError(
            f"the privacy ledger {where} was replaced: it is ledger {ledger_id}, this worker started on "
            f"ledger {started_on.ledger_id}"
        )
    if int(epoch) < started_on.epoch:
        raise LedgerGoneError(
            f"the privacy ledger {where} was replaced by an older copy (epoch {epoch}, this worker "
            f"started at epoch {started_on.epoch})"
        )


class LedgerGoneError(RuntimeError):
    """The ledger this worker started on is no longer where it was."""


class StoreProbe:
    """The outcome of the last :meth:`check`; not ready when it failed or is older than
    ``stale_seconds`` (a ping that hangs counts as a failure)."""

    def __init__(self, ping: Callable[[], None], stale_seconds: float = 20.0) -> None:
        self.ping = ping
        self.stale_seconds = stale_seconds
        self._lock = threading.Lock()
        self._ok_at: float | None = None
        self._error: str | None = None

    def check(self) -> bool:
        """Ping once (blocking: call it from a thread); whether the store answered."""
        try:
            self.ping()
        except Exception as exc:  # whatever the driver raises: the store did not answer
            error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            with self._lock:
                logged, self._error = self._error, error
            if error != logged:  # once per cause, not at every probe
                log.error("not ready: %s", self.describe(error))
            return False
        with self._lock:
            if self._error is not None:
                log.info("ready again: the store answers")
            self._ok_at, self._error = time.monotonic(), None
        return True

    @staticmethod
    def describe(error: str) -> str:
        return error if error.startswith("the privacy ledger") else f"the store does not answer: {error}"

    def readiness(self) -> tuple[bool, str]:
        with self._lock:
            ok_at, error = self._ok_at, self._error
        if error is not None:
            return False, self.describe(error)
        if ok_at is None:
            return False, "the store has not been checked yet"
        if time.monotonic() - ok_at > self.stale_seconds:
            return False, f"the store has not answered for {time.monotonic() - ok_at:.0f} s"
        return True, "ok"
