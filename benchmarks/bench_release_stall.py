"""Does a big private release stall ingestion? One worker, one run, side by side.

    .venv/bin/python benchmarks/bench_release_stall.py [--window 100000] [--flow 60000]

A stream ``big`` (``thresholds:2^32``, the generic learner, count windows of ``--window``
examples) is filled to one example short of its window (the window is durable: the worker is
stopped and restarted between phases). Then the online rate of a second stream ``flow`` is
measured twice, each time on a backlog of ``--flow`` examples produced while no worker runs and
drained by a fresh worker (so the producer is not measured): without a release, and with the
window's last example sent just before the backlog, so the window closes at the first batch and
is loaded, learned, charged and published while ``flow`` drains. The result is the ratio of the
rates (target: the rate during the release within 20% of the rate without), both over the whole
backlog and over the release interval itself (from the window's close to its ledger entry), read
from ``/status`` sampled every 20 ms.

Why it could stall: in a thread of the worker, the pure-Python parts of a learner (the exact
samplers) hold the GIL the event loop needs; with the learner there, ingestion during the release
ran at 0.51-0.75 of its rate without one (2026-11-24). The worker now runs learners in a child
process (``privstream/stream_app/learner_process.py``): median 0.88, 0.66-1.05 over 10 runs.
Reading the window from the state store still happens in the worker. On this 2-core machine the
broker, the producer, the worker and the learner's child also share the cores.

Prints JSON; also writes benchmarks/results/bench_release_stall.json. No extra dependencies.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from privstream.stream_app.embedded.broker import EmbeddedBroker, free_listener_ports
from privstream.stream_app.embedded.demo import WorkerProcess, fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger

DOMAIN = 2**32
CLASS = f"thresholds:{DOMAIN}"


def examples(stream: str, n: int, seed: int) -> list[tuple[str, bytes]]:
    """``n`` single-example messages of a realizable threshold stream."""
    xs = np.random.default_rng(seed).integers(0, DOMAIN, n).tolist()
    return [(stream, b'{"stream_id":"%s","x":%d,"y":%d}' % (stream.encode(), x, x >= 2**31)) for x in xs]


def learned(worker: WorkerProcess, stream: str) -> int:
    status = fetch_json(f"{worker.operator_url}/status")
    return -1 if status is None else status["streams"][stream]["examples"]


def handled(worker: WorkerProcess) -> int:
    """Messages handled by this worker process since it started."""
    status = fetch_json(f"{worker.operator_url}/status")
    return 0 if status is None else status["handled"]


def wait_ready(workers: list[WorkerProcess], timeout: float = 180.0) -> None:
    """Until every worker's /readyz says ready (partitions assigned)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = {"status": "ready", "reason": "ok"}
        if all(fetch_json(f"{w.operator_url}/readyz") == ready for w in workers):
            return
        if not all(w.alive() for w in workers):
            raise RuntimeError("a worker exited during start-up")
        time.sleep(0.5)
    raise TimeoutError("workers not ready")


def sample_until(count, target: int, timeout: float = 300.0, extra=None) -> list[tuple[float, int, Any]]:
    """(time, count(), extra()) every 20 ms until ``count()`` reaches ``target``."""
    samples: list[tuple[float, int, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        samples.append((time.perf_counter(), count(), extra() if extra else None))
        if samples[-1][1] >= target:
            return samples
        time.sleep(0.02)
    raise TimeoutError(f"only {samples[-1][1]} of {target} in {timeout:.0f} s")


def rate(samples: list[tuple[float, int, Any]], start: int = 0, end: int | None = None) -> float:
    """Count per second from the last sample before the count moved past ``start`` to the first at
    ``end`` (default: the last sample)."""
    end = samples[-1][1] if end is None else end
    first = max(i for i, s in enumerate(samples) if s[1] <= start)
    last = min(i for i, s in enumerate(samples) if s[1] >= end)
    t0, c0 = samples[first][0], samples[first][1]
    t1, c1 = samples[last][0], samples[last][1]
    return (c1 - c0) / (t1 - t0) if t1 > t0 else float("nan")


def run(window: int, flow: int, log_dir: Path | None = None) -> dict[str, Any]:
    tag = secrets.token_hex(4)
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-stall-")))
        broker = stack.enter_context(EmbeddedBroker(log_path=work / "broker.log"))
        settings = Settings(
            app_id=f"bench-stall-{tag}",
            topic_prefix=f"bench-stall-{tag}.",
            kafka_bootstrap=broker.bootstrap,
            **free_listener_ports(),
            data_dir=work / "data",
            topic_partitions=2,
            ledger_create_if_missing=True,
            streams=[
                StreamConfig(
                    name="big",
                    hypothesis_class=CLASS,
                    release=ReleaseConfig(window=WindowConfig(size=window), epsilon=1.0, epsilon_budget=10.0),
                ),
                StreamConfig(name="flow", hypothesis_class=CLASS),
            ],
            _env_file=None,
        )
        asyncio.run(ensure_topics(settings))
        log = (log_dir or work) / "worker-stall.log"

        def start() -> WorkerProcess:
            worker = WorkerProcess(settings, log).start()
            stack.callback(worker.stop)
            return worker

        def produce(messages: list[tuple[str, bytes]]) -> None:
            asyncio.run(produce_json(settings, settings.topic("examples"), messages))

        # The big window filled to one example short; the worker stops (its window is durable).
        big = examples("big", window, seed=1)
        produce(big[:-1])
        worker = start()
        sample_until(lambda: learned(worker, "big"), window - 1)
        assert worker.stop() == 0

        # Without a release: a backlog produced while no worker runs, drained by a fresh one.
        # (Counted by /status "handled", this process's own count: the SOA's example count is
        # restored from its last snapshot, which a converged SOA no longer updates.)
        produce(examples("flow", flow, seed=2))
        worker = start()
        quiet_rate = rate(sample_until(lambda: handled(worker), flow))
        assert worker.stop() == 0

        # With the release: the window's last example, then the backlog; a fresh worker closes the
        # window at its first batch and releases it while the backlog drains.
        produce(big[-1:] + examples("flow", flow, seed=3))
        ledger = SqliteLedger.open(settings.resolved_ledger_path)
        worker = start()
        busy = sample_until(lambda: handled(worker), flow + 1, extra=lambda: len(ledger.entries("big")))
        released_during = busy[-1][2] == 1
        if not released_during:  # the backlog drained first: wait for the release anyway
            sample_until(lambda: len(ledger.entries("big")), 1, timeout=300)
        busy_rate = rate(busy)
        closed_at = max(i for i, s in enumerate(busy) if s[1] == 0)  # the first batch closes it
        released_at = next((i for i, s in enumerate(busy) if s[2] >= 1), None)
        during = None
        if released_at is not None and released_at > closed_at:
            t0, c0 = busy[closed_at][0], busy[closed_at][1]
            t1, c1 = busy[released_at][0], busy[released_at][1]
            during = (c1 - c0) / (t1 - t0)
        metrics = fetch_json(f"{worker.operator_url}/status") or {}
        exit_status = worker.stop()
    return {
        "window": window,
        "flow_examples": flow,
        "rate_without_release": round(quiet_rate),
        "rate_with_release": round(busy_rate),
        "ratio_whole_backlog": round(busy_rate / quiet_rate, 3),
        "rate_during_release_interval": None if during is None else round(during),
        "ratio_during_release_interval": None if during is None else round(during / quiet_rate, 3),
        "release_interval_seconds": (
            None
            if released_at is None or closed_at is None
            else round(busy[released_at][0] - busy[closed_at][0], 3)
        ),
        "release_finished_before_backlog_drained": released_during,
        "target_ratio": 0.8,
        "invalid": metrics.get("invalid"),
        "worker_exit_status": exit_status,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--window", type=int, default=100_000)
    parser.add_argument("--flow", type=int, default=60_000)
    parser.add_argument("--log-dir", type=Path, default=None, help="keep the worker's log there")
    args = parser.parse_args()
    result = run(args.window, args.flow, args.log_dir)
    print(json.dumps(result))
    out = Path(__file__).with_name("results")
    out.mkdir(exist_ok=True)
    (out / "bench_release_stall.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
