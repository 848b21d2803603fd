"""``privstream bench faults``: several workers on a shared store, killed and cut, must lose nothing.

The scenario: ``--workers`` worker *processes* (``privstream worker``) share one store
(``--store sqlite``: the SQLite files in one directory of this host; ``--store postgresql``: a
throwaway PostgreSQL server started here) and consume the examples topic of the embedded broker as
one consumer group. A producer sends ``--examples`` single-example messages over ``--streams``
streams (each on its own partition) at ``--rate`` per second; every stream releases count windows
of ``--window`` examples. While the producer runs:

* every ``--kill-every`` seconds one worker (in turn) is SIGKILLed and at once started again (a
  new process, which rejoins the group; its partitions move in two rebalances);
* once, half way between two kills, the database connection is cut. PostgreSQL: every connection
  of the workers is ended from an administrator's connection (``pg_terminate_backend``); their
  pools reconnect and rerun the transaction that was in flight. SQLite has no connection to cut
  (each process opens the files itself): there the nearest fault, the database not answering, is
  made by holding the write lock of both files for ``CUT_SECONDS`` (every writer waits on it).

Then the bench waits until every complete window is charged and published, reads the ledger, the
public ``hypotheses`` topic and the trusted ``predictions`` topic, and prints

* ``examples_sent``, ``examples_learned`` (distinct sent examples the online learner predicted and
  learned, at least once: the predictions name each example's source partition and offset);
* ``windows_expected`` (complete windows: each stream's examples // window), ``windows_released``
  (distinct windows on the public topic), ``duplicate_releases`` (a window published as more than one
  distinct release: different bytes or ledger entries), ``double_charges`` (ledger entries beyond
  one per window: a key charged twice, or more windows charged than there are);
* ``ledger_matches_certificates``: every record on the public topic is, byte for byte, a ledger
  entry's stored release with that entry's ε; every ledger entry was published; each stream's
  charges add up to the sum of its certificates' ε;
* ``seconds`` (first message sent to the last window published), and what happened: the kills, how
  long each restarted worker took to rejoin the group (``rejoin_seconds``, kill to ``/readyz`` ready:
  the embedded broker's group joins are slow), the cut, and ``republished_copies`` (identical
  copies of a release published again after a kill between its publication and its outbox mark:
  at-least-once delivery of the same bytes, which subscribers recognise by the ledger entry id).

Targets: ``duplicate_releases == double_charges == 0``, ``windows_released == windows_expected``,
``ledger_matches_certificates``, ``examples_learned == examples_sent``; :func:`targets_met`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.partitioner import murmur2
from pydantic import SecretStr

from privstream.learning.errors import InvariantError
from privstream.stream_app.embedded.broker import EmbeddedBroker, free_listener_ports
from privstream.stream_app.embedded.demo import WorkerProcess, fetch_json
from privstream.stream_app.kafka.clients import client_options, ensure_topics
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.signing import shared_key_file
from privstream.stream_app.store import factory

CLASS = "thresholds:4096"
EPSILON = 0.5
BUDGET = 1_000_000.0  # never exhausted: refusals are not what is measured
#: SQLite's stand-in for a cut connection: both files' write locks held this long.
CUT_SECONDS = 5.0
READY = {"status": "ready", "reason": "ok"}


def streams_on_distinct_partitions(count: int, partitions: int) -> list[str]:
    """``count`` stream ids whose keys the default partitioner (murmur2, as aiokafka's and Java's
    producers) puts on distinct partitions, so every worker gets load.

    >>> names = streams_on_distinct_partitions(4, 4)
    >>> sorted((murmur2(n.encode()) & 0x7FFFFFFF) % 4 for n in names)
    [0, 1, 2, 3]
    """
    if count > partitions:
        raise ValueError("more streams than partitions")
    chosen: dict[int, str] = {}
    i = 0
    while len(chosen) < count:
        name = f"faults-{i}"
        chosen.setdefault((murmur2(name.encode()) & 0x7FFFFFFF) % partitions, name)
        i += 1
    return sorted(chosen.values())


def messages(streams: list[str], n: int, seed: int = 0) -> list[tuple[str, bytes]]:
    """``n`` single-example messages of realizable threshold streams, the streams in turn."""
    rng = np.random.default_rng(seed)
    xs = rng.integers(0, 4096, n).tolist()
    return [
        (
            streams[i % len(streams)],
            b'{"stream_id":"%s","x":%d,"y":%d}' % (streams[i % len(streams)].encode(), x, x >= 2048),
        )
        for i, x in enumerate(xs)
    ]


def say(text: str) -> None:
    print(f"[bench faults {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


@dataclass
class Options:
    workers: int = 3
    store: str = "postgresql"
    examples: int = 200_000
    streams: int = 12
    window: int = 2000
    rate: float = 2500.0  # examples per second from the producer
    kill_every: float = 20.0
    timeout: float = 900.0  # for the convergence after the producer finished
    seed: int = 0


@dataclass
class Run:
    """What happened, for the report."""

    kills: list[dict[str, Any]] = field(default_factory=list)
    cut: dict[str, Any] | None = None


class Cluster:
    """The workers: start, SIGKILL and restart them; each restart gets fresh listener ports."""

    def __init__(self, base: Settings, workdir: Path, count: int):
        self.base = base
        self.workdir = workdir
        self.workers: list[WorkerProcess] = []
        self.generation = 0
        for i in range(count):
            self.workers.append(self._start(i))

    def _start(self, i: int) -> WorkerProcess:
        self.generation += 1
        settings = self.base.model_copy(
            update={"data_dir": self.workdir / f"worker-{i}", **free_listener_ports()}
        )
        log = self.workdir / f"worker-{i}.{self.generation}.log"
        return WorkerProcess(settings, log).start()

    def ready(self, worker: WorkerProcess) -> bool:
        return fetch_json(f"{worker.operator_url}/readyz") == READY

    def kill_and_restart(self, i: int) -> WorkerProcess:
        old = self.workers[i]
        if old.process is None:
            raise InvariantError(f"invariant broken: worker {i} runs before it is killed")
        old.process.send_signal(signal.SIGKILL)
        old.process.wait(30)
        old.process = None
        self.workers[i] = self._start(i)
        return self.workers[i]

    def check_alive(self) -> None:
        for worker in self.workers:
            if not worker.alive():
                raise RuntimeError(
                    f"a worker exited by itself; its log: {worker.log_path}\n"
                    + worker.log_path.read_text(errors="replace")[-3000:]
                )

    def stop(self) -> list[int | None]:
        return [worker.stop() for worker in self.workers]


# --------------------------------------------------------------------------- the store


@contextlib.contextmanager
def shared_store(kind: str, workdir: Path) -> Iterator[tuple[dict[str, Any], Any]]:
    """The settings that point every worker at one store, and a function that cuts it once."""
    if kind == "sqlite":
        directory = workdir / "shared"
        directory.mkdir()

        def cut() -> dict[str, Any]:
            # No connection to cut: the database stops answering instead (every writer waits).
            connections = []
            for name in ("ledger.sqlite3", "state.sqlite3"):
                db = sqlite3.connect(directory / name, timeout=30, isolation_level=None)
                db.execute("BEGIN IMMEDIATE")
                connections.append(db)
            time.sleep(CUT_SECONDS)
            for db in connections:
                db.execute("ROLLBACK")
                db.close()
            return {"kind": "sqlite write lock held (no connection to cut)", "seconds": CUT_SECONDS}

        yield {"store_url": f"sqlite:///{directory}"}, cut
        return
    if kind != "postgresql":
        raise ValueError(f"unknown store {kind!r}: use sqlite or postgresql")
    from privstream.stream_app.store.pg_server import PostgresServer

    with PostgresServer() as server:
        name = f"faults_{secrets.token_hex(4)}"
        url = server.create_database(name)

        def cut() -> dict[str, Any]:
            with server.connect() as admin:  # to the "postgres" database: not one of those cut
                rows = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (name,),
                ).fetchall()
            return {
                "kind": "pg_terminate_backend of every connection to the database",
                "connections": sum(1 for (ended,) in rows if ended),
            }

        yield {"store_url": url, "store_password": SecretStr(server.password)}, cut


# --------------------------------------------------------------------------- Kafka


async def produce(
    settings: Settings, batch: list[tuple[str, bytes]], rate: float, sent: list[tuple[int, int]]
) -> None:
    """Send ``batch`` at ``rate`` per second; appends each message's (partition, offset) to ``sent``."""
    producer = AIOKafkaProducer(**client_options(settings), linger_ms=5, acks="all", max_batch_size=1 << 20)
    await producer.start()
    topic, tick, futures = settings.topic("examples"), 0.05, []
    try:
        t0, done = time.perf_counter(), 0
        while done < len(batch):
            due = min(len(batch), int((time.perf_counter() - t0 + tick) * rate))
            for key, value in batch[done:due]:
                futures.append(await producer.send(topic, value, key=key.encode()))
            done = max(done, due)
            await asyncio.sleep(max(0.0, t0 + done / rate - time.perf_counter()))
        for metadata in await asyncio.gather(*futures):
            sent.append((metadata.partition, metadata.offset))
    finally:
        await producer.stop()


async def read_topic(settings: Settings, topic: str, enough: Any, timeout: float) -> list[Any]:
    """Every record of ``topic`` from the beginning, until ``enough(records)`` and the topic has been
    quiet for a second (so extra copies are read too), or ``timeout``."""
    consumer = AIOKafkaConsumer(
        topic,
        **client_options(settings),
        group_id=f"bench-{uuid.uuid4().hex}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    records: list[Any] = []
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            polled = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            for batch in polled.values():
                records.extend(batch)
            if not polled and enough(records):
                break
    finally:
        await consumer.stop()
    return records


def predicted_positions(records: list[Any]) -> set[tuple[int, int]]:
    seen: set[tuple[int, int]] = set()
    for record in records:
        batch = json.loads(record.value)
        seen.update((batch["source_partition"], offset) for offset in batch["source_offsets"])
    return seen


def read_outputs(base: Settings, releases: int, sent: Iterable[Any]) -> tuple[list[Any], int]:
    """The public topic's records once ``releases`` distinct releases are on it, and how many of
    the ``sent`` positions have their prediction on the predictions topic."""
    public = asyncio.run(
        read_topic(
            base,
            base.topic("hypotheses"),
            lambda records: len({r.value for r in records}) >= releases,
            timeout=120,
        )
    )
    positions = set(sent)
    predictions = asyncio.run(
        read_topic(
            base,
            base.topic("predictions"),
            lambda records: positions <= predicted_positions(records),
            timeout=300,
        )
    )
    return public, len(positions & predicted_positions(predictions))


# --------------------------------------------------------------------------- the audit


def audit_releases(
    records: list[Any], ledger: Any, streams: list[str], expected: dict[str, int]
) -> dict[str, Any]:
    """The public topic against the ledger (see the module docstring for each figure)."""
    entries = {s: ledger.entries(s) for s in streams}
    by_entry = {c.public_id: c for charges in entries.values() for c in charges}
    matches = True
    published: dict[str, bytes] = {}  # ledger entry id -> the bytes published under it
    releases_of_window: dict[tuple[str, str], set[bytes]] = defaultdict(set)
    epsilon_on_topic: dict[str, float] = defaultdict(float)
    for record in records:
        release = json.loads(record.value)
        certificate = release["certificate"]
        entry = by_entry.get(str(certificate["ledger_entry_id"]))
        if (
            entry is None
            or entry.release != record.value
            or abs(entry.epsilon - certificate["epsilon"]) > 1e-12
        ):
            matches = False  # published bytes that the ledger does not hold, or another cost
        key = (release["stream_id"], certificate["window"]["window_id"])
        releases_of_window[key].add(record.value)
        if str(certificate["ledger_entry_id"]) not in published:  # a copy is not a second release
            epsilon_on_topic[release["stream_id"]] += certificate["epsilon"]
        published[str(certificate["ledger_entry_id"])] = record.value
    unpublished = [c for charges in entries.values() for c in charges if c.public_id not in published]
    matches = matches and not unpublished and not ledger.unpublished()
    for s in streams:  # what the ledger charged is what the certificates state (ledger.spent is
        # the lifetime spend per example, a max over windows, so the charges are summed here)
        if abs(sum(c.epsilon for c in entries[s]) - epsilon_on_topic[s]) > 1e-9:
            matches = False
    double = 0
    for s, charges in entries.items():
        windows = {(c.window_id, c.mechanism) for c in charges}
        double += len(charges) - len(windows) + max(0, len(windows) - expected[s])
    return {
        "windows_released": len(releases_of_window),
        "duplicate_releases": sum(len(v) - 1 for v in releases_of_window.values()),
        "double_charges": double,
        "ledger_matches_certificates": matches,
        "republished_copies": len(records) - len({r.value for r in records}),
        "ledger_entries": sum(len(c) for c in entries.values()),
    }


def targets_met(result: dict[str, Any]) -> bool:
    """The issue's targets for the fault benchmark."""
    return (
        result["duplicate_releases"] == 0
        and result["double_charges"] == 0
        and result["windows_released"] == result["windows_expected"]
        and result["ledger_matches_certificates"] is True
        and result["examples_learned"] == result["examples_sent"]
    )


# --------------------------------------------------------------------------- the run


def run_faults_benchmark(options: Options) -> dict[str, Any]:
    """Run the scenario of the module docstring; the figures as a dict."""
    if options.workers < 1 or options.streams < 1 or options.examples < 1 or options.window < 1:
        raise ValueError("--workers, --streams, --examples and --window must be >= 1")
    names = streams_on_distinct_partitions(options.streams, options.streams)
    batch = messages(names, options.examples, options.seed)
    per_stream = {s: sum(1 for key, _ in batch if key == s) for s in names}
    expected = {s: n // options.window for s, n in per_stream.items()}
    happened = Run()
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="privstream-faults-")))
        broker = stack.enter_context(EmbeddedBroker(log_path=workdir / "broker.log"))
        store_settings, cut = stack.enter_context(shared_store(options.store, workdir))
        run_id = secrets.token_hex(4)
        release = ReleaseConfig(
            window=WindowConfig(size=options.window), epsilon=EPSILON, epsilon_budget=BUDGET
        )
        base = Settings(
            app_id=f"privstream-faults-{run_id}",
            topic_prefix=f"faults-{run_id}.",
            kafka_bootstrap=broker.bootstrap,
            topic_partitions=options.streams,
            kafka_session_timeout_seconds=10,
            data_dir=workdir / "data",
            # One deployment key for every worker (their data folders differ), as a mounted secret.
            signing_key_file=shared_key_file(workdir / "signing_key.pem"),
            streams=[StreamConfig(name=s, hypothesis_class=CLASS, release=release) for s in names],
            _env_file=None,
            **store_settings,
        )
        # The ledger is created once, here; the workers only open it (as in production).
        ledger = factory.open_ledger(
            base.model_copy(update={"ledger_create_if_missing": True}), {s: (BUDGET, 0.0) for s in names}
        )
        stack.callback(ledger.close)
        asyncio.run(ensure_topics(base))
        say(
            f"{options.workers} workers on {options.store}, broker {broker.bootstrap}, "
            f"{options.examples} examples over {options.streams} streams, windows of {options.window}"
        )
        cluster = Cluster(base, workdir, options.workers)
        stack.callback(cluster.stop)
        wait(lambda: all(cluster.ready(w) for w in cluster.workers), 300, "every worker ready", cluster)
        say("every worker has partitions; producing")

        sent: list[tuple[int, int]] = []
        producer = threading.Thread(target=lambda: asyncio.run(produce(base, batch, options.rate, sent)))
        started = time.monotonic()
        producer.start()
        next_kill, victim = started + options.kill_every, 0
        cut_at = started + 1.5 * options.kill_every
        last_line = 0.0
        while producer.is_alive():
            now = time.monotonic()
            if now >= next_kill:
                fresh = cluster.kill_and_restart(victim)
                happened.kills.append(
                    {
                        "worker": victim,
                        "at_seconds": round(now - started, 1),
                        "pid": fresh.process.pid if fresh.process else None,
                        "rejoin_seconds": None,
                    }
                )
                say(f"SIGKILLed worker {victim} and started it again")
                victim, next_kill = (victim + 1) % options.workers, now + options.kill_every
            if happened.cut is None and now >= cut_at:
                say("cutting the database connection")
                happened.cut = {"at_seconds": round(now - started, 1), **cut()}
                say(f"cut: {happened.cut}")
            track_rejoins(cluster, happened, started)
            if now - last_line > 5:
                last_line = now
                charged = sum(len(ledger.entries(s)) for s in names)
                say(
                    f"producing: {now - started:.0f} s, {charged}/{sum(expected.values())} windows charged, "
                    f"{len(happened.kills)} kills"
                )
            time.sleep(0.2)
        producer.join()
        if happened.cut is None:  # a run shorter than the cut's time: cut now, still under way
            happened.cut = {"at_seconds": round(time.monotonic() - started, 1), **cut()}
        say(f"all {len(sent)} examples sent; waiting for every window to be released")

        def converged() -> bool:
            track_rejoins(cluster, happened, started)
            return all(len(ledger.entries(s)) >= expected[s] for s in names) and not ledger.unpublished()

        wait(
            converged,
            options.timeout,
            "every complete window charged and published",
            cluster,
            progress=lambda: (
                f"{sum(len(ledger.entries(s)) for s in names)}/{sum(expected.values())} "
                f"windows charged, {len(ledger.unpublished())} unpublished"
            ),
        )
        seconds = time.monotonic() - started

        def all_ready() -> bool:  # so that every rejoin is measured
            track_rejoins(cluster, happened, started)
            return all(cluster.ready(w) for w in cluster.workers)

        wait(all_ready, 120, "every worker ready", cluster)
        say("reading the public and the predictions topics")
        total_windows = sum(expected.values())
        public, learned = read_outputs(base, total_windows, sent)
        audit = audit_releases(public, ledger, names, expected)
        exits = cluster.stop()
    rejoin = [k["rejoin_seconds"] for k in happened.kills if k.get("rejoin_seconds") is not None]
    return {
        "examples_sent": len(sent),
        "examples_learned": learned,
        "windows_expected": total_windows,
        "windows_released": audit["windows_released"],
        "duplicate_releases": audit["duplicate_releases"],
        "double_charges": audit["double_charges"],
        "ledger_matches_certificates": audit["ledger_matches_certificates"],
        "seconds": round(seconds, 1),
        "store": options.store,
        "workers": options.workers,
        "streams": options.streams,
        "window": options.window,
        "rate": options.rate,
        "kills": len(happened.kills),
        "rejoin_seconds": rejoin,
        "rejoin_seconds_max": max(rejoin, default=None),
        "database_cut": happened.cut,
        "republished_copies": audit["republished_copies"],
        "ledger_entries": audit["ledger_entries"],
        "worker_exit_codes": exits,
    }


def track_rejoins(cluster: Cluster, happened: Run, started: float) -> None:
    """Record, for each kill, when its restarted worker was ready (had partitions) again."""
    for kill in happened.kills:
        if kill["rejoin_seconds"] is not None or kill.get("killed_again"):
            continue
        worker = cluster.workers[kill["worker"]]
        if worker.process is None or worker.process.pid != kill["pid"]:
            kill["killed_again"] = True  # before it was ready: not measured
        elif cluster.ready(worker):
            kill["rejoin_seconds"] = round(time.monotonic() - started - kill["at_seconds"], 1)


def wait(predicate: Any, timeout: float, what: str, cluster: Cluster, progress: Any = None) -> None:
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    while time.monotonic() < deadline:
        cluster.check_alive()
        if predicate():
            return
        if progress is not None and time.monotonic() - last > 5:
            last = time.monotonic()
            say(f"waiting for {what}: {progress()}")
        time.sleep(0.5)
    raise TimeoutError(
        f"timed out after {timeout:.0f} s waiting for {what}" + (f" ({progress()})" if progress else "")
    )
