"""``privstream bench ledger``: charges per second of each ledger backend, side by side.

For each backend asked for (``sqlite``, ``postgresql``) and each number of concurrent writers
(1, 4, 16 by default), writer *processes* (each with its own ledger, hence its own connection or
pool) wait at a barrier and then charge for ``seconds``; the result is the total number of
charges per second of wall time. Two workloads:

* ``shared_stream``: every writer charges the same stream, the worst case: every charge of a
  stream updates its one budget row, so the charges of a stream are serialised on any backend;
* ``stream_per_writer``: each writer charges its own stream (several streams on one ledger).

Each measurement gets a fresh ledger (a new SQLite file; a new PostgreSQL database, on a throwaway
server started here unless ``--url`` names one; the bench then creates and drops databases named
``privstream_bench_*`` there and never touches any other). A charge stores a 1,000-byte release,
fsynced on both backends. The backends are measured in turn for each workload and writer count,
so that both see the same minute of a shared, noisy machine: compare them within one run.

**Per-user charges.** A user-level release charges every user present in its node,
in the reservation's one transaction. For each number of users per release (10^4, 10^5, 10^6 by
default) one process reserves ``user_releases`` user-level nodes of the same users on a fresh
ledger: the first release inserts every user's spend, the next ones read and update them; the
figure is users charged per second (and seconds per release), first and later releases apart.
"""

from __future__ import annotations

import multiprocessing as mp
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from privstream.stream_app.store.ledger import SqlLedger

RELEASE = bytes(1000)
BUDGET = 1e12  # never exhausted: refusals are not what is measured


@dataclass(frozen=True)
class LedgerTarget:
    """How a writer process opens the ledger under test (picklable: it crosses to the children)."""

    kind: str  # "sqlite" | "postgresql"
    location: str  # a file path or a URL
    password: str | None = None
    sslmode: str | None = None
    sslrootcert: str | None = None

    def open(
        self, *, create: bool = False, budgets: dict[str, tuple[float, float]] | None = None
    ) -> SqlLedger:
        if self.kind == "sqlite":
            from privstream.stream_app.store.sqlite_ledger import SqliteLedger

            return SqliteLedger.open(self.location, create_if_missing=create, budgets=budgets)
        from privstream.stream_app.store.postgres_ledger import PostgresConfig, PostgresLedger

        config = PostgresConfig(
            self.location,
            password=self.password,
            sslmode=self.sslmode,
            sslrootcert=self.sslrootcert,
            pool_size=1,
        )
        return PostgresLedger.open(config, create_if_missing=create, budgets=budgets)


def _stream_of(workload: str, writer: int) -> str:
    return "shared" if workload == "shared_stream" else f"stream-{writer}"


def _writer(
    target: LedgerTarget, workload: str, writer: int, seconds: float, start: Any, results: Any
) -> None:
    try:
        ledger = target.open()
        stream = _stream_of(workload, writer)
        ledger.charge(stream, f"warm-{writer}", "bench", 0, 0, RELEASE)  # connect, prepare
        start.wait()
        count = 0
        began = time.monotonic()
        deadline = began + seconds
        while time.monotonic() < deadline:
            ledger.charge(stream, f"w{writer}-{count}", "bench", 0.001, 0.0, RELEASE)
            count += 1
        results.put((count, began, time.monotonic()))
        ledger.close()
    except BaseException as exc:  # report it: the parent must not wait for a result that never comes
        results.put(exc)


def measure_user_charges(target: LedgerTarget, users: int, releases: int) -> dict[str, float]:
    """Users charged per second by user-level reservations of ``users`` users each (one process)."""
    from privstream.agents.ledger_port import NodeRange, PrivacyCost

    population = [f"user-{i:07d}" for i in range(users)]
    ledger = target.open()
    try:
        seconds = []
        for w in range(releases):
            began = time.perf_counter()
            reservation = ledger.reserve(
                "users",
                f"t60-L0-{w}",
                "bench",
                0.001,
                0.0,
                NodeRange.of(0, w),
                users=population,
                user_budget=PrivacyCost(BUDGET, 0.0),
            )
            seconds.append(time.perf_counter() - began)
            included = reservation.included_users
            if included is None or len(included) != users:
                raise RuntimeError("the bench's users were not all charged")
    finally:
        ledger.close()
    later = seconds[1:] or seconds
    return {
        "first_release_users_per_second": round(users / seconds[0], 1),
        "later_releases_users_per_second": round(users * len(later) / sum(later), 1),
        "first_release_seconds": round(seconds[0], 3),
        "later_release_seconds": round(sum(later) / len(later), 3),
    }


def measure(target: LedgerTarget, workload: str, writers: int, seconds: float) -> float:
    """Charges per second of ``writers`` processes charging ``target`` for ``seconds``."""
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(writers)
    results = ctx.Queue()
    children = [
        ctx.Process(target=_writer, args=(target, workload, w, seconds, start, results))
        for w in range(writers)
    ]
    for child in children:
        child.start()
    outcomes = [results.get(timeout=300 + seconds) for _ in children]
    for child in children:
        child.join(60)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    if errors:
        raise RuntimeError(f"a writer failed: {errors[0]!r}") from errors[0]
    total = sum(count for count, _, _ in outcomes)
    wall = max(end for _, _, end in outcomes) - min(began for _, began, _ in outcomes)
    return total / wall


# --------------------------------------------------------------------------- backends


Fresh = Callable[[], Iterator[LedgerTarget]]


@contextmanager
def fresh_sqlite() -> Iterator[LedgerTarget]:
    directory = Path(tempfile.mkdtemp(prefix="privstream-bench-"))
    try:
        yield LedgerTarget("sqlite", str(directory / "ledger.sqlite3"))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def postgres_databases(
    url: str | None, password: str | None, sslmode: str | None = None, sslrootcert: str | None = None
) -> Iterator[Callable[[], Any]]:
    """A factory of fresh databases (context managers of targets) on ``url``'s server, or on a
    throwaway server started here when ``url`` is None."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from privstream.stream_app.store.pg_server import PostgresServer

    server = None
    if url is None:
        server = PostgresServer().start()
        url, password = server.url(), server.password
    extra = {
        k: v
        for k, v in {"password": password, "sslmode": sslmode, "sslrootcert": sslrootcert}.items()
        if v is not None
    }
    admin_url = make_conninfo(url, **extra)

    @contextmanager
    def fresh() -> Iterator[LedgerTarget]:
        name = f"privstream_bench_{secrets.token_hex(4)}"
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        params = conninfo_to_dict(url)
        host = params.get("host", "localhost")
        port = params.get("port", "5432")
        user = params.get("user")
        query = urlsplit(url).query if url.startswith(("postgresql://", "postgres://")) else ""
        location = f"postgresql://{f'{user}@' if user else ''}{host}:{port}/{name}"
        location += f"?{query}" if query else ""  # TLS and other libpq parameters of --url
        try:
            yield LedgerTarget("postgresql", location, password, sslmode, sslrootcert)
        finally:
            with psycopg.connect(admin_url, autocommit=True) as admin:
                admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    try:
        yield fresh
    finally:
        if server is not None:
            server.stop()


#: The workloads measured (the per-user charges are measured apart, up to 10^6 users).
WORKLOADS = ("shared_stream", "stream_per_writer")


def run_ledger_benchmark(
    stores: Sequence[str],
    *,
    url: str | None = None,
    password: str | None = None,
    sslmode: str | None = None,
    sslrootcert: str | None = None,
    writers: Sequence[int] = (1, 4, 16),
    seconds: float = 3.0,
    workloads: Sequence[str] = WORKLOADS,
    users_per_release: Sequence[int] = (10_000, 100_000, 1_000_000),
    user_releases: int = 2,
) -> dict[str, Any]:
    """Charges per second, ``{"results": {store: {workload: {writers: rate}}}, ...}``, the
    PostgreSQL/SQLite ratios when both stores were measured, and per-user charges per second
    (``"per_user": {store: {users: figures}}``)."""
    results: dict[str, dict[str, dict[str, float]]] = {}
    per_user: dict[str, dict[str, dict[str, float]]] = {}
    with contextmanager_for_stores(stores, url, password, sslmode, sslrootcert) as fresh_by_store:
        for users in users_per_release:
            for store in stores:
                with fresh_by_store[store]() as target:
                    target.open(create=True, budgets={"users": (BUDGET, 0.0)}).close()
                    per_user.setdefault(store, {})[str(users)] = measure_user_charges(
                        target, users, user_releases
                    )
        # Backends interleaved per measurement, so both see the machine's noise of the same minute.
        for workload in workloads:
            for count in writers:
                for store in stores:
                    with fresh_by_store[store]() as target:
                        budgets = {_stream_of(workload, w): (BUDGET, 0.0) for w in range(count)}
                        target.open(create=True, budgets=budgets).close()
                        rate = measure(target, workload, count, seconds)
                    results.setdefault(store, {}).setdefault(workload, {})[str(count)] = round(rate, 1)
    summary: dict[str, Any] = {
        "unit": "charges per second (all writers together)",
        "seconds": seconds,
        "release_bytes": len(RELEASE),
        "results": results,
    }
    if "sqlite" in results and "postgresql" in results:
        summary["postgresql_over_sqlite"] = {
            workload: {
                n: round(results["postgresql"][workload][n] / results["sqlite"][workload][n], 2)
                for n in results["sqlite"][workload]
            }
            for workload in workloads
        }
    summary["per_user"] = per_user
    summary["per_user_unit"] = "users charged per second by one user-level reservation (one process)"
    return summary


@contextmanager
def contextmanager_for_stores(
    stores: Sequence[str],
    url: str | None,
    password: str | None,
    sslmode: str | None,
    sslrootcert: str | None,
) -> Iterator[dict[str, Callable[[], Any]]]:
    unknown = set(stores) - {"sqlite", "postgresql"}
    if unknown:
        raise ValueError(f"unknown store {sorted(unknown)}: use sqlite or postgresql")
    if "postgresql" not in stores:
        yield {"sqlite": fresh_sqlite}
        return
    with postgres_databases(url, password, sslmode, sslrootcert) as fresh_pg:
        yield {"sqlite": fresh_sqlite, "postgresql": fresh_pg}
