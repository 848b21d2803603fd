"""Can the public listener hurt ingest? A large ledger, one worker, with and without a crowd.

    .venv/bin/python benchmarks/bench_public_listener.py [--entries 100000] [--examples 50000] [--clients 100]

A ledger of ``--entries`` published releases of a stream ``pub`` (a realistic release of ~1 KB
each, level-0 nodes) is built before the worker starts; the worker also learns a stream ``flow``
online. Two phases, each on a fresh worker draining a backlog of ``--examples`` single-example
messages of ``flow`` produced while no worker runs (so the producer is not measured):

* ``quiet``: nobody reads the public listener;
* ``crowd_elsewhere`` (the control): the same crowd requests a decoy server in another process (at
  the public listener's niceness), so the worker serves nothing but shares the machine's cores;
* ``crowd``: ``--clients`` concurrent clients (in a process of their own) request the public pages
  (``/streams``, ``/streams/pub``, ``/streams/pub/budget``, ``/streams/pub/releases``,
  ``/streams/pub/releases/latest``, ``/``) as fast as they are answered, from before the worker
  starts until the backlog is drained.

In each phase: the ingest rate (examples per second, from ``/status`` sampled every 50 ms: the
operator listener), ``/healthz`` latency on the operator listener (p50, p99, max; one request
every 50 ms), and in the crowd phase the public requests answered and failed. After the quiet
phase's drain, one ``GET /streams`` and one ``GET /streams/pub/releases`` alone (the first read
of the ledger, then a repeat). The results are ratios to the quiet phase: ``ingest_ratio`` (the
crowd on the worker) beside ``ingest_ratio_crowd_elsewhere`` (what the crowd's own CPU costs a
machine of few cores: the difference is the listener's share).

``--worker-pythonpath DIR`` runs the worker from another checkout (e.g. a ``git worktree`` of an
older commit) to compare two versions on the same ledger and machine.

Prints JSON; also writes benchmarks/results/bench_public_listener.json (unless ``--no-save``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing
import os
import secrets
import shutil
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from privstream import __version__
from privstream.agents.ledger_port import NodeRange
from privstream.learning.hypothesis_classes import threshold_hypothesis
from privstream.schemas import Certificate, HypothesisRelease, WindowInfo
from privstream.stream_app.embedded.broker import (
    EmbeddedBroker,
    free_listener_ports,
    free_port,
    on_embedded_broker,
)
from privstream.stream_app.embedded.demo import WorkerProcess, fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.signing import DEFAULT_KEY_FILE, shared_key_file
from privstream.stream_app.store.sqlite_ledger import SqliteLedger

CLASS = "thresholds:4294967296"
PUBLIC_PATHS = (
    "/streams",
    "/streams/pub",
    "/streams/pub/budget",
    "/streams/pub/releases",
    "/streams/pub/releases/latest",
    "/",
)


def release_bytes(entry: int) -> bytes:
    """A release as the worker would publish it for node (0, entry - 1) of ``pub``."""
    window = WindowInfo(
        window_id=f"c1000-L0-{entry - 1}", kind="count", start=1000 * (entry - 1), end=1000 * entry
    )
    certificate = Certificate(
        mechanism="exponential-mechanism",
        epsilon=0.5,
        delta=0.0,
        neighbouring_relation="replace-one",
        privacy="information-theoretic",
        proper=True,
        accuracy_guarantee_holds=False,
        randomness="secure",
        library_version=__version__,
        ledger_entry_id=str(entry),
        sample_size=1000,
        window=window,
        level=0,
        parameters={"alpha": 0.25, "beta": 0.25, "domain": 2**32},
    )
    release = HypothesisRelease(
        stream_id="pub",
        hypothesis_class=CLASS,
        hypothesis=threshold_hypothesis(2**32, 12345 + entry).to_dict(),
        certificate=certificate,
    )
    return release.model_dump_json().encode()


def build_ledger(path: Path, entries: int, cache: Path | None = None) -> float:
    """A ledger holding ``entries`` published level-0 releases of ``pub`` at ``path``; returns the
    seconds taken. Built in memory-backed files (``/dev/shm`` where there is one: 3 transactions
    per release) and copied; with ``cache``, copied from there if it holds that many, else saved."""
    start = time.perf_counter()
    if cache is not None and cache.exists():
        with SqliteLedger.open(cache) as cached:
            if len(cached.entries("pub")) == entries:
                shutil.copyfile(cache, path)
                return time.perf_counter() - start
    scratch = Path(tempfile.mkdtemp(dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        built = scratch / "ledger.sqlite3"
        with SqliteLedger.open(built, create_if_missing=True, budgets={"pub": (1.0, 0.0)}) as ledger:
            for i in range(entries):
                reservation = ledger.reserve(
                    "pub", f"c1000-L0-{i}", "learner:generic", 0.5, 0.0, NodeRange.of(0, i)
                )
                ledger.complete(reservation.entry_id, release_bytes(reservation.entry_id))
                ledger.mark_published(reservation.entry_id)
        shutil.copyfile(built, path)  # closed: the WAL is checkpointed into the file
        if cache is not None:
            shutil.copyfile(built, cache)
    finally:
        shutil.rmtree(scratch)
    return time.perf_counter() - start


def crowd(base: str, clients: int, stop: Any, results: Any) -> None:
    """``clients`` concurrent clients requesting the public pages until ``stop`` is set (a process)."""
    import aiohttp

    async def client(session: aiohttp.ClientSession, i: int, counts: dict[str, int]) -> None:
        n = i
        while not stop.is_set():
            path = PUBLIC_PATHS[n % len(PUBLIC_PATHS)]
            n += 1
            try:
                async with session.get(base + path) as response:
                    await response.read()
                    counts["ok" if response.status < 500 else "failed"] += 1
            except aiohttp.ClientConnectorError:  # not listening yet (the crowd comes first)
                counts["refused"] += 1
                await asyncio.sleep(0.05)
            except (aiohttp.ClientError, TimeoutError):
                counts["failed"] += 1
                await asyncio.sleep(0.05)

    async def main() -> dict[str, int]:
        counts = {"ok": 0, "failed": 0, "refused": 0}
        timeout = aiohttp.ClientTimeout(total=60)
        connector = aiohttp.TCPConnector(limit=clients)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            await asyncio.gather(*(client(session, i, counts) for i in range(clients)))
        return counts

    results.update(asyncio.run(main()))


class Prober(threading.Thread):
    """GET ``url`` every ``interval`` seconds; the latencies (a request that fails counts as its time)."""

    def __init__(self, url: str, interval: float = 0.05):
        super().__init__(daemon=True)
        self.url, self.interval = url, interval
        self.latencies: list[float] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            start = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=60) as response:
                    response.read()
            except OSError:
                pass
            self.latencies.append(time.perf_counter() - start)
            self.stopping.wait(self.interval)


def timed_get(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=300) as response:
        response.read()
    return time.perf_counter() - start


def learned(worker: WorkerProcess, stream: str) -> int | None:
    status = fetch_json(f"{worker.operator_url}/status", timeout=60)
    return None if status is None else status["streams"][stream]["examples"]


@contextmanager
def worker_environment(pythonpath: str | None) -> Iterator[None]:
    """Where a worker started in the block imports privstream from: ``pythonpath`` (also its
    working directory: ``python -m`` puts that first on the path), else this checkout."""
    if pythonpath is None:
        yield
        return
    saved, cwd = os.environ.get("PYTHONPATH"), os.getcwd()
    os.environ["PYTHONPATH"] = pythonpath
    os.chdir(pythonpath)
    try:
        yield
    finally:
        os.chdir(cwd)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def decoy(port: int, ready: Any) -> None:
    """A server in a process of its own answering every path with a page-sized JSON body: what the
    crowd costs the machine when the worker does not serve it (a process)."""
    from aiohttp import web

    body = json.dumps({"streams": [{"stream_id": "pub", "padding": "x" * 2000}]}).encode()
    os.nice(10)  # as the worker's public listener process

    async def page(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", page)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def phase(
    settings: Settings,
    workdir: Path,
    examples: int,
    seed: int,
    clients: int,
    pythonpath: str | None,
    on_decoy: bool = False,
    drain_timeout: float = 900.0,
) -> dict[str, Any]:
    """One worker draining a backlog of ``examples``, with ``clients`` public clients (0: none) on
    its public listener, or on a decoy server (``on_decoy``: the control)."""
    stream = f"flow{seed}"  # a stream of its own: its count starts at 0
    xs = np.random.default_rng(seed).integers(0, 2**32, examples).tolist()
    records = [(stream, b'{"stream_id":"%s","x":%d,"y":%d}' % (stream.encode(), x, x >= 2**31)) for x in xs]
    asyncio.run(produce_json(settings, settings.topic("examples"), records))
    worker = WorkerProcess(settings, workdir / f"worker-{seed}.log")
    load: multiprocessing.Process | None = None
    server: multiprocessing.Process | None = None
    manager = multiprocessing.Manager()
    stop, results = manager.Event(), manager.dict()
    prober = Prober(f"{worker.operator_url}/healthz")
    figures: dict[str, Any] = {}
    try:
        if clients:  # the crowd is there before the worker: it meets the whole drain
            target = worker.public_url
            if on_decoy:
                port, ready = free_port(), manager.Event()
                server = multiprocessing.Process(target=decoy, args=(port, ready), daemon=True)
                server.start()
                ready.wait(30)
                target = f"http://127.0.0.1:{port}"
            load = multiprocessing.Process(target=crowd, args=(target, clients, stop, results))
            load.start()
        with worker_environment(pythonpath):
            worker.start()
        deadline = time.monotonic() + 120
        while learned(worker, stream) is None:
            if time.monotonic() > deadline or not worker.alive():
                raise RuntimeError("the worker did not start:\n" + worker.log_path.read_text()[-3000:])
            time.sleep(0.1)
        prober.start()
        samples: list[tuple[float, int]] = []
        start, deadline = time.perf_counter(), time.monotonic() + drain_timeout
        while not (samples and samples[-1][1] >= examples) and time.monotonic() < deadline:
            count = learned(worker, stream)
            if count is not None:
                samples.append((time.perf_counter(), count))
            time.sleep(0.05)
        if samples and samples[0][1] > 0:
            raise RuntimeError(
                "the worker learned before the first observation: no start time to measure from"
            )
        if samples and samples[-1][1] >= examples:
            t0 = next(t for t, c in reversed(samples) if c == 0)
            t1 = next(t for t, c in samples if c >= examples)
            figures["ingest_rate"] = examples / (t1 - t0)
            figures["drain_seconds"] = t1 - t0
        else:  # not drained in time: what was learned, and how long /status was silent
            times = [start] + [t for t, _ in samples] + [time.perf_counter()]
            figures["ingest_rate"] = None
            figures["drain_seconds"] = None
            figures["learned_by_the_deadline"] = samples[-1][1] if samples else None
            figures["status_longest_silence_seconds"] = max(b - a for a, b in itertools.pairwise(times))
        prober.stopping.set()
        stop.set()
        if (
            seed == 1 and figures["ingest_rate"] is not None
        ):  # the first phase: single requests on the large ledger, the worker idle
            public = worker.public_url
            figures["streams_first_seconds"] = timed_get(f"{public}/streams")
            figures["streams_again_seconds"] = timed_get(f"{public}/streams")
            figures["releases_first_seconds"] = timed_get(f"{public}/streams/pub/releases")
            figures["releases_again_seconds"] = timed_get(f"{public}/streams/pub/releases")
    finally:
        prober.stopping.set()
        stop.set()
        if load is not None:
            load.join(90)
        if server is not None:
            server.terminate()
            server.join(10)
        exit_status = worker.stop()
    if prober.is_alive():
        prober.join(70)  # a /healthz request in flight ends within its timeout
    latencies = prober.latencies or [float("nan")]
    figures.update(
        {
            "healthz_p50_seconds": float(np.percentile(latencies, 50)),
            "healthz_p99_seconds": float(np.percentile(latencies, 99)),
            "healthz_max_seconds": float(max(latencies)),
            "healthz_samples": len(prober.latencies),
            "public_requests_ok": int(results.get("ok", 0)),
            "public_requests_failed": int(results.get("failed", 0)),
            "public_requests_refused": int(results.get("refused", 0)),  # before the listener was up
            "worker_exit_status": exit_status,
        }
    )
    manager.shutdown()
    return figures


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a / b


def run(
    entries: int,
    examples: int,
    clients: int,
    worker_pythonpath: str | None = None,
    ledger_cache: Path | None = None,
    drain_timeout: float = 900.0,
) -> dict[str, Any]:
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="privstream-bench-")))
        broker = stack.enter_context(EmbeddedBroker(log_path=workdir / "broker.log"))
        tag = secrets.token_hex(4)
        settings = on_embedded_broker(Settings(_env_file=None), broker).model_copy(
            update={
                "app_id": f"privstream-bench-{tag}",
                "topic_prefix": f"bench-{tag}.",
                "topic_partitions": 1,
                **free_listener_ports(),
                "data_dir": workdir / "data",
                "streams": [
                    StreamConfig(name="flow1", hypothesis_class=CLASS),
                    StreamConfig(name="flow2", hypothesis_class=CLASS),
                    StreamConfig(name="flow3", hypothesis_class=CLASS),
                    StreamConfig(
                        name="pub",
                        hypothesis_class=CLASS,
                        release=ReleaseConfig(
                            window=WindowConfig(size=1000), epsilon=0.5, epsilon_budget=1.0
                        ),
                    ),
                ],
            }
        )
        settings.data_dir.mkdir(parents=True)
        build_seconds = build_ledger(settings.resolved_ledger_path, entries, ledger_cache)
        # The ledger is built without a worker, so no key signed its releases: the deployment's
        # key is put beside it, and the worker records it as the first on the ledger.
        shared_key_file(settings.data_dir / DEFAULT_KEY_FILE)
        asyncio.run(ensure_topics(settings))
        quiet = phase(settings, workdir, examples, 1, 0, worker_pythonpath, drain_timeout=drain_timeout)
        control = phase(
            settings,
            workdir,
            examples,
            3,
            clients,
            worker_pythonpath,
            on_decoy=True,
            drain_timeout=drain_timeout,
        )
        busy = phase(settings, workdir, examples, 2, clients, worker_pythonpath, drain_timeout=drain_timeout)
    return {
        "entries": entries,
        "examples": examples,
        "clients": clients,
        "worker_pythonpath": worker_pythonpath,
        "ledger_build_seconds": build_seconds,
        "quiet": quiet,
        "crowd_elsewhere": control,
        "crowd": busy,
        "ingest_ratio": ratio(busy["ingest_rate"], quiet["ingest_rate"]),
        "ingest_ratio_crowd_elsewhere": ratio(control["ingest_rate"], quiet["ingest_rate"]),
        "healthz_p99_ratio": ratio(busy["healthz_p99_seconds"], quiet["healthz_p99_seconds"]),
        "healthz_p50_ratio": ratio(busy["healthz_p50_seconds"], quiet["healthz_p50_seconds"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=100_000, help="published releases in the ledger")
    parser.add_argument("--examples", type=int, default=50_000, help="backlog drained in each phase")
    parser.add_argument("--clients", type=int, default=100, help="concurrent public clients")
    parser.add_argument("--worker-pythonpath", help="run the worker from this checkout")
    parser.add_argument(
        "--ledger-cache", type=Path, help="reuse the ledger built into this file (built and saved if missing)"
    )
    parser.add_argument(
        "--drain-timeout", type=float, default=900.0, help="give up on a phase's backlog after this (s)"
    )
    parser.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/")
    args = parser.parse_args()
    result = run(
        args.entries,
        args.examples,
        args.clients,
        args.worker_pythonpath,
        args.ledger_cache,
        args.drain_timeout,
    )
    print(json.dumps(result))
    if not args.no_save:
        out = Path(__file__).parent / "results" / "bench_public_listener.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
