"""Scaling by partitions: one, two and four workers on a topic of 4 partitions, in one run.

    .venv/bin/python benchmarks/bench_scaling.py [--examples 200000] [--workers 1 2 4]

For each worker count: fresh topics (4 partitions) and consumer group, four online streams whose
keys land on the four partitions, a backlog of ``--examples`` single-example messages produced
before any worker runs, then ``k`` workers started together (distinct web ports and data dirs,
the same ledger and state store files, as a deployment on one host must share them). Measured:
the aggregate drain rate (the sum of the workers' handled counts, sampled every 20 ms, from the
last sample before it moved to the first at the total; the group join is excluded), the ratio to
one worker, and each worker's share.

Limits to read the figures with: this machine has 2 cores, shared by the embedded broker and every
worker (each worker is one Python process, its hot path one event loop); so two workers can at
best approach 2x only if the broker costs little, and four workers cannot beat two -- they add
context switches, group coordination and SQLite write contention on the shared state store. On a
real deployment the ceiling is min(partitions, cores) workers, and the shared SQLite files keep
all workers on one host (PostgreSQL spans hosts: docs/guide/deployment.md).

Prints JSON; also writes benchmarks/results/bench_scaling.json. No extra dependencies.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from aiokafka.partitioner import murmur2
from bench_release_stall import CLASS, examples, handled

from privstream.stream_app.embedded.broker import EmbeddedBroker, free_listener_ports
from privstream.stream_app.embedded.demo import WorkerProcess, fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.settings import Settings, StreamConfig

PARTITIONS = 4


def keys_on_every_partition(partitions: int) -> list[str]:
    """Stream names whose keys the producer's murmur2 partitioner puts on distinct partitions."""
    chosen: dict[int, str] = {}
    i = 0
    while len(chosen) < partitions:
        name = f"s{i}"
        chosen.setdefault((murmur2(name.encode()) & 0x7FFFFFFF) % partitions, name)
        i += 1
    return [chosen[p] for p in range(partitions)]


def measure(broker: EmbeddedBroker, k: int, n: int, work: Path) -> dict[str, Any]:
    tag = secrets.token_hex(4)
    streams = keys_on_every_partition(PARTITIONS)
    shared = work / f"shared-{k}"
    shared.mkdir()
    base = Settings(
        app_id=f"bench-scale-{tag}",
        topic_prefix=f"bench-scale-{tag}.",
        kafka_bootstrap=broker.bootstrap,
        topic_partitions=PARTITIONS,
        ledger_path=shared / "ledger.sqlite3",
        state_path=shared / "state.sqlite3",
        streams=[StreamConfig(name=s, hypothesis_class=CLASS) for s in streams],
        _env_file=None,
    )
    asyncio.run(ensure_topics(base))
    messages = [m for i, s in enumerate(streams) for m in examples(s, n // PARTITIONS, seed=i)]
    asyncio.run(produce_json(base, base.topic("examples"), messages))
    with ExitStack() as stack:
        workers = []
        for i in range(k):
            settings = base.model_copy(update={**free_listener_ports(), "data_dir": work / f"data-{k}-{i}"})
            worker = WorkerProcess(settings, work / f"worker-{k}-{i}.log").start()
            stack.callback(worker.stop)
            workers.append(worker)
        samples: list[tuple[float, int]] = []
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            samples.append((time.perf_counter(), sum(handled(w) for w in workers)))
            if samples[-1][1] >= len(messages):
                break
            time.sleep(0.02)
        else:
            raise TimeoutError(f"{k} workers handled {samples[-1][1]} of {len(messages)}")
        first = max(i for i, s in enumerate(samples) if s[1] == samples[0][1])
        elapsed = samples[-1][0] - samples[first][0]
        shares = [handled(w) for w in workers]
        ready = all(fetch_json(f"{w.operator_url}/readyz") is not None for w in workers)
        exits = [w.stop() for w in workers]
    rate = (samples[-1][1] - samples[first][1]) / elapsed
    return {
        "workers": k,
        "examples": len(messages),
        "rate": round(rate),
        "seconds": round(elapsed, 3),
        "handled_per_worker": shares,
        "answered": ready,
        "exit_status": exits,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=200_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    runs = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp,
        EmbeddedBroker(log_path=Path(tmp) / "broker.log") as broker,
    ):
        for k in args.workers:
            result = measure(broker, k, args.examples, Path(tmp))
            print(json.dumps(result), flush=True)
            runs.append(result)
    one = next((r["rate"] for r in runs if r["workers"] == 1), runs[0]["rate"])
    summary = {
        "ratios_to_one_worker": {r["workers"]: round(r["rate"] / one, 3) for r in runs},
        "partitions": PARTITIONS,
        "cores": os.cpu_count(),
    }
    print(json.dumps(summary))
    out = Path(__file__).with_name("results")
    out.mkdir(exist_ok=True)
    (out / "bench_scaling.json").write_text(json.dumps({"runs": runs, **summary}, indent=2))


if __name__ == "__main__":
    main()
