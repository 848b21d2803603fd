"""Twin runs: the release path on two neighbouring inputs, every public artefact and time compared.

A twin run feeds the ingest pipeline (validation, the online SOA, the release agent) with a
scripted sequence of steps on an injected clock, in process, with an in-memory ledger and state
store and seeded randomness. It records everything the public can see:

* the messages on the public topics, in order: topic, key, and the release JSON with its DP outputs
  taken out (``hypothesis``, ``distribution``, ``certificate.dp_outputs``); when each arrived on the
  topic (the clock's time at the send) and the record's timestamp (the send time when the publisher
  is given none, as Kafka stamps it);
* the ledger's entries (public ids, window ids, mechanisms, ε, δ, whether published) and refusals;
* the public pages' JSON (``/streams``, ``/streams/{id}/budget``, ``/streams/{id}/releases``) after
  every event, and when each version of each page was first shown.

**Time is simulated.** Nothing runs in a thread: the ledger and store calls run inline and the
learners run in :class:`SimulatedFits`, which computes a fit at once and then holds its result
until the clock has moved by the fit's simulated duration (what the learner charged with
:meth:`FakeClock.spend`; a learner "slow in n" spends time in proportion to its input). The run
moves the clock from event to event (the steps, every deadline and every fit's end, in time
order) and lets the agent settle after each, so two runs see exactly the same sequence of times.
Against a release agent without deadlines or fit runners (today's code before them), a learner's
spent time moves the clock at once, as a fit holding up the worker would.

Two runs on neighbouring inputs must agree on all of it: only the DP outputs themselves may differ
(they are what differential privacy makes indistinguishable). :func:`assert_twins` compares field
by field and names the first difference.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import inspect
import json
import math
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
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
from privstream.stream_app.web import page, public

try:
    from privstream.agents.pipeline import process_in_chunks
except ImportError:  # a pipeline before chunked ingest: a poll is processed at once
    process_in_chunks = None  # type: ignore[assignment]
try:
    from privstream.agents.releases.guard import DEADLINE_GUARD_SECONDS
except ImportError:  # a release agent before the guard's module
    DEADLINE_GUARD_SECONDS = 0.25
try:
    from privstream.agents.pipeline import chunked
except ImportError:  # a pipeline that processes a chunk's records whole, however many rows they hold
    chunked = None  # type: ignore[assignment]

#: A fixed, public start of the schedule in the tests (2026-01-01T00:00:00Z): a multiple of 60 s.
T0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()

#: The publication slot of the twins' streams when their configuration leaves it to the service.
TWIN_SLOT_SECONDS = 5.0


class FakeClock:
    """An injected clock: tests move time, nothing sleeps in real time.

    ``sleep_until`` waits until the clock is moved to or past the moment; ``spend`` is how a
    simulated learner says how long its fit takes (:class:`SimulatedFits` holds the fit's result
    for that long; without a simulation, ``spend`` moves the clock at once).
    """

    def __init__(self, now: float = T0, *, simulated: bool = False):
        self._now = now
        self._waiters: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = 0
        self.simulated = simulated
        self.spent = 0.0

    def __call__(self) -> float:
        return self._now

    @property
    def now(self) -> float:
        return self._now

    @now.setter
    def now(self, moment: float) -> None:
        self._now = moment
        while self._waiters and self._waiters[0][0] <= moment:
            _, _, waiter = heapq.heappop(self._waiters)
            if not waiter.done():
                waiter.set_result(None)

    async def sleep_until(self, moment: float) -> None:
        if moment <= self._now:
            return
        waiter = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (moment, self._order, waiter))
        self._order += 1
        await waiter

    def next_wakeup(self) -> float | None:
        """The earliest moment something waits for, if anything does."""
        while self._waiters and self._waiters[0][2].done():
            heapq.heappop(self._waiters)
        return self._waiters[0][0] if self._waiters else None

    def spend(self, seconds: float) -> None:
        if self.simulated:
            self.spent += seconds
        else:
            self.now = self._now + seconds

    def take_spent(self) -> float:
        spent, self.spent = self.spent, 0.0
        return spent


class SimulatedFits:
    """A fit runner on the fake clock (``FitRunner``): the fit runs at once, inline; its result is
    held until the clock has moved by the time it spent, or it is given up at its deadline. A fit
    that raises ``BrokenProcessPool`` stands for one whose process died."""

    def __init__(self, clock: FakeClock):
        self.clock = clock

    async def run(self, stream_id: str, call: Callable[[], Any], deadline: float | None) -> Any:
        from privstream.agents.timing import FitProcessDied, FitTimedOut

        start = self.clock()
        self.clock.take_spent()
        outcome: tuple[str, Any]
        try:
            outcome = ("result", call())
        except BrokenProcessPool as exc:
            outcome = ("died", exc)
        except Exception as exc:
            outcome = ("raised", exc)
        end = start + self.clock.take_spent()
        if deadline is not None and end > deadline:
            await self.clock.sleep_until(deadline)
            raise FitTimedOut(f"simulated fit ends at {end}, after its deadline {deadline}")
        await self.clock.sleep_until(end)
        kind, value = outcome
        if kind == "died":
            raise FitProcessDied(str(value))
        if kind == "raised":
            raise value
        return value


async def inline(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """The agent's offload, inline: no thread, so every run takes the same steps in the same order."""
    return function(*args, **kwargs)


async def settle() -> None:
    """Let every task that can run, run (all of a simulated run's work is on this event loop)."""
    loop = asyncio.get_running_loop()
    for _ in range(100_000):
        await asyncio.sleep(0)
        if not getattr(loop, "_ready", None):
            return


async def move_clock(clock: FakeClock, moment: float, settled: Callable[[], Any] | None = None) -> None:
    """Move the clock to ``moment`` through every moment something waits for before it, in order,
    letting the agent settle (and calling ``settled``) after each."""
    while (wakeup := clock.next_wakeup()) is not None and wakeup <= moment:
        clock.now = max(wakeup, clock.now)
        await settle()
        if settled is not None:
            settled()
    clock.now = max(moment, clock.now)
    await settle()
    if settled is not None:
        settled()


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
    page_times: list[tuple[float, str, Any]] = field(default_factory=list)  # (time, page, JSON) on change
    late: float = 0.0
    failures: float = 0.0
    invalid: dict[str, int] = field(default_factory=dict)  # operator-side: dead letters by reason
    defaults: dict[str, float] = field(default_factory=dict)  # operator-side: defaults by stream/reason

    def first_shown(self, page: str) -> list[tuple[float, Any]]:
        """When each version of a page was first shown, and what it showed."""
        return [(moment, content) for moment, name, content in self.page_times if name == page]


def _accepts(function: Callable[..., Any], name: str) -> bool:
    return name in inspect.signature(function).parameters


def split_dp(release: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the release minus its DP outputs, the DP outputs)."""
    public_part = json.loads(json.dumps(release))
    dp = {key: public_part.pop(key) for key in ("hypothesis", "distribution") if key in public_part}
    dp["dp_outputs"] = public_part["certificate"].pop("dp_outputs", None)
    # a quality estimate's figures are DP outputs too (the rest of each evaluation is public)
    dp["evaluations"] = [evaluation.pop("estimate") for evaluation in public_part.get("evaluations", [])]
    return public_part, dp


def without_estimates(summary: dict[str, Any]) -> dict[str, Any]:
    """A page's release summary minus its quality estimates' DP figures (the rest is public)."""
    for evaluation in summary.get("evaluations", []):
        evaluation.pop("estimate", None)
    return summary


class TwinRun:
    """One run of the release path on an injected clock, for one stream or several."""

    def __init__(
        self,
        stream: StreamConfig | Sequence[StreamConfig],
        *,
        budget: tuple[float, float] | None = None,
        rng_seed: int = 0,
        learner: Any = None,
        learners: dict[str, Any] | None = None,
        slot_seconds: float = TWIN_SLOT_SECONDS,
        ledger: Any = None,
        store: Any = None,
        store_seconds_per_row: float = 0.0,
        ingest_seconds_per_example: float = 0.0,
        read_seconds_per_byte: float = 0.0,
        partitions: int = 1,
        watch_pages: bool = True,
        schedule_start: float | None = None,
    ):
        """``ledger`` and ``store``: another run's, to restart on them (a crash and a new worker).

        ``store_seconds_per_row``: what reading one stored row back costs on the run's clock (the
        store's decode of a window's or node's rows), so that work at a node's close whose size is
        private shows in the run's times as it does on a real machine. ``ingest_seconds_per_example``:
        what validating, learning and storing one example of a poll costs on the run's clock (the
        time passes before the release agent takes the stream's examples of the poll in).
        ``read_seconds_per_byte``: what reading a message's JSON costs on the run's clock, per byte
        (charged as the validator reads a large message, the part of ingest that cannot be split);
        the ingest loop's pause knows it, as the service's measures it.
        ``partitions``: the examples topic's partitions; a stream spread over them (``partition_by``
        example or user) has a shard learner per partition, and each message goes to the partition
        its key hashes to (:func:`partition_of`), as a producer puts it. ``watch_pages=False``: the
        public pages are read once, at the end, not after every event (``page_times`` stays empty;
        an audit whose transcript leaves them out runs about twice as fast). ``schedule_start``:
        where the ledger registered the streams (their first time window holds it)."""
        from privstream.stream_app.release_policies import release_policy

        self.streams = [stream] if isinstance(stream, StreamConfig) else list(stream)
        self.stream = self.streams[0]
        # Deadlines need a runner the clock drives; without one (a release agent before deadlines)
        # a learner's spent time moves the clock at once.
        self.simulated = _accepts(ReleaseAgent.__init__, "runner")
        self.clock = FakeClock(simulated=self.simulated)
        swapped = dict(learners or {})
        if learner is not None:
            swapped.setdefault(self.stream.name, learner)
        policies, online, domains = {}, {}, {}
        for config in self.streams:
            # a stream of feature vectors has no class and no online SOA: private releases only
            hclass = parse_class_spec(config.hypothesis_class) if config.kind == "class" else None
            policy = release_policy(config, hclass)
            if config.name in swapped:  # a learner swapped in (e.g. one that fails on some data)
                algorithm = swapped[config.name]
                if hasattr(algorithm, "bind"):
                    algorithm.bind(self.clock)
                # the configured product with its algorithm swapped: every other field (ε per level) kept
                products = (
                    dataclasses.replace(policy.products[0], algorithm=algorithm),
                    *policy.products[1:],
                )
                policy = dataclasses.replace(policy, products=products)
            if self.simulated and policy.publish_delay_seconds is None:  # the service derives it
                policy = dataclasses.replace(policy, publish_delay_seconds=slot_seconds)
            if schedule_start is not None:  # where the ledger registered the stream
                policy = dataclasses.replace(policy, schedule_start=schedule_start)
            policies[config.name] = policy
            if hclass is not None:
                domains[config.name] = integer_domain(hclass.check_point)
                online[config.name] = OnlineStream(
                    config.name,
                    hclass,
                    config.soa_tie,
                    **({"partitions": partitions} if config.partitioned else {}),
                )
            else:
                domains[config.name] = vector_domain(config.features or 0)
        budgets = {}
        for config in self.streams:
            assert config.release is not None
            budgets[config.name] = budget or (config.release.epsilon_budget, config.release.delta_budget)
        self.ledger = ledger or SqliteLedger.open(":memory:", budgets=budgets)
        self.store = store or SqliteStateStore(":memory:")
        if store_seconds_per_row:
            self._charge_store_reads(store_seconds_per_row)
        self.store.generation = "gen0"  # both twins: the same store generation (it names count windows)
        if ledger is None:
            self.ledger.ledger_id = "ledger0"  # both twins: the same ledger (its id is drawn at random)
        names = [c.name for c in self.streams]
        self.metrics = ServiceMetrics(names, release_streams={name: (0.0, ["x"]) for name in names})
        self.observed = Observed()
        options: dict[str, Any] = {"clock": self.clock} if _accepts(ReleaseAgent.__init__, "clock") else {}
        if self.simulated:
            options |= {"runner": SimulatedFits(self.clock), "offload": inline}
        self.agent = ReleaseAgent(
            policies,
            self.store,
            self.ledger,
            self._publish,
            self.metrics,
            library_version="test",
            rng_factory=lambda key: seeded(zlib.crc32(f"{rng_seed}/{key}".encode())),
            **options,
        )
        validator_options: dict[str, Any] = {}
        if _accepts(ExampleValidator.__init__, "clock"):
            skews = {
                c.name: c.release.window.max_event_time_skew_seconds
                for c in self.streams
                if c.release is not None and c.release.window.kind == "time"
            }
            validator_options = {"clock": self.clock, "event_time_skew": skews}
        user_level = frozenset(
            c.name for c in self.streams if c.release is not None and c.release.privacy_unit == "user"
        )
        validator = ExampleValidator(domains, user_level=user_level, **validator_options)
        learners_online = OnlineLearners(online, self.metrics, self.store)
        self.pipeline = IngestPipeline(validator, learners_online, self.metrics, Progress(), self.agent)
        self.read_seconds_per_byte = read_seconds_per_byte
        if read_seconds_per_byte:
            read_json = validator._json

            def charged_json(raw: bytes) -> Any:
                self.clock.now = self.clock.now + read_seconds_per_byte * len(raw)
                return read_json(raw)

            validator._json = charged_json  # type: ignore[method-assign]
        if ingest_seconds_per_example:
            observe = self.agent.observe_batch

            def observe_batch(stream_id: str, partition: int, offsets: Sequence[int], *rest: Any) -> None:
                self.clock.now = self.clock.now + ingest_seconds_per_example * len(offsets)
                observe(stream_id, partition, offsets, *rest)

            self.agent.observe_batch = observe_batch  # type: ignore[method-assign]
        self.offset = 0
        self.partitions = partitions
        self.partitions_seen: list[int] = []  # each message's partition, in order
        self.partition_by = {c.name: c.partition_by for c in self.streams}
        self._shown: dict[str, Any] = {}
        self.watch_pages = watch_pages

    def _charge_store_reads(self, seconds_per_row: float) -> None:
        """Every row the store decodes, and every row a window's close finds stored, moves the clock
        by ``seconds_per_row``: the time passes while the work runs (the offload is inline), so a
        fit it delays starts later."""
        backend = self.store._backend
        decode = backend.points
        self.rows_read: list[int] = []

        def points(stored: Any) -> Any:
            self.rows_read.append(len(stored))
            self.clock.now = self.clock.now + seconds_per_row * len(stored)
            return decode(stored)

        backend.points = points
        # A window's close also touches every row stored in it (locks, sorts and deletes them),
        # whether or not it decodes them: charged too, so a window that kept more than the cap's
        # rows at ingest shows in the run's times.
        store, close_window = self.store, self.store.close_window
        self.rows_stored: list[int] = []

        def count(where: str, *params: Any, table: str = "examples", rows: str = "count(*)") -> int:
            statement = store._q(
                f"SELECT coalesce({rows}, 0) FROM {{{table}}} WHERE stream_id = ? AND {where}"
            )
            return int(backend.run(lambda cur: cur.execute(statement, params).fetchone()[0], mode="read"))

        def close(stream_id: str, *args: Any, **kwargs: Any) -> Any:
            index, seqs = kwargs.get("time_window"), kwargs.get("seqs")
            if index is not None:  # single rows (bottom-k windows) and chunks (time_chunks.py)
                stored = count("time_window = ?", stream_id, index) + count(
                    "time_window = ?", stream_id, index, table="example_chunks", rows="sum(n)"
                )
            elif seqs is not None:
                stored = count("seq >= ? AND seq < ?", stream_id, *seqs)
            else:
                stored = 0
            self.rows_stored.append(stored)
            self.clock.now = self.clock.now + seconds_per_row * stored
            return close_window(stream_id, *args, **kwargs)

        store.close_window = close  # type: ignore[method-assign]

    async def _publish(
        self, topic: str, stream_id: str, release: bytes, *, timestamp_ms: int | None = None
    ) -> None:
        public_part, dp = split_dp(json.loads(release))
        arrived = self.clock()
        self.observed.messages.append(
            {
                "topic": topic,
                "key": stream_id,
                "release": public_part,
                "published_at": arrived,
                # Kafka stamps a record with its send time unless the producer gives one
                "timestamp": arrived if timestamp_ms is None else timestamp_ms / 1000,
            }
        )
        self.observed.dp.append(dp)

    # --- driving the clock ---------------------------------------------------------------------
    async def _settle(self) -> None:
        if self.simulated:
            await settle()
        else:
            await self.agent.drain()
            await asyncio.sleep(0)
        self._look_at_pages()

    def _next_close(self) -> float | None:
        """The next moment a time window of a stream closes (the service's timer ticks then)."""
        closes = []
        for config in self.streams:
            window = config.release.window if config.release is not None else None
            if window is not None and window.kind == "time":
                assert window.seconds is not None
                k = math.floor((self.clock() - window.allowed_lateness_seconds) / window.seconds)
                closes.append((k + 1) * window.seconds + window.allowed_lateness_seconds)
        return min(closes, default=None)

    async def _advance_to(self, moment: float) -> None:
        """Move the clock to ``moment`` through every wakeup and every window's close before it, in
        order, settling after each (the agent's timer ticks when a window closes)."""
        if not self.simulated:
            self.clock.now = max(moment, self.clock.now)
            await self._settle()
            return
        while (close := self._next_close()) is not None and close <= moment:
            await move_clock(self.clock, close, self._look_at_pages)
            await self.agent.tick()
            await self._settle()
        await move_clock(self.clock, moment, self._look_at_pages)

    def _partition(self, message: dict[str, Any]) -> int:
        """The examples topic's partition a message goes to: its key's (:func:`partition_of`)."""
        partition = 0
        if self.partitions > 1:
            partition_by = self.partition_by.get(message.get("stream_id", ""), "stream")
            partition = partition_of(partition_by, message, self.partitions, self.offset)
        self.partitions_seen.append(partition)
        return partition

    async def _ingest(self, records: list[RawRecord]) -> None:
        """Process a poll as the service's ingest loop does: in chunks, waiting between them while
        a release's deadline is near (the clock moves on through what waits meanwhile). Against a
        pipeline or agent without them, the poll at once."""
        pause = getattr(self.agent, "clear_of_deadlines", None)
        if not self.simulated or pause is None or process_in_chunks is None:
            self.pipeline.process(records)
            return

        async def between_chunks(read_bytes: int = 0) -> None:
            if read_bytes and self.read_seconds_per_byte:  # as the service's pause: the read kept clear
                await pause(DEADLINE_GUARD_SECONDS + 3 * self.read_seconds_per_byte * read_bytes)
            else:
                await pause()
            self._look_at_pages()  # the public listener serves pages while ingest waits

        process = chunked(self.pipeline) if chunked is not None else self.pipeline.process
        ingest = asyncio.ensure_future(process_in_chunks(process, records, between_chunks))
        while True:
            await self._settle()
            if ingest.done():
                break
            wakeup = self.clock.next_wakeup()
            assert wakeup is not None, "ingest waits, and nothing on the clock would wake it"
            await self._advance_to(wakeup)
        ingest.result()

    async def run(self, steps: Sequence[Step], *, to_the_end: bool = True) -> Observed:
        """Run the steps; then (``to_the_end``) move the clock until everything scheduled went out."""
        for step in steps:
            await self._advance_to(step.at)
            records = []
            for message in step.messages:
                records.append(
                    RawRecord(
                        "examples",
                        self._partition(message),
                        self.offset,
                        None,
                        json.dumps(message).encode(),
                        int(self.clock() * 1000),
                    )
                )
                self.offset += 1
            if records:
                await self._ingest(records)
            tick = getattr(self.agent, "tick", None)
            if tick is not None:
                await tick()
            await self._settle()
        if not to_the_end:  # the worker stops here (a crash): what is in flight stays so
            return self.finish()
        # Everything scheduled goes out: move the clock through the remaining deadlines.
        while self.simulated and (wakeup := self.clock.next_wakeup()) is not None:
            await self._advance_to(wakeup)
        await self.agent.drain()
        return self.finish()

    # --- what the public sees --------------------------------------------------------------------
    def _pages(self) -> dict[str, Any]:
        """The public pages' JSON now: what the public listener serves (through its reads of the
        ledger at the run's clock, where the code has them)."""
        if hasattr(public, "PublicLedger"):
            reader: Any = public.PublicLedger(self.ledger, clock=self.clock)
            pages: dict[str, Any] = {"streams": public.streams_overview(self.streams, reader)}
            for config in self.streams:
                pages[f"budget/{config.name}"] = public.budget(config, reader)
                releases = reader.releases(config.name, limit=page.MAX_LIMIT)
                pages[f"releases/{config.name}"] = [
                    without_estimates(page.release_summary(c)) for c in releases
                ]
            return json.loads(json.dumps(pages))
        # a release agent before the public pages' reads: the ledger as it is
        pages = {"streams": public.streams_overview(self.streams, self.ledger)}
        for config in self.streams:
            pages[f"budget/{config.name}"] = public.budget(config, self.ledger)
            published = [c for c in self.ledger.entries(config.name) if c.published]
            pages[f"releases/{config.name}"] = [page.release_summary(c) for c in published]
        return json.loads(json.dumps(pages))

    def _look_at_pages(self) -> None:
        if not self.watch_pages:
            return
        for name, content in self._pages().items():
            if self._shown.get(name) != content:
                self._shown[name] = content
                self.observed.page_times.append((self.clock(), name, content))

    def finish(self) -> Observed:
        o = self.observed
        o.ledger = []
        for config in self.streams:
            o.ledger += [
                {
                    "ledger_entry_id": getattr(c, "public_id", c.entry_id),
                    "window_id": c.window_id,
                    "mechanism": c.mechanism,
                    "epsilon": c.epsilon,
                    "delta": c.delta,
                    "published": c.published,
                }
                for c in self.ledger.entries(config.name)
            ]
        o.refusals = sum(self.ledger.refusals(c.name) for c in self.streams)
        pages = self._pages()
        o.pages = {
            "streams": pages["streams"],
            "budget": pages[f"budget/{self.stream.name}"],
            **{name: content for name, content in pages.items() if name != "streams"},
        }
        o.late = sum(self.metrics.late_examples.labels(stream=c.name)._value.get() for c in self.streams)
        o.failures = sum(
            self.metrics.release_failures.labels(stream=c.name)._value.get() for c in self.streams
        )
        o.invalid = {k: v for k, v in self.metrics.invalid_counts.items() if v}
        o.defaults = {
            f"{sample.labels['stream']}/{sample.labels['reason']}": sample.value
            for metric in self.metrics.release_defaults.collect()
            for sample in metric.samples
            if sample.name.endswith("_total") and sample.value
        }
        return o


async def twins(
    stream: StreamConfig | Sequence[StreamConfig],
    first: Sequence[Step],
    second: Sequence[Step],
    **options: Any,
) -> tuple[Observed, Observed]:
    """Run the two neighbouring inputs with the same seeds."""
    a = await TwinRun(stream, **options).run(first)
    b = await TwinRun(stream, **options).run(second)
    return a, b


def assert_twins(a: Observed, b: Observed) -> None:
    """Every public artefact and time equal, field by field; the first difference is named."""
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
    _same(
        [[moment, name, content] for moment, name, content in a.page_times],
        [[moment, name, content] for moment, name, content in b.page_times],
        "public pages over time (when each version was first shown)",
    )


def _same(x: Any, y: Any, where: str) -> None:
    if isinstance(x, dict) and isinstance(y, dict):
        assert x.keys() == y.keys(), f"{where}: fields differ: {sorted(x.keys() ^ y.keys())}"
        for key in x:
            _same(x[key], y[key], f"{where}.{key}")
    elif isinstance(x, list) and isinstance(y, list):
        assert len(x) == len(y), f"{where}: lengths differ: {len(x)} vs {len(y)}: {x} vs {y}"
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            _same(u, v, f"{where}[{i}]")
    else:
        assert x == y, f"{where}: {x!r} vs {y!r}"


def partition_of(partition_by: str, message: dict[str, Any], partitions: int, offset: int) -> int:
    """The partition a producer writes a message to: its key's hash (the stream's name, the
    example's ``id`` or its ``user_id``, as ``partition_by`` says; the producer's key hash is not
    Kafka's murmur2 here, only stable), or in turn (``offset``) for an example keyed by an id it
    lacks."""
    from privstream.stream_app.cli.produce import example_key

    key = example_key(partition_by, str(message.get("stream_id")), message)
    return offset % partitions if key is None else zlib.crc32(key.encode()) % partitions


def example(
    x: int | list[float],
    *,
    at: float | None = None,
    user: str | None = None,
    stream: str = "s",
    y: int | None = None,
    example_id: str | None = None,
) -> dict[str, Any]:
    """A raw example message (``at``: its event time, Unix seconds); ``y`` defaults to ``1[x >= 600]``
    for a point and to ``1[x_2 >= x_1]`` for a feature vector."""
    label = y if y is not None else int(x >= 600) if isinstance(x, int) else int(x[-1] >= x[0])
    message: dict[str, Any] = {"stream_id": stream, "x": x, "y": label}
    if at is not None:
        message["event_time"] = datetime.fromtimestamp(at, UTC).isoformat()
    if user is not None:
        message["user_id"] = user
    if example_id is not None:
        message["id"] = example_id
    return message


# --- learners with a public run-time profile (the twins of the timing findings) ---------------------


class SlowInN:
    """A learner whose fit takes ``seconds_per_example`` per example of its input (on the run's
    clock), otherwise the wrapped one."""

    def __init__(self, inner: Any, seconds_per_example: float):
        self.inner = inner
        self.name = inner.name
        self.seconds_per_example = seconds_per_example
        self.clock: FakeClock | None = None

    def bind(self, clock: FakeClock) -> None:
        self.clock = clock

    def fit(self, hclass: Any, xs: Any, ys: Any, **kwargs: Any) -> Any:
        assert self.clock is not None, "bind the learner to the run's clock (TwinRun does)"
        self.clock.spend(self.seconds_per_example * len(xs))
        return self.inner.fit(hclass, xs, ys, **kwargs)


class DiesOn:
    """A learner whose process dies (``BrokenProcessPool``, as an out-of-memory kill of the child)
    when its input holds the point ``poison``, otherwise the wrapped one."""

    def __init__(self, inner: Any, poison: int):
        self.inner = inner
        self.name = inner.name
        self.poison = poison

    def fit(self, hclass: Any, xs: Any, ys: Any, **kwargs: Any) -> Any:
        if self.poison in list(xs):
            raise BrokenProcessPool("the learner's process died (killed on this data)")
        return self.inner.fit(hclass, xs, ys, **kwargs)
