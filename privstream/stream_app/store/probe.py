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

import sqlite3
import threading
import time
from collections.abc import Callable

from privstream.stream_app.settings import Settings

#: Seconds a ping may take before the store counts as unreachable.
PING_TIMEOUT_SECONDS = 3.0


def store_ping(settings: Settings) -> Callable[[], None]:
    """A function that raises unless the settings' store answers a trivial query."""
    if settings.store_backend == "postgresql":
        import psycopg

        from privstream.stream_app.store.factory import postgres_config

        config = postgres_config(settings)

        def ping_postgres() -> None:
            conninfo = config.conninfo()
            with psycopg.connect(conninfo, connect_timeout=max(1, round(PING_TIMEOUT_SECONDS))) as conn:
                conn.execute("SELECT 1").fetchall()

        return ping_postgres
    path = settings.resolved_state_path

    def ping_sqlite() -> None:
        # Read-only, without creating anything: a missing or unmounted volume is an error.
        with sqlite3.connect(
            f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=PING_TIMEOUT_SECONDS
        ) as db:
            db.execute("SELECT count(*) FROM sqlite_master").fetchall()
        db.close()

    return ping_sqlite


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
            with self._lock:
                self._error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return False
        with self._lock:
            self._ok_at, self._error = time.monotonic(), None
        return True

    def readiness(self) -> tuple[bool, str]:
        with self._lock:
            ok_at, error = self._ok_at, self._error
        if error is not None:
            return False, f"the store does not answer: {error}"
        if ok_at is None:
            return False, "the store has not been checked yet"
        if time.monotonic() - ok_at > self.stale_seconds:
            return False, f"the store has not answered for {time.monotonic() - ok_at:.0f} s"
        return True, "ok"
