"""``privstream bench startup``: how long a worker takes from its start to its first prediction.

Each start is a ``privstream worker`` process with one stream (a count-window release, so that the
ledger and the state store are created and migrated), measured from the moment the process is
started:

* from outside: ``listening`` (``/healthz`` answers) and ``ready`` (``/readyz`` 200: partitions
  assigned and the store answering), then ``first_prediction`` (an example produced once it is ready,
  until its prediction is on the predictions topic);
* from inside (``/status``'s ``startup``, seconds since the process started): ``store_ready``,
  ``listening``, ``partitions_assigned``, ``first_prediction``.

Three starts: ``own_broker`` (no Kafka configured: the worker starts the embedded broker itself, as
``privstream worker`` does on a laptop), ``running_broker`` (the address of an embedded broker
already running, e.g. ``privstream broker``'s, and nothing else configured) and ``restart`` (the
same worker stopped and started again: its consumer group exists). ``imports_seconds`` is the time a
fresh interpreter takes to import the worker's modules, the first part of every start.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from privstream.stream_app.embedded.broker import EmbeddedBroker, die_with_parent, free_listener_ports
from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.kafka.clients import client_options, produce_json
from privstream.stream_app.settings import ENV_PREFIX, Settings

STREAM = "startup"
READY = {"status": "ready", "reason": "ok"}


def imports_seconds() -> float:
    """Seconds a fresh interpreter takes to import what ``privstream worker`` imports."""
    code = (
        "import time; t = time.perf_counter(); "
        "import privstream.stream_app.cli.worker, privstream.stream_app.service; "
        "print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def worker_env(workdir: Path, app_id: str, bootstrap: str | None) -> dict[str, str]:
    """What a user sets for a worker: its stream, ports, data directory, and Kafka's address if one
    runs; nothing about group timings."""
    ports = free_listener_ports()
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    env.update(
        {
            f"{ENV_PREFIX}APP_ID": app_id,
            f"{ENV_PREFIX}DATA_DIR": str(workdir / "data"),
            f"{ENV_PREFIX}PUBLIC_PORT": str(ports["public_port"]),
            f"{ENV_PREFIX}OPERATOR_PORT": str(ports["operator_port"]),
            f"{ENV_PREFIX}LEDGER_CREATE_IF_MISSING": "true",
            f"{ENV_PREFIX}STREAMS": (
                f'[{{"name": "{STREAM}", "hypothesis_class": "thresholds:1024", '
                '"release": {"window": {"size": 1000}, "epsilon": 1.0, "epsilon_budget": 10.0}}]'
            ),
        }
    )
    if bootstrap is not None:
        env[f"{ENV_PREFIX}KAFKA_BOOTSTRAP"] = bootstrap
    return env


async def _first_prediction(settings: Settings, timeout: float) -> None:
    """Produce one example and wait until a prediction is on the predictions topic."""
    consumer = AIOKafkaConsumer(**client_options(settings), enable_auto_commit=False, fetch_max_wait_ms=10)
    await consumer.start()
    try:
        topic = settings.topic("predictions")
        await consumer.topics()
        consumer.assign([TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()])
        await consumer.seek_to_end()
        await produce_json(
            settings, settings.topic("examples"), [(STREAM, {"stream_id": STREAM, "x": 5, "y": 1})]
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any((await consumer.getmany(timeout_ms=100)).values()):
                return
        raise TimeoutError(f"no prediction within {timeout:.0f} s")
    finally:
        await consumer.stop()


def measure_start(env: dict[str, str], log_path: Path, timeout: float = 120.0) -> dict[str, Any]:
    """Start a worker with ``env``, measure its stages, stop it; the figures of one start."""
    operator = f"http://127.0.0.1:{env[f'{ENV_PREFIX}OPERATOR_PORT']}"
    started = time.monotonic()
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "privstream", "worker"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
    figures: dict[str, Any] = {}
    try:
        deadline = started + timeout
        while "ready" not in figures:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the worker did not get ready; its log:\n" + log_path.read_text()[-3000:])
            if "listening" not in figures and fetch_json(f"{operator}/healthz", timeout=0.5) is not None:
                figures["listening"] = round(time.monotonic() - started, 3)
            if fetch_json(f"{operator}/readyz", timeout=0.5) == READY:
                figures["ready"] = round(time.monotonic() - started, 3)
            else:
                time.sleep(0.02)
        status = fetch_json(f"{operator}/status") or {}
        bootstrap = env.get(f"{ENV_PREFIX}KAFKA_BOOTSTRAP") or _own_broker(log_path)
        settings = Settings(
            kafka_bootstrap=bootstrap,
            app_id=env[f"{ENV_PREFIX}APP_ID"],
            _env_file=None,
        )
        asyncio.run(_first_prediction(settings, timeout))
        figures["first_prediction"] = round(time.monotonic() - started, 3)
        status = fetch_json(f"{operator}/status") or status
        figures["inside"] = status.get("startup", {})
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    figures["exit_status"] = process.returncode
    return figures


def _own_broker(log_path: Path) -> str:
    """The address of the broker a worker started itself (it says so in its log)."""
    for line in log_path.read_text().splitlines():
        if "started the embedded broker at " in line:
            return line.rsplit(" ", 1)[1].strip()
    raise RuntimeError("the worker did not say where its embedded broker listens")


def run_startup_benchmark(log: Any = sys.stderr) -> dict[str, Any]:
    """The three starts described in the module docstring; the JSON-able result."""
    with tempfile.TemporaryDirectory(prefix="privstream-bench-startup-") as tmp:
        workdir = Path(tmp)
        result: dict[str, Any] = {"imports_seconds": round(imports_seconds(), 3)}
        print("bench: a worker that starts its own embedded broker", file=log)
        own = workdir / "own"
        own.mkdir()
        result["own_broker"] = measure_start(
            worker_env(own, f"startup-{secrets.token_hex(4)}", None), own / "worker.log"
        )
        with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
            print(f"bench: a worker given a running embedded broker ({broker.bootstrap})", file=log)
            running = workdir / "running"
            running.mkdir()
            env = worker_env(running, f"startup-{secrets.token_hex(4)}", broker.bootstrap)
            result["running_broker"] = measure_start(env, running / "worker.log")
            print("bench: the same worker started again", file=log)
            result["restart"] = measure_start(env, running / "worker.log")
    return result
