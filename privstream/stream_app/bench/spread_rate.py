"""``privstream bench scale --partitioned N``: one stream over N partitions, served by 1, 2 and 3
workers in turn: the rate of the whole and per worker.

For each worker count, a fresh deployment (embedded broker, a throwaway PostgreSQL store shared
by the workers) gets ``--examples`` single-example messages of one stream keyed by example id
(``partition_by = "example"``) with time windows released, all produced *before* the workers
start, so they read a full backlog. The clock runs from every worker being ready (its partitions
assigned) until the workers' ``privstream_examples_learned_total`` add up to every example; the
rate is examples over that time, and per worker that rate over the worker count. On a machine
whose cores are shared the per-worker figure falls as workers are added; what it shows is that
a stream is no longer bound to one worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from privstream.stream_app.bench.faults import (
    BUDGET,
    CLASS,
    EPSILON,
    Cluster,
    produce,
    say,
    shared_store,
    wait,
)
from privstream.stream_app.bench.partitioned import STREAM, messages
from privstream.stream_app.embedded.broker import EmbeddedBroker
from privstream.stream_app.kafka.clients import ensure_topics
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.signing import shared_key_file
from privstream.stream_app.store import factory


def learned(text: str) -> float:
    """``privstream_examples_learned_total`` of the stream in a ``/metrics`` text.

    >>> learned('privstream_examples_learned_total{stream="spread"} 1200.0\\n')
    1200.0
    """
    prefix = f'privstream_examples_learned_total{{stream="{STREAM}"}} '
    return sum(float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix))


def learned_by(cluster: Cluster) -> float:
    total = 0.0
    for worker in cluster.workers:
        with urllib.request.urlopen(f"{worker.operator_url}/metrics", timeout=10) as response:
            total += learned(response.read().decode())
    return total


def one_run(workers: int, partitions: int, examples: int, window_seconds: float) -> dict[str, Any]:
    """One deployment of ``workers`` workers on a backlog of ``examples``: its rate."""
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="privstream-rate-")))
        broker = stack.enter_context(EmbeddedBroker(log_path=workdir / "broker.log"))
        store_settings, _ = stack.enter_context(shared_store("postgresql", workdir))
        run_id = secrets.token_hex(4)
        window = WindowConfig(kind="time", seconds=window_seconds, allowed_lateness_seconds=window_seconds)
        release = ReleaseConfig(window=window, epsilon=EPSILON, epsilon_budget=BUDGET, expected_size=1000)
        stream = StreamConfig(name=STREAM, hypothesis_class=CLASS, partition_by="example", release=release)
        base = Settings(
            app_id=f"privstream-rate-{run_id}",
            topic_prefix=f"rate-{run_id}.",
            kafka_bootstrap=broker.bootstrap,
            topic_partitions=partitions,
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
        sent: list[tuple[int, int]] = []
        asyncio.run(produce(base, messages(examples), 1e9, sent))  # the backlog, before any worker
        say(f"{workers} worker(s): {len(sent)} examples in the topic; starting the workers")
        cluster = Cluster(base, workdir, workers)
        stack.callback(cluster.stop)
        wait(lambda: all(cluster.ready(w) for w in cluster.workers), 300, "every worker ready", cluster)
        started, at_start = time.monotonic(), learned_by(cluster)
        wait(lambda: learned_by(cluster) >= examples, 1800, "every example learned", cluster)
        seconds = time.monotonic() - started
    rate = (examples - at_start) / seconds
    return {
        "workers": workers,
        "seconds": round(seconds, 2),
        "learned_before_all_ready": int(at_start),
        "examples_per_second": round(rate),
        "per_worker": round(rate / workers),
    }


def run_spread_rate_benchmark(
    partitions: int = 6, examples: int = 100_000, worker_counts: tuple[int, ...] = (1, 2, 3)
) -> dict[str, Any]:
    """The runs with 1, 2 and 3 workers; the figures as a dict (ratios to the one-worker run)."""
    if partitions < 1 or examples < 1:
        raise ValueError("--partitioned and --examples must be >= 1")
    runs = [one_run(w, partitions, examples, window_seconds=10.0) for w in worker_counts]
    one = runs[0]["examples_per_second"] or 1
    for run in runs:
        run["rate_vs_one_worker"] = round(run["examples_per_second"] / one, 2)
    return {"partitions": partitions, "examples": examples, "runs": runs}
