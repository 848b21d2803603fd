"""Twin runs: the release path on two neighbouring inputs, every public artefact compared.

A twin run feeds the ingest pipeline (validation, the online SOA, the release agent) with a
scripted sequence of steps on an injected clock, in process, with an in-memory ledger and state
store and seeded randomness. It records everything the public can see:

* the messages on the public topics, in order: topic, key, and the release JSON with its DP outputs
  taken out (``hypothesis``, ``distribution``, ``certificate.dp_outputs``), and the clock's time at
  which each was published;
* the ledger's entries (ids, window ids, mechanisms, ε, δ, whether published) and refusals;
* the public pages' JSON (``/streams`` and ``/streams/{id}/budget``).

Two runs on neighbouring inputs must agree on all of it: only the DP outputs themselves may differ
(they are what differential privacy makes indistinguishable). :func:`assert_twins` compares field
by field and names the first difference.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from privstream.agents.online import OnlineLearners, OnlineStream
from privstream.agents.pipeline import IngestPipeline, RawRecord
from privstream.agents.progress import Progress
from privstream.agents.releases import ReleaseAgent
from privstream.agents.validation import ExampleValidator, integer_domain, vector_domain
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.randomness import seeded
from privstream.stream_app.metrics import ServiceMetrics
from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.store.sqlite_state import SqliteStateStore
from privstream.stream_app.web.public import budget, streams_overview

#: A fixed, public start of the schedule in the tests (2026-01-01T00:00:00Z): a multiple of 60 s.
T0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()


class FakeClock:
    """An injected clock: tests move time, nothing sleeps."""

    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Step:
    """At clock time ``at``: these raw example messages arrive (then the agent's timer ticks)."""

    at: float
    messages: Sequence[dict[str, Any]] = ()


@dataclass
class Observed:
    """Everything public a run produced (``dp`` holds the DP outputs, which are not compared)."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    dp: list[Any] = field(default_factory=list)
    ledger: list[dict[str, Any]] = field(default_factory=list)
    refusals: int = 0
    pages: dict[str, Any] = field(default_factory=dict)
    late: float = 0.0
    failures: float = 0.0
    invalid: dict[str, int] = field(default_factory=dict)  # operator-side: dead letters by reason


def _accepts(function: Callable[..., Any], name: str) -> bool:
    return name in inspect.signature(function).parameters


def split_dp(release: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the release minus its DP outputs, the DP outputs)."""
    public = json.loads(json.dumps(release))
    dp = {key: public.pop(key) for key in ("hypothesis", "distribution") if key in public}
    dp["dp_outputs"] = public["certificate"].pop("dp_outputs", None)
    return public, dp


class TwinRun:
    """One run of the release path on an injected clock."""

    def __init__(
        self,
        stream: StreamConfig,
        *,
        budget: tuple[float, float] | None = None,
        rng_seed: int = 0,
        executor: Any = None,
        learner: Any = None,
    ):
        from privstream.stream_app.service import release_policy

        self.stream = stream
        self.clock = FakeClock()
        # a stream of feature vectors has no class and no online SOA: private releases only
        hclass = parse_class_spec(stream.hypothesis_class) if stream.kind == "class" else None
        policy = release_policy(stream, hclass)
        if learner is not None:  # a learner swapped in (e.g. one that fails on some data)
            # the configured product with its algorithm swapped: every other field (ε per level) kept
            products = (dataclasses.replace(policy.products[0], algorithm=learner), *policy.products[1:])
            policy = dataclasses.replace(policy, products=products)
        release = stream.release
        assert release is not None
        self.ledger = SqliteLedger.open(
            ":memory:", budgets={stream.name: budget or (release.epsilon_budget, release.delta_budget)}
        )
        self.store = SqliteStateStore(":memory:")
        self.store.generation = "gen0"  # both twins: the same store generation (it names count windows)
        self.ledger.ledger_id = "ledger0"  # both twins: the same ledger (its id is drawn at random)
        self.metrics = ServiceMetrics([stream.name], release_streams={stream.name: (0.0, ["x"])})
        self.observed = Observed()
        options: dict[str, Any] = {}
        if _accepts(ReleaseAgent.__init__, "clock"):
            options["clock"] = self.clock
        self.agent = ReleaseAgent(
            {stream.name: policy},
            self.store,
            self.ledger,
            self._publish,
            self.metrics,
            library_version="test",
            executor=executor,
            rng_factory=lambda key: seeded(zlib.crc32(f"{rng_seed}/{key}".encode())),
            **options,
        )
        validator_options: dict[str, Any] = {}
        if _accepts(ExampleValidator.__init__, "clock"):
            skew = getattr(release.window, "max_event_time_skew_seconds", None)
            validator_options = {
                "clock": self.clock,
                "event_time_skew": {stream.name: skew} if release.window.kind == "time" else {},
            }
        user_level = frozenset({stream.name}) if release.privacy_unit == "user" else frozenset()
        if hclass is not None:
            domain = integer_domain(hclass.check_point)
            online = {stream.name: OnlineStream(stream.name, hclass, stream.soa_tie)}
        else:
            domain, online = vector_domain(stream.features or 0), {}
        validator = ExampleValidator({stream.name: domain}, user_level=user_level, **validator_options)
        learners = OnlineLearners(online, self.metrics, self.store)
        self.pipeline = IngestPipeline(validator, learners, self.metrics, Progress(), self.agent)
        self.offset = 0

    async def _publish(self, topic: str, stream_id: str, release: bytes) -> None:
        public, dp = split_dp(json.loads(release))
        self.observed.messages.append(
            {"topic": topic, "key": stream_id, "release": public, "published_at": self.clock()}
        )
        self.observed.dp.append(dp)

    async def run(self, steps: Sequence[Step]) -> Observed:
        for step in steps:
            self.clock.now = step.at
            records = []
            for message in step.messages:
                records.append(
                    RawRecord(
                        "examples", 0, self.offset, None, json.dumps(message).encode(), int(step.at * 1000)
                    )
                )
                self.offset += 1
            if records:
                self.pipeline.process(records)
            tick = getattr(self.agent, "tick", None)
            if tick is not None:
                await tick()
            await self.agent.drain()
            await asyncio.sleep(0)
        return self.finish()

    def finish(self) -> Observed:
        o = self.observed
        sid = self.stream.name
        o.ledger = [
            {
                "entry_id": c.entry_id,
                "window_id": c.window_id,
                "mechanism": c.mechanism,
                "epsilon": c.epsilon,
                "delta": c.delta,
                "published": c.published,
            }
            for c in self.ledger.entries(sid)
        ]
        o.refusals = self.ledger.refusals(sid)
        o.pages = {
            "streams": json.loads(json.dumps(streams_overview([self.stream], self.ledger))),
            "budget": json.loads(json.dumps(budget(self.stream, self.ledger))),
        }
        o.late = self.metrics.late_examples.labels(stream=sid)._value.get()
        o.failures = self.metrics.release_failures.labels(stream=sid)._value.get()
        o.invalid = {k: v for k, v in self.metrics.invalid_counts.items() if v}
        return o


async def twins(
    stream: StreamConfig, first: Sequence[Step], second: Sequence[Step], **options: Any
) -> tuple[Observed, Observed]:
    """Run the two neighbouring inputs with the same seeds."""
    a = await TwinRun(stream, **options).run(first)
    b = await TwinRun(stream, **options).run(second)
    return a, b


def assert_twins(a: Observed, b: Observed) -> None:
    """Every public artefact equal, field by field; the first difference is named."""
    assert len(a.messages) == len(b.messages), (
        f"different numbers of public messages: {len(a.messages)} vs {len(b.messages)}: "
        f"{[m['release']['certificate'].get('window') for m in a.messages]} vs "
        f"{[m['release']['certificate'].get('window') for m in b.messages]}"
    )
    for i, (x, y) in enumerate(zip(a.messages, b.messages, strict=True)):
        _same(x, y, f"message {i}")
    assert a.ledger == b.ledger, f"ledger entries differ: {a.ledger} vs {b.ledger}"
    assert a.refusals == b.refusals, f"refusals differ: {a.refusals} vs {b.refusals}"
    _same(a.pages, b.pages, "public pages")


def _same(x: Any, y: Any, where: str) -> None:
    if isinstance(x, dict) and isinstance(y, dict):
        assert x.keys() == y.keys(), f"{where}: fields differ: {sorted(x.keys() ^ y.keys())}"
        for key in x:
            _same(x[key], y[key], f"{where}.{key}")
    elif isinstance(x, list) and isinstance(y, list):
        assert len(x) == len(y), f"{where}: lengths differ: {len(x)} vs {len(y)}"
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            _same(u, v, f"{where}[{i}]")
    else:
        assert x == y, f"{where}: {x!r} vs {y!r}"


def example(
    x: int | list[float],
    *,
    at: float | None = None,
    user: str | None = None,
    stream: str = "s",
    y: int | None = None,
) -> dict[str, Any]:
    """A raw example message (``at``: its event time, Unix seconds); ``y`` defaults to ``1[x >= 600]``
    for a point and to ``1[x_2 >= x_1]`` for a feature vector."""
    label = y if y is not None else int(x >= 600) if isinstance(x, int) else int(x[-1] >= x[0])
    message: dict[str, Any] = {"stream_id": stream, "x": x, "y": label}
    if at is not None:
        message["event_time"] = datetime.fromtimestamp(at, UTC).isoformat()
    if user is not None:
        message["user_id"] = user
    return message
