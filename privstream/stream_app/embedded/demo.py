"""``privstream demo``: the whole service on one machine, with a live view.

It starts the embedded broker (unless ``PRIVSTREAM_KAFKA_BOOTSTRAP`` is set), a worker as a
child process, and a synthetic producer for a realizable stream (of a hypothesis class, or with
``--vectors D`` of D-feature vectors labelled by a halfspace with a margin); it shows the online
mistakes against their bound and the private releases live while the worker learns, then stops
everything it started and returns a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from privstream.stream_app.embedded.broker import (
    EmbeddedBroker,
    die_with_parent,
    free_listener_ports,
    on_embedded_broker,
)
from privstream.stream_app.embedded.demo_view import DEMO_STREAM, FRESH_EXAMPLES, ProgressView
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.sdk import Release
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.sources.synthetic import (
    SyntheticBatch,
    SyntheticVectors,
    malformed_messages,
    synthetic_examples,
    synthetic_vectors,
)


def privstream_command(path: str | None = None, cwd: Path | None = None) -> str:
    """How to run this installation's ``privstream`` from the user's shell: ``privstream`` when
    that is the one on ``PATH``, else its path (``.venv/bin/privstream`` after ``scripts/demo.sh``,
    which does not activate the virtualenv), relative to the working directory when inside it.

    >>> here = Path(sys.executable).parent
    >>> privstream_command(str(here / "privstream"))
    'privstream'
    >>> privstream_command("/usr/bin/privstream", cwd=here.parent)
    'bin/privstream'
    """
    ours = Path(sys.executable).parent / "privstream"
    found = shutil.which("privstream") if path is None else path
    if found is not None and Path(found).resolve() == ours.resolve():
        return "privstream"
    try:
        return str(ours.relative_to(cwd or Path.cwd()))
    except ValueError:
        return shlex.quote(str(ours))


def expected_nodes(windows: int, levels: int) -> int:
    """How many nodes of the release tree ``windows`` closed windows complete.

    >>> expected_nodes(30, 4)  # 30 + 15 + 7 + 3 + 1
    56
    """
    return sum(windows >> j for j in range(levels + 1))


def best_release(releases: list[Release]) -> Release | None:
    """``level="best"``: the newest release of the highest level completed so far."""
    if not releases:
        return None
    top = max(r.certificate.level or 0 for r in releases)
    return [r for r in releases if (r.certificate.level or 0) == top][-1]


async def published_releases(settings: Settings, expected: int, timeout: float = 20.0) -> list[Release]:
    """The demo stream's releases on the public topic, in order (stops at ``expected`` or ``timeout``)."""
    from privstream.stream_app.sdk import subscribe

    out: list[Release] = []

    async def collect() -> None:
        async for release in subscribe(DEMO_STREAM, settings=settings, level="all"):
            out.append(release)
            if len(out) >= expected:
                return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(collect(), timeout)
    return out


def fetch_json(url: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """GET a JSON page; None while the worker is not answering yet."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


class WorkerProcess:
    """``privstream worker`` as a child process configured through the environment."""

    def __init__(self, settings: Settings, log_path: Path):
        self.settings = settings
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def public_url(self) -> str:
        """The public listener: releases, budgets, the page for people."""
        return f"http://{self.settings.public_host}:{self.settings.public_port}"

    @property
    def operator_url(self) -> str:
        """The operator listener: /metrics, /status, /healthz, /readyz."""
        return f"http://{self.settings.operator_host}:{self.settings.operator_port}"

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError("the worker is not started")
        return self.process.pid

    def start(self) -> WorkerProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
        env.update(self.settings.to_env())
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "privstream", "worker"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )
        return self

    def status(self) -> dict[str, Any] | None:
        """Online figures (/status) with the demo stream's budget figures merged in."""
        status = fetch_json(f"{self.operator_url}/status")
        if status is not None:
            status["budget"] = fetch_json(f"{self.public_url}/streams/{DEMO_STREAM}/budget")
        return status

    def latest_release(self) -> Release | None:
        data = fetch_json(f"{self.public_url}/streams/{DEMO_STREAM}/releases/latest")
        return None if data is None or "error" in data else Release.from_json(data)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ready(self) -> bool:
        """Whether /readyz answers 200: the consumer has its partitions and the store answers."""
        try:
            with urllib.request.urlopen(f"{self.operator_url}/readyz", timeout=2.0) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (faust commits and closes), SIGKILL if it hangs; returns the exit status."""
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
        return process.returncode


def demo_stream(args: argparse.Namespace) -> StreamConfig:
    """The demo's stream: of ``--class``, or with ``--vectors D`` of D features in ``[0, 1]``."""
    vectors = getattr(args, "vectors", None)
    release = {
        "window": WindowConfig(size=args.window),
        "top_level": args.top_level,
        "epsilon": args.epsilon,
        "epsilon_budget": args.epsilon_budget,
    }
    if vectors is None:
        return StreamConfig(
            name=DEMO_STREAM, hypothesis_class=args.class_spec, release=ReleaseConfig(**release)
        )
    margin_tested = args.online_learner in (
        "perceptron",
        "averaged-perceptron",
        "second-order-perceptron",
        "weighted-majority",
        "block-vote",
        "auto",
    )
    return StreamConfig(
        name=DEMO_STREAM,
        features=vectors,
        feature_bounds=[(0.0, 1.0)] * vectors,
        online_learner=args.online_learner,
        online_params={"margin": args.margin} if margin_tested else {},
        release=ReleaseConfig(learner="halfspaces", **release),
    )


class Demo:
    def __init__(self, settings: Settings, args: argparse.Namespace):
        self.args = args
        run_id = secrets.token_hex(4)  # unique names: a rerun on a shared Kafka never collides
        self.settings = settings.model_copy(
            update={
                "app_id": f"privstream-demo-{run_id}",
                "topic_prefix": f"demo-{run_id}.",
                **free_listener_ports(),
                "streams": [demo_stream(args)],
                "ledger_create_if_missing": True,  # the demo's ledger lives in a fresh temporary folder
            }
        )
        # Nodes that complete: every window, and every node of levels 1..L whose windows all closed.
        self.expected_windows = expected_nodes(args.examples // args.window, args.top_level)

    def run(self) -> dict[str, Any]:
        args = self.args
        if args.examples < 0 or args.invalid < 0:
            raise ValueError("--examples and --invalid must be >= 0")
        vectors = getattr(args, "vectors", None)
        batch: SyntheticVectors | SyntheticBatch
        if vectors is not None:
            batch = synthetic_vectors(vectors, args.examples, None, args.label_noise, args.seed, args.margin)
        else:
            batch = synthetic_examples(args.class_spec, args.examples, args.label_noise, args.seed)
        spec = args.class_spec if vectors is None else f"halfspaces:{vectors}"
        with contextlib.ExitStack() as stack:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="privstream-demo-")))
            settings = self.settings.model_copy(update={"data_dir": workdir / "data"})
            (workdir / "data").mkdir()
            if settings.kafka_bootstrap is None:
                broker = stack.enter_context(EmbeddedBroker(log_path=workdir / "broker.log"))
                settings = on_embedded_broker(settings, broker)
                print(f"embedded broker at {broker.bootstrap}", file=sys.stderr)
            asyncio.run(ensure_topics(settings))
            worker = WorkerProcess(settings, workdir / "worker.log").start()
            stack.callback(worker.stop)
            print(
                f"worker (pid {worker.pid}) at {worker.public_url} "
                f"(operator {worker.operator_url}); "
                f"stream '{DEMO_STREAM}' of class {spec}",
                file=sys.stderr,
            )
            print(
                "watch the releases in another terminal: "
                f"PRIVSTREAM_KAFKA_BOOTSTRAP={settings.kafka_bootstrap} "
                f"PRIVSTREAM_TOPIC_PREFIX={settings.topic_prefix} "
                f"PRIVSTREAM_KEYS_URL={worker.public_url}/keys "
                f"{privstream_command()} subscribe {DEMO_STREAM}",
                file=sys.stderr,
            )
            records: list[tuple[str, dict[str, Any] | bytes]] = [
                (DEMO_STREAM, m) for m in batch.messages(DEMO_STREAM)
            ]
            records += [(DEMO_STREAM, raw) for raw in malformed_messages(args.invalid, DEMO_STREAM)]
            status = asyncio.run(self._produce_and_watch(settings, worker, records))
            latest = worker.latest_release()
            # no window can close (fewer examples than a window): nothing to wait for
            releases = (
                asyncio.run(published_releases(settings, self.expected_windows))
                if self.expected_windows
                else []
            )
            exit_status = worker.stop()
            if exit_status not in (0, None):
                print(
                    f"worker exited with status {exit_status}; its log:\n"
                    + (workdir / "worker.log").read_text()[-4000:],
                    file=sys.stderr,
                )
        stream = (status or {}).get("streams", {}).get(DEMO_STREAM, {})
        budget = (status or {}).get("budget") or {}
        error = best_error = level0_error = None
        per_level: dict[str, int] = {}
        for release in releases:
            level = str(release.certificate.level or 0)
            per_level[level] = per_level.get(level, 0) + 1
        best = best_release(releases)
        level0 = [r for r in releases if (r.certificate.level or 0) == 0]
        if latest is not None:  # fresh data from the demo's target, never seen by the learner
            if isinstance(batch, SyntheticVectors):
                again = synthetic_vectors(
                    batch.X.shape[1], FRESH_EXAMPLES, margin=args.margin, normal=batch.normal
                )
                xs, ys = again.X, again.ys
            else:
                fresh = synthetic_examples(
                    args.class_spec, FRESH_EXAMPLES, 0.0, seed=None, target=batch.target
                )
                xs, ys = fresh.xs, fresh.ys
            error = latest.error_on(xs, ys)
            best_error = best.error_on(xs, ys) if best is not None else None
            level0_error = level0[-1].error_on(xs, ys) if level0 else None
        lifetime = releases[-1].certificate.lifetime if releases else None
        return {
            "examples": args.examples,
            "processed": stream.get("examples", 0),
            "mistakes": stream.get("mistakes", 0),
            "mistake_bound": stream.get("mistake_bound"),
            "realizable": stream.get("realizable"),
            "invalid": (status or {}).get("invalid", 0),
            "releases": budget.get("releases", 0),
            "refusals": budget.get("refusals", 0),
            "epsilon_spent": budget.get("lifetime_epsilon_spent", 0.0),
            "epsilon_budget": budget.get("lifetime_epsilon_budget", args.epsilon_budget),
            "last_release_error": error,
            "releases_per_level": per_level,
            "lifetime_epsilon_per_example": budget.get("lifetime_epsilon_spent", 0.0),
            "lifetime_epsilon_bound": lifetime.epsilon if lifetime is not None else None,
            "best_release_level": best.certificate.level if best is not None else None,
            "best_release_error": best_error,
            "last_level0_release_error": level0_error,
            "hypothesis_class": spec,
            "label_noise": args.label_noise,
            **(
                {"online_learner": args.online_learner, "margin": args.margin, "features": vectors}
                if vectors is not None
                else {}
            ),
        }

    async def _produce_and_watch(
        self, settings: Settings, worker: WorkerProcess, records: list[tuple[str, Any]]
    ) -> dict[str, Any] | None:
        view = ProgressView(self.args.examples)
        deadline = time.monotonic() + self.args.timeout
        status = None
        # Produce once the worker reads: a count window closes at its last example's record
        # timestamp, so examples written long before the worker joins would find their windows'
        # deadlines passed (their releases the defaults, as after any downtime).
        while not await asyncio.to_thread(worker.ready):
            if not worker.alive():
                raise RuntimeError(f"the worker exited early; see its log {worker.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the worker was not ready after {self.args.timeout:.0f} s")
            view.show(await asyncio.to_thread(worker.status))
            await asyncio.sleep(0.25)
        view.producing()
        producer = asyncio.create_task(produce_json(settings, settings.topic("examples"), records))
        while time.monotonic() < deadline:
            if not worker.alive():
                raise RuntimeError(f"the worker exited early; see its log {worker.log_path}")
            status = await asyncio.to_thread(worker.status) or status
            view.show(status)
            if producer.done():
                producer.result()  # re-raise a producer error
                budget = (status or {}).get("budget") or {}
                windows_done = budget.get("releases", 0) + budget.get("refusals", 0)
                if (
                    status is not None
                    and status["handled"] >= len(records)
                    and windows_done >= self.expected_windows
                ):
                    break
            await asyncio.sleep(0.25)
        else:
            producer.cancel()
            print(f"privstream demo: timed out after {self.args.timeout:.0f} s", file=sys.stderr)
        view.show(status, final=True)
        return status
