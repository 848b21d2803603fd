"""The contract's window, and the two ways a release of an algorithm is made from it.

Every algorithm runs on the same window (seeded data of a realizable target) at the same
configuration, made in two ways:

* :func:`cli_release`: the offline command line (``privstream learn`` / ``privstream sanitize``
  with ``--seed``), through its Python entry point;
* :func:`service_release`: the release agent, with its policy built by the service from a
  stream's settings (:func:`privstream.stream_app.release_policies.release_policy`), an in-memory ledger
  and state store, and the same seed for the window.

>>> [a.id for a in registered("sanitizer")]
['sanitizer:fooling', 'sanitizer:hierarchical', 'sanitizer:mwem']
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from privstream import __version__
from privstream.agents.releases import ReleaseAgent
from privstream.learning import algorithms as registry
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.randomness import seeded

Kind = Literal["learner", "vector-learner", "sanitizer"]

CLASS_SPEC = "thresholds:64"
TARGET = 40  # the window is labelled by 1[x >= 40]
N = 200
FEATURES = 2
BOUNDS = [(0.0, 1.0)] * FEATURES
EPSILON, DELTA = 1.0, 1e-6  # δ > 0: several algorithms need it; pure ones report δ = 0
SEED = 7
STREAM = "contract"


@dataclass(frozen=True)
class Algorithm:
    """One registered algorithm: its registry (``kind``) and its name there."""

    kind: Kind
    name: str

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.name}"

    @property
    def topic(self) -> str:
        return "sanitized" if self.kind == "sanitizer" else "hypotheses"


def registered(kind: Kind | None = None) -> list[Algorithm]:
    """Every algorithm of the registry (:mod:`privstream.learning.algorithms`) as it is now, or those
    of ``kind``."""
    kinds: tuple[Kind, ...] = ("learner", "vector-learner", "sanitizer") if kind is None else (kind,)
    return [Algorithm(k, name) for k in kinds for name in sorted(registry.names(k))]


@dataclass(frozen=True)
class Window:
    """The examples of one window: integer points or feature vectors, with 0/1 labels."""

    xs: np.ndarray
    ys: np.ndarray

    def __len__(self) -> int:
        return int(self.ys.shape[0])


def window(algorithm: Algorithm, n: int = N) -> Window:
    """The contract's window for ``algorithm`` (``n = 0``: the empty window)."""
    gen = np.random.default_rng(SEED)
    if algorithm.kind == "vector-learner":
        rows = gen.random((n, FEATURES))
        return Window(rows, (rows[:, 0] >= 0.5).astype(np.uint8))
    xs = gen.integers(0, parse_class_spec(CLASS_SPEC).domain_size, n)
    return Window(xs, (xs >= TARGET).astype(np.uint8))


# -- the offline command line --------------------------------------------------------------------


def _write_window(algorithm: Algorithm, data: Window, directory: Path) -> Path:
    path = directory / "window.csv"
    if algorithm.kind == "vector-learner":
        header = ",".join(f"f{j}" for j in range(FEATURES)) + ",y"
        rows = [",".join(repr(float(v)) for v in x) + f",{y}" for x, y in zip(data.xs, data.ys, strict=True)]
    else:
        header = "x,y"
        rows = [f"{x},{y}" for x, y in zip(data.xs.tolist(), data.ys.tolist(), strict=True)]
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def cli_argv(algorithm: Algorithm, path: Path) -> list[str]:
    """The command that makes ``algorithm``'s release of the window in ``path``."""
    common = ["--epsilon", str(EPSILON), "--delta", str(DELTA), "--seed", str(SEED), "--json"]
    if algorithm.kind == "sanitizer":
        return ["sanitize", CLASS_SPEC, "--data", str(path), "--sanitizer", algorithm.name, *common]
    if algorithm.kind == "vector-learner":
        return ["learn", "--examples", str(path), "--learner", algorithm.name, "--bounds=0:1", *common]
    return ["learn", CLASS_SPEC, "--examples", str(path), "--learner", algorithm.name, *common]


@functools.cache
def cli_release(algorithm: Algorithm) -> bytes:
    """The release ``privstream learn``/``sanitize --json`` prints for the contract's window."""
    from privstream.stream_app.cli import main

    with tempfile.TemporaryDirectory() as directory:
        argv = cli_argv(algorithm, _write_window(algorithm, window(algorithm), Path(directory)))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    if code != 0:
        raise AssertionError(f"privstream {' '.join(argv)} exited {code}: {err.getvalue()}")
    lines = out.getvalue().splitlines()
    if len(lines) != 1:
        raise AssertionError(f"one line of output expected, got {lines}")
    return lines[0].encode()


# -- the service's release agent -------------------------------------------------------------------


def stream_settings(algorithm: Algorithm, size: int) -> Any:
    """The stream configuration equivalent to :func:`cli_argv` (defaults everywhere else)."""
    from privstream.stream_app.settings import StreamConfig

    release: dict[str, Any] = {
        "epsilon": EPSILON,
        "delta": DELTA,
        "epsilon_budget": 100.0,
        "delta_budget": 0.5,
        "window": {"kind": "count", "size": size},
    }
    if algorithm.kind == "sanitizer":  # a labelled window makes a labelled release, as in the CLI
        release.update(sanitizer=algorithm.name, sanitizer_labelled=True)
    else:
        release["learner"] = algorithm.name
    if algorithm.kind == "vector-learner":
        return StreamConfig(name=STREAM, features=FEATURES, feature_bounds=BOUNDS, release=release)
    return StreamConfig(name=STREAM, hypothesis_class=CLASS_SPEC, release=release)


def service_policy(algorithm: Algorithm, size: int = N) -> Any:
    """The release policy the service builds for :func:`stream_settings`."""
    from privstream.stream_app.release_policies import release_policy

    stream = stream_settings(algorithm, size)
    return release_policy(stream, parse_class_spec(CLASS_SPEC) if stream.hypothesis_class else None)


def release_agent(algorithm: Algorithm, size: int, published: list[tuple[str, bytes]]) -> ReleaseAgent:
    """A release agent for one stream, built as the service builds it, in memory, seeded with SEED."""
    from privstream.stream_app.release_policies import release_policy
    from privstream.stream_app.store.sqlite_ledger import SqliteLedger
    from privstream.stream_app.store.sqlite_state import SqliteStateStore

    stream = stream_settings(algorithm, size)
    hclass = parse_class_spec(CLASS_SPEC) if stream.hypothesis_class else None
    if stream.release is None:
        raise AssertionError("the stream has a release configuration")
    ledger = SqliteLedger.open(
        ":memory:", budgets={STREAM: (stream.release.epsilon_budget, stream.release.delta_budget)}
    )

    async def publish(topic: str, stream_id: str, release: bytes, *, timestamp_ms: int | None = None) -> None:
        published.append((topic, release))

    return ReleaseAgent(
        {STREAM: release_policy(stream, hclass)},
        SqliteStateStore(":memory:"),
        ledger,
        publish,
        NullMetrics(),
        library_version=__version__,
        rng_factory=lambda window_id: seeded(SEED),
    )


@functools.cache
def service_release(algorithm: Algorithm) -> bytes:
    """The bytes the release agent publishes for ``algorithm`` on the contract's window."""
    data = window(algorithm)
    published: list[tuple[str, bytes]] = []
    agent = release_agent(algorithm, len(data), published)
    n = len(data)

    async def run() -> None:
        agent.observe_batch(
            STREAM, 0, list(range(n)), data.xs.tolist(), data.ys.tolist(), [None] * n, [None] * n, [None] * n
        )
        await agent.drain()

    asyncio.run(run())
    releases = [body for topic, body in published if topic == algorithm.topic]
    if len(releases) != 1:
        raise AssertionError(f"the agent published {len(releases)} {algorithm.topic} releases (see the log)")
    return releases[0]


class NullMetrics:
    """The release agent's metrics port, ignored."""

    def released(self, stream_id: str, epsilon_spent: float, epsilon_remaining: float) -> None:
        pass

    def refused(self, stream_id: str, epsilon_spent: float, epsilon_remaining: float) -> None:
        pass

    def learner_failed(self, stream_id: str) -> None:
        pass

    def learner_ran(self, learner: str, seconds: float, window_size: int) -> None:
        pass

    def late_example(self, stream_id: str) -> None:
        pass

    def deadline_missed(self, stream_id: str, seconds_late: float) -> None:
        pass

    def default_released(self, stream_id: str, reason: str) -> None:
        pass

    def released_level(self, stream_id: str, level: int) -> None:
        pass

    def users_excluded(self, stream_id: str, count: int) -> None:
        pass

    def guarantee_refused(self, stream_id: str) -> None:
        pass


def empty_window_release(algorithm: Algorithm) -> bytes:
    """The bytes the release agent publishes for a time window that holds no example.

    Time windows close on the clock whether or not they hold data: the
    agent's clock is moved past the first window's end without any example.
    """
    from privstream.stream_app.release_policies import release_policy
    from privstream.stream_app.store.sqlite_ledger import SqliteLedger
    from privstream.stream_app.store.sqlite_state import SqliteStateStore

    counted = stream_settings(algorithm, 10)
    if counted.release is None:
        raise AssertionError("the stream has a release configuration")
    release = counted.release.model_copy(
        update={
            "window": counted.release.window.model_copy(update={"kind": "time", "seconds": 60.0}),
            "expected_size": 10,
        }
    )
    stream = counted.model_copy(update={"release": release})
    hclass = parse_class_spec(CLASS_SPEC) if stream.hypothesis_class else None
    ledger = SqliteLedger.open(":memory:", budgets={STREAM: (release.epsilon_budget, release.delta_budget)})
    published: list[tuple[str, bytes]] = []

    async def publish(topic: str, stream_id: str, release: bytes, *, timestamp_ms: int | None = None) -> None:
        published.append((topic, release))

    now = [6000.0]
    agent = ReleaseAgent(
        {STREAM: release_policy(stream, hclass)},
        SqliteStateStore(":memory:"),
        ledger,
        publish,
        NullMetrics(),
        library_version=__version__,
        rng_factory=lambda window_id: seeded(SEED),
        clock=lambda: now[0],
    )

    async def run() -> None:
        now[0] = 6060.0  # window [6000, 6060) closed, with nothing in it
        await agent.tick()
        await agent.drain()

    asyncio.run(run())
    releases = [body for topic, body in published if topic == algorithm.topic]
    if len(releases) != 1:
        raise AssertionError(f"the agent published {len(releases)} {algorithm.topic} releases (see the log)")
    return releases[0]
