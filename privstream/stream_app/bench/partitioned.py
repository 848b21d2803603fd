"""``privstream bench faults --partitioned N``: one stream spread over N partitions and the workers,
killed and cut, must lose nothing and count nothing twice.

The scenario of :mod:`.faults` (worker processes on a shared store, one SIGKILLed and restarted
every ``--kill-every`` seconds, the database cut once), on one stream keyed by example id
(``partition_by = "example"``) over ``N`` partitions, releasing time windows of
``--window-seconds`` (with ``allowed_lateness_seconds`` of :data:`LATENESS`, above a killed
worker's way back, so a partition's rows still reach their window after a kill). Every worker
stores its partitions' rows; the owner of the stream's key partition closes and releases.

Besides the public audit of :mod:`.faults` (``duplicate_releases``, ``double_charges``,
``ledger_matches_certificates``, ``examples_learned``), it prints

* ``windows_released`` and ``windows_contiguous``: the time windows on the public topic, from the
  stream's first to its last, each once and none missing;
* ``examples_stored`` (the stream's sequence numbers in the shared store: one per example taken
  into a window, none for a replay or a late example) against ``examples_sent``, and
  ``rows_left_in_closed_windows`` (rows stored in a window already closed: lost to its node), from
  the store after the run. ``examples_stored == examples_sent`` with no row left means every
  example was stored once and read by its window's one node.

Targets (:func:`targets_met`): all of those, and ``examples_learned == examples_sent``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privstream.stream_app.bench.faults import (
    BUDGET,
    CLASS,
    EPSILON,
    Cluster,
    Run,
    audit_releases,
    produce,
    read_outputs,
    say,
    shared_store,
    track_rejoins,
    wait,
)
from privstream.stream_app.embedded.broker import EmbeddedBroker
from privstream.stream_app.kafka.clients import ensure_topics
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.signing import shared_key_file
from privstream.stream_app.store import factory

STREAM = "spread"
#: Seconds a time window stays open after its end: above a killed worker's partitions' way back
#: to another worker (the group's session timeout of 10 s, then a rebalance and a restart).
LATENESS = 40.0


@dataclass
class PartitionedOptions:
    partitions: int = 6
    workers: int = 3
    store: str = "postgresql"
    examples: int = 30_000
    window_seconds: float = 10.0
    rate: float = 1000.0
    kill_every: float = 15.0
    timeout: float = 600.0
    seed: int = 0


def messages(n: int, seed: int = 0) -> list[tuple[str, bytes]]:
    """``n`` examples of a realizable threshold stream, each with an id, keyed by it."""
    xs = np.random.default_rng(seed).integers(0, 4096, n).tolist()
    return [
        (f"e{i}", b'{"stream_id":"%s","id":"e%d","x":%d,"y":%d}' % (STREAM.encode(), i, x, x >= 2048))
        for i, x in enumerate(xs)
    ]


def window_indexes(records: list[Any]) -> list[int]:
    """The level-0 time windows released on the public topic (distinct, sorted)."""
    ids = {json.loads(r.value)["certificate"]["window"]["window_id"] for r in records}
    return sorted(int(w.rsplit("-", 1)[1]) for w in ids if "-L0-" in w)


def targets_met(result: dict[str, Any]) -> bool:
    return (
        result["duplicate_releases"] == 0
        and result["double_charges"] == 0
        and result["windows_contiguous"] is True
        and result["ledger_matches_certificates"] is True
        and result["examples_learned"] == result["examples_sent"]
        and result["examples_stored"] == result["examples_sent"]
        and result["rows_left_in_closed_windows"] == 0
    )


def run_partitioned_benchmark(options: PartitionedOptions) -> dict[str, Any]:
    """Run the scenario of the module docstring; the figures as a dict."""
    if options.partitions < 1 or options.workers < 1 or options.examples < 1:
        raise ValueError("--partitioned, --workers and --examples must be >= 1")
    batch = messages(options.examples, options.seed)
    happened = Run()
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="privstream-spread-")))
        broker = stack.enter_context(EmbeddedBroker(log_path=workdir / "broker.log"))
        store_settings, cut = stack.enter_context(shared_store(options.store, workdir))
        run_id = secrets.token_hex(4)
        window = WindowConfig(kind="time", seconds=options.window_seconds, allowed_lateness_seconds=LATENESS)
        release = ReleaseConfig(
            window=window,
            epsilon=EPSILON,
            epsilon_budget=BUDGET,
            expected_size=max(1, int(options.rate * options.window_seconds)),
        )
        stream = StreamConfig(name=STREAM, hypothesis_class=CLASS, partition_by="example", release=release)
        base = Settings(
            app_id=f"privstream-spread-{run_id}",
            topic_prefix=f"spread-{run_id}.",
            kafka_bootstrap=broker.bootstrap,
            topic_partitions=options.partitions,
            kafka_session_timeout_seconds=10,
            data_dir=workdir / "data",
            # One deployment key for every worker (their data folders differ), as a mounted secret.
            signing_key_file=shared_key_file(workdir / "signing_key.pem"),
            streams=[stream],
            _env_file=None,
            **store_settings,
        )
        ledger = factory.open_ledger(
            base.model_copy(update={"ledger_create_if_missing": True}), {STREAM: (BUDGET, 0.0)}
        )
        stack.callback(ledger.close)
        asyncio.run(ensure_topics(base))
        say(
            f"{options.workers} workers on {options.store}, one stream over {options.partitions} "
            f"partitions, {options.examples} examples, time windows of {options.window_seconds:g} s"
        )
        cluster = Cluster(base, workdir, options.workers)
        stack.callback(cluster.stop)
        wait(lambda: all(cluster.ready(w) for w in cluster.workers), 300, "every worker ready", cluster)
        sent: list[tuple[int, int]] = []
        producer = threading.Thread(target=lambda: asyncio.run(produce(base, batch, options.rate, sent)))
        started = time.monotonic()
        producer.start()
        next_kill, victim, cut_at = started + options.kill_every, 0, started + 1.5 * options.kill_every
        while producer.is_alive():
            now = time.monotonic()
            if now >= next_kill:
                fresh = cluster.kill_and_restart(victim)
                pid = fresh.process.pid if fresh.process else None
                happened.kills.append(
                    {
                        "worker": victim,
                        "at_seconds": round(now - started, 1),
                        "pid": pid,
                        "rejoin_seconds": None,
                    }
                )
                say(f"SIGKILLed worker {victim} and started it again")
                victim, next_kill = (victim + 1) % options.workers, now + options.kill_every
            if happened.cut is None and now >= cut_at:
                happened.cut = {"at_seconds": round(now - started, 1), **cut()}
                say(f"cut the database: {happened.cut}")
            track_rejoins(cluster, happened, started)
            time.sleep(0.2)
        producer.join()
        if happened.cut is None:
            happened.cut = {"at_seconds": round(time.monotonic() - started, 1), **cut()}
        # Every example's window has closed once the clock passes its end and the lateness.
        closed_by = time.time() + options.window_seconds + LATENESS
        say(f"all {len(sent)} examples sent; waiting until {LATENESS:g} s after the last window")

        def converged() -> bool:
            track_rejoins(cluster, happened, started)
            if time.time() < closed_by + 5 or ledger.unpublished():
                return False
            last = max((int(c.window_id.rsplit("-", 1)[1]) for c in ledger.entries(STREAM)), default=-1)
            return (last + 1) * options.window_seconds >= closed_by - LATENESS

        wait(converged, options.timeout, "every window charged and published", cluster)
        seconds = time.monotonic() - started
        wait(lambda: all(cluster.ready(w) for w in cluster.workers), 120, "every worker ready", cluster)
        # Time windows close for ever, empty ones too: stop the workers (a stop publishes what is
        # charged, at its deadline) so that the ledger and the topic are audited at one point.
        exits = cluster.stop()
        charged = len(ledger.entries(STREAM))
        public, learned = read_outputs(base, charged, sent)
        indexes = window_indexes(public)
        audit = audit_releases(public, ledger, [STREAM], {STREAM: len(indexes)})
        store = factory.open_state_store(base)
        try:
            stored = store.next_seq(STREAM)
            last_closed = max(indexes, default=-1)
            left = sum(
                len(store.time_window(STREAM, w).xs)
                for w in store.pending_time_windows(STREAM)
                if w <= last_closed
            )
        finally:
            store.close()
    rejoin = [k["rejoin_seconds"] for k in happened.kills if k.get("rejoin_seconds") is not None]
    return {
        "examples_sent": len(sent),
        "examples_learned": learned,
        "examples_stored": stored,
        "rows_left_in_closed_windows": left,
        "windows_released": len(indexes),
        "windows_contiguous": bool(indexes) and indexes == list(range(indexes[0], indexes[-1] + 1)),
        "duplicate_releases": audit["duplicate_releases"],
        "double_charges": audit["double_charges"],
        "ledger_matches_certificates": audit["ledger_matches_certificates"],
        "republished_copies": audit["republished_copies"],
        "seconds": round(seconds, 1),
        "store": options.store,
        "workers": options.workers,
        "partitions": options.partitions,
        "window_seconds": options.window_seconds,
        "rate": options.rate,
        "kills": len(happened.kills),
        "rejoin_seconds": rejoin,
        "database_cut": happened.cut,
        "worker_exit_codes": exits,
    }
