"""``privstream bench scale --ready-streams N``: how long a worker with ``N`` releasing streams takes
to become ready, with no slot measurement remembered and then with them remembered.

A worker derives each stream's publication slots before it reads an example, by timing a node's
fits on public inputs (:mod:`privstream.stream_app.publication`): that measurement, not Kafka, is
what a worker with releases waits for at its start. The streams here are alike (the bench
scale stream's halfspaces release on count windows), so their slots are one measurement per
level, remembered on the machine (:mod:`privstream.stream_app.slot_cache`).

Two starts on one broker, each a fresh ``privstream worker`` process with a fresh data directory,
timed from the process's start until ``/readyz`` says ready:

* ``cold``: nothing remembered (an empty slot cache of its own);
* ``warm``: the same configuration again, another data directory, the cache of the first start.

Each prints ``ready_seconds`` and the worker's own stages (``/status``'s ``startup``).
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from privstream.stream_app.bench.scale import release_config, stream_config
from privstream.stream_app.embedded.broker import EmbeddedBroker, free_listener_ports, on_embedded_broker
from privstream.stream_app.embedded.demo import WorkerProcess, fetch_json
from privstream.stream_app.kafka.clients import ensure_topics
from privstream.stream_app.settings import Settings


def _ready_seconds(worker: WorkerProcess, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not worker.alive():
            raise RuntimeError(f"the worker exited before it was ready: see {worker.log_path}")
        ready = fetch_json(f"{worker.operator_url}/readyz")
        if ready is not None and ready.get("status") == "ready":
            return time.monotonic() - t0
        time.sleep(0.05)
    raise TimeoutError(f"the worker was not ready in {timeout:.0f} s")


def run_ready_benchmark(
    streams: int = 24,
    features: int = 16,
    window: int = 10_000,
    top_level: int = 2,
    settings: Settings | None = None,
    log: Any = sys.stderr,
    timeout: float = 900.0,
) -> dict[str, Any]:
    """The two starts described in the module docstring; returns the JSON-able result."""
    if streams < 1:
        raise ValueError(f"--ready-streams must be at least 1 (got {streams})")
    settings = settings or Settings()
    release = release_config(window, top_level)
    configs = [
        stream_config(features, "auto", release).model_copy(update={"name": f"scale-{i}"})
        for i in range(streams)
    ]
    result: dict[str, Any] = {
        "streams": streams,
        "features": features,
        "window": window,
        "top_level": top_level,
    }
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="privstream-bench-")))
        if settings.kafka_bootstrap is None:
            broker = stack.enter_context(EmbeddedBroker(log_path=workdir / "broker.log"))
            settings = on_embedded_broker(settings, broker)
        cache = workdir / "slot-cache.json"
        for start in ("cold", "warm"):
            run = secrets.token_hex(4)
            started = settings.model_copy(
                update={
                    "app_id": f"privstream-bench-ready-{run}",
                    "topic_prefix": f"bench-ready-{run}.",
                    **free_listener_ports(),
                    "data_dir": workdir / f"data-{start}",
                    "slot_cache_file": cache,
                    "streams": configs,
                    "ledger_create_if_missing": True,
                }
            )
            asyncio.run(ensure_topics(started))
            worker = WorkerProcess(started, workdir / f"worker-{start}.log").start()
            try:
                seconds = _ready_seconds(worker, timeout)
                status = fetch_json(f"{worker.operator_url}/status") or {}
            finally:
                worker.stop()
            result[start] = {"ready_seconds": round(seconds, 2), "stages": status.get("startup")}
            print(f"bench: {streams} streams, {start} slot cache: ready in {seconds:.1f} s", file=log)
    return result
