"""The release agent: ties the rooms together. It takes valid examples in, closes windows on the
public schedule, schedules each node's release with its deadline, and for each node, in the
schedule's order, has its releases prepared (:mod:`.preparation`) and published at the deadline
(:mod:`.publishing`); on assignment and first sight of a stream it recovers what a crash left.

The schedule, which releases exist and when they are due, is a function of the configuration and
the clock only (see the package's docstring).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from privstream.agents.interfaces import (
    ReleaseMetrics,
    StateStore,
    WindowData,
)
from privstream.agents.ledger_port import PrivacyLedger
from privstream.agents.releases.admission import Admission, Row
from privstream.agents.releases.guard import DEADLINE_GUARD_SECONDS, DeadlineGuard
from privstream.agents.releases.nodes import build_node, ingest_rule, node_released, window_info
from privstream.agents.releases.policy import ReleasePolicy, samples_at_ingest
from privstream.agents.releases.preparation import NodePreparer
from privstream.agents.releases.publishing import DeadlinePublisher, Publisher
from privstream.agents.releases.schedule import (
    close_moment,
    close_time,
    first_open_time_window,
    unreleased_count_windows,
    unreleased_nodes,
)
from privstream.agents.releases.state import NodeJob, Ready, StreamState
from privstream.agents.timing import ExecutorFits, FitRunner, Slots
from privstream.agents.windows import (
    completed_nodes,
    count_family,
    count_window_index,
    node_examples,
    node_id,
    node_windows,
    time_window_index,
)
from privstream.learning.errors import InvariantError
from privstream.learning.randomness import RandomSource
from privstream.schemas import WindowInfo

log = logging.getLogger(__name__)


class ReleaseAgent:
    """Accumulates windows and releases them; one instance per worker."""

    def __init__(
        self,
        policies: dict[str, ReleasePolicy],
        store: StateStore,
        ledger: PrivacyLedger,
        publish: Publisher,
        metrics: ReleaseMetrics,
        *,
        library_version: str,
        runner: FitRunner | None = None,
        rng_factory: Callable[[str], RandomSource] | None = None,
        clock: Callable[[], float] = time.time,
        partition_of: Callable[[str], int] | None = None,
        offload: Callable[..., Awaitable[Any]] = asyncio.to_thread,
    ):
        self.policies = policies
        self.store = store
        self.ledger = ledger
        self.metrics = metrics
        # The public clock of the schedule and the deadlines (tests inject one and move it).
        self.clock = clock
        # Where learners run: the service's runner gives each stream its own process and stops a
        # fit at its deadline; by default the event loop's threads (tests, offline).
        self.runner: FitRunner = runner if runner is not None else ExecutorFits(clock)
        # Blocking calls of the ledger and the store (threads; tests may run them inline).
        self._offload = offload
        # Tests inject seeded generators (rng_factory); production passes None: the learner's
        # secure default.
        self.preparer = NodePreparer(
            ledger,
            self.runner,
            metrics,
            clock=clock,
            offload=offload,
            rng_factory=rng_factory,
            library_version=library_version,
        )
        self.publisher = DeadlinePublisher(ledger, publish, metrics, clock, offload)
        self._streams = {
            sid: StreamState(slots=None if p.slot(0) is None else Slots()) for sid, p in policies.items()
        }
        self._tasks: set[asyncio.Task[None]] = set()
        # How each stream's time windows take rows in; a bottom-k window's priorities are secret
        # (secure randomness; tests inject a seeded source per stream).
        self._ingest_rules = {
            sid: ingest_rule(
                p, rng_factory(f"ingest-{sid}") if rng_factory and samples_at_ingest(p) else None
            )
            for sid, p in policies.items()
        }
        started = clock()
        self._start = {
            sid: p.schedule_start if p.schedule_start is not None else started for sid, p in policies.items()
        }
        # Ownership: a stream is served by the owner of its key's partition of the examples topic;
        # None: this agent owns every stream (one worker, tests).
        self._partition_of = partition_of
        self._owned: set[int] = set()  # the examples topic's partitions assigned to this worker
        # Ingest holds off while a node is prepared and around the deadlines of releases not yet out.
        self.guard = DeadlineGuard(clock, self._streams.values())
        # User level: the individual filter charges users as their rows arrive (see .admission),
        # and those of rows stored before (by a version that charged them at the close).
        self.admission = Admission(ledger)
        for p in policies.values():
            if p.privacy_unit == "user" and p.window_kind == "time":
                self.admission.admit_stored(p, store)

    #: At most this many windows are closed per tick (a catch-up after long downtime goes on the next).
    MAX_WINDOWS_PER_TICK = 1000

    # --- intake -----------------------------------------------------------------------------
    def observe_batch(
        self,
        stream_id: str,
        partition: int,
        offsets: Sequence[int],
        xs: Sequence[int | list[float]],
        ys: Sequence[int],
        users: Sequence[str | None],
        event_times: Sequence[datetime | None],
        stamps_ms: Sequence[int | None],
    ) -> None:
        """Buffer valid examples of one stream and partition (in offset order); schedule the
        windows that closed. Examples of messages buffered before (replays) are skipped."""
        policy = self.policies.get(stream_id)
        if policy is None:
            return
        state = self._streams[stream_id]
        if not state.recovered and (not policy.partitioned or self._owns(stream_id)):
            state.recovered = True
            self._spawn(self._recover(policy))
        if policy.window_kind == "count":
            # built by zip, at C speed: this runs for every example of the stream
            rows: list[tuple[int, Any, Any, str | None, int | None]] = list(
                zip(offsets, xs, ys, users, itertools.repeat(None, len(offsets)), strict=True)
            )
            size = policy.window_size
            seqs = self.store.append_many(stream_id, partition, rows, window_size=size)
            # A count window closes at its last example's record timestamp: when the broker took
            # it in, a public moment no other example's processing (this poll's validation,
            # learning, storage, another stream's rows ahead of it) can move. Replays are skipped
            # from the front: the rows taken in are the batch's last len(seqs).
            first_fresh = len(rows) - len(seqs)
            now: float | None = None
            for j, seq in enumerate(seqs):
                if (seq + 1) % size == 0:
                    if now is None:
                        now = self.clock()
                    closed_at = close_moment(stamps_ms[first_fresh + j], now)
                    self._schedule_window(policy, state, count_window_index(seq, size), closed_at)
            return
        if policy.window_seconds is None:
            raise InvariantError("invariant broken: policy.window_seconds is not None")
        first_open = self._next_time_window(policy, state)
        timed: list[Row] = []
        now = self.clock()
        for o, x, y, u, t in zip(offsets, xs, ys, users, event_times, strict=True):
            # No event time: the arrival on the worker's clock (a Kafka timestamp is the
            # producer's to choose, like an event time, so it is not trusted either).
            moment = t.timestamp() if t is not None else now
            index = time_window_index(moment, policy.window_seconds)
            if index < first_open:
                self.metrics.late_example(stream_id)  # its window was closed already
                continue
            timed.append((o, x, y, u, index))
        if policy.privacy_unit == "user" and timed:
            # The individual filter, before anything is stored: each user present pays for every
            # node covering the window at their first row, kept or not; who cannot pay is left out.
            timed, excluded = self.admission.admit(policy, timed, first_open=first_open, now=now)
            if excluded:
                self.metrics.users_excluded(stream_id, excluded)  # private: operators only
        # A capped node keeps its window's first rows (vectors) or a bottom-k sample (integer
        # classes): the rest are never stored, so a window's private size costs nothing at its close.
        keep_first, priorities = self._ingest_rules[stream_id]
        drawn = priorities(len(timed)) if priorities is not None and timed else None
        # Fenced against the close: on a stream spread over partitions the owner closes windows
        # while other workers store rows; a row of a window closed meanwhile is late, not lost.
        late = self.store.append_time_rows(
            stream_id, partition, timed, keep_first=keep_first, priorities=drawn
        )
        for _ in range(late):
            self.metrics.late_example(stream_id)
        if self._owns(stream_id):
            self._close_due_time_windows(policy, state, now)

    # --- the public schedule ----------------------------------------------------------------------
    def _owns(self, stream_id: str) -> bool:
        if self._partition_of is None:
            return True
        return self._partition_of(stream_id) in self._owned

    def _next_time_window(self, policy: ReleasePolicy, state: StreamState) -> int:
        """The first time window not closed yet (:func:`~.schedule.first_open_time_window`)."""
        if state.next_time_window is None:
            start = self._start[policy.stream_id]
            state.next_time_window = first_open_time_window(self.store, policy, start)
        return state.next_time_window

    def _close_due_time_windows(self, policy: ReleasePolicy, state: StreamState, now: float) -> None:
        """Schedule every window whose close time has come, in order, empty ones included."""
        index = self._next_time_window(policy, state)
        for _ in range(self.MAX_WINDOWS_PER_TICK):
            if close_time(policy, index) > now:
                break
            self._schedule_window(policy, state, index, close_time(policy, index))
            index += 1
        state.next_time_window = index

    async def tick(self) -> None:
        """The timer: close the time windows due on the clock.

        The service calls it every second at most; tests call it after moving their clock."""
        now = self.clock()
        for stream_id, policy in self.policies.items():
            if policy.window_kind == "time" and self._owns(stream_id):
                state = self._streams[stream_id]
                if not state.recovered:
                    state.recovered = True
                    self._spawn(self._recover(policy))
                self._close_due_time_windows(policy, state, now)

    def _family(self, policy: ReleasePolicy) -> str:
        if policy.window_kind == "count":
            return count_family(self.store.generation, policy.window_size)
        return policy.family

    def _deadline(
        self, policy: ReleasePolicy, state: StreamState, level: int, closed_at: float
    ) -> float | None:
        """The deadline of a node of ``level`` that closed at ``closed_at``: the end of its
        publication slot (:class:`~privstream.agents.timing.Slots`). A time window caught up after
        downtime keeps its scheduled close, so its deadline may have passed: then its default goes
        out at once, stamped with the deadline (its fate a function of time only)."""
        length = policy.slot(level)
        return None if state.slots is None or length is None else state.slots.next(closed_at, length)

    def _schedule_window(
        self, policy: ReleasePolicy, state: StreamState, index: int, closed_at: float
    ) -> None:
        """Schedule window ``index``'s release and those of the tree's nodes it completes, in that
        order, now: the order of releases and their deadlines are fixed when the window closes,
        never by how long a learner runs."""
        for level, node in [(0, index), *completed_nodes(index, policy.top_level)]:
            self._schedule_node(policy, state, level, node, closed_at)

    def _schedule_node(
        self, policy: ReleasePolicy, state: StreamState, level: int, index: int, closed_at: float
    ) -> None:
        """Release node ``(level, index)`` once per run (recovery and the live trigger may both ask)."""
        window_id = node_id(self._family(policy), level, index)
        if window_id in state.scheduled:
            return
        state.scheduled.add(window_id)
        deadline = self._deadline(policy, state, level, closed_at)
        self._spawn(self._release_node(policy, level, index, deadline))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the release tasks in flight (tests; graceful shutdown: releases with a deadline
        are published at their deadline)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def clear_of_deadlines(self, guard: float = DEADLINE_GUARD_SECONDS) -> None:
        """Return once no release needs the worker to itself (:meth:`DeadlineGuard.clear`)."""
        await self.guard.clear(guard)

    # --- recovery -----------------------------------------------------------------------------
    def on_partitions_assigned(self, partitions: set[int]) -> None:
        """Recover the streams whose buffered examples came from these source partitions.

        Needed even when no new message arrives: a worker that crashed after committing its
        offsets but before releasing the windows they closed leaves those windows (and perhaps
        charged but unpublished releases) in the store and the ledger, and nothing else would
        ever wake them up.
        """
        self._owned = set(partitions)
        for stream_id, policy in self.policies.items():
            state = self._streams[stream_id]
            state.recovered = False  # a rebalance may have moved the stream here or back
            state.next_time_window = None  # re-read from the store: another owner may have closed some
            if policy.partitioned:  # one owner: its key partition's (the others only store rows)
                wake = self._owns(stream_id)
            else:
                wake = bool(self.store.partitions(stream_id) & partitions) or (
                    policy.window_kind == "time" and self._owns(stream_id)
                )
            if wake:
                state.recovered = True
                self._spawn(self._recover(policy))

    async def _recover(self, policy: ReleasePolicy) -> None:
        """On first sight of a stream: publish its outbox, release windows that closed before a crash
        (their slots start now; a node reserved before the crash keeps its reservation's deadline)."""
        await self.replay_outbox(policy.stream_id)
        closed = set(self.store.closed_windows(policy.stream_id))
        now = self.clock()
        # Nodes of the tree whose last window was closed but which were not (a crash between the
        # two): release them now (their children's data is kept until they are built; a node
        # reserved before the crash is recomputed from its reservation's seed).
        family, state = self._family(policy), self._streams[policy.stream_id]
        for level, index in unreleased_nodes(closed, family, policy.top_level):
            self._schedule_node(policy, state, level, index, now)
        if policy.window_kind == "count":
            for index in unreleased_count_windows(self.store, policy, family, closed):
                self._schedule_window(policy, state, index, now)

    async def replay_outbox(self, stream_id: str | None = None) -> int:
        """Publish charged releases not confirmed published (after a crash), with their scheduled
        time as the record's timestamp; returns how many."""
        return await self.publisher.replay_outbox(self.policies, stream_id)

    # --- releasing ----------------------------------------------------------------------------
    def _node_released(self, policy: ReleasePolicy, level: int, index: int, outcome: str) -> None:
        node_released(self.store, policy, self._family(policy), level, index, outcome)

    async def _release_node(
        self, policy: ReleasePolicy, level: int, index: int, deadline: float | None
    ) -> None:
        """Release node ``(level, index)``: a window (level 0) or 2^level consecutive ones.

        The learner's input is the node's compact data in the state store
        (:func:`~privstream.agents.releases.nodes.build_node`), kept until the node's parent is
        built and the node released.
        """
        family = self._family(policy)
        info = window_info(policy, family, level, index)

        first_window = None
        if policy.window_kind == "time" and policy.window_seconds is not None:
            first_window = time_window_index(self._start[policy.stream_id], policy.window_seconds)

        def load() -> WindowData:
            data = node_examples(
                build_node(self.store, policy, family, level, index, first_window=first_window)
            )
            return self.admission.without_unpaid(policy.stream_id, node_windows(level, index), data)

        await self._release(
            policy,
            info.window_id,
            info,
            load=load,
            close=partial(self._node_released, policy, level, index),
            deadline=deadline,
            level=level,
        )

    async def _release(
        self,
        policy: ReleasePolicy,
        window_id: str,
        info: WindowInfo,
        load: Callable[[], WindowData],
        close: Callable[[str], None],
        deadline: float | None = None,
        level: int = 0,
    ) -> None:
        """Prepare the node's releases (its fits, one node at a time per stream, in the schedule's
        order) while waiting for the deadline; then publish what is ready, product by product,
        after the stream's previous node."""
        stream_id = policy.stream_id
        state = self._streams[stream_id]
        previous, mine = state.published, asyncio.get_running_loop().create_future()
        state.published = mine
        readies = [Ready(product) for product in policy.products]
        loaded: list[WindowData] = []  # the window is read from the store once, if at all

        async def window() -> WindowData:
            if not loaded:
                loaded.append(await self._offload(load))
            return loaded[0]

        job = NodeJob(
            policy=policy,
            state=state,
            window_id=window_id,
            info=info,
            window=window,
            deadline=deadline,
            level=level,
            readies=readies,
        )
        preparing = asyncio.ensure_future(self.preparer.prepare(job))
        out = self.guard.due(deadline)
        try:
            if previous is not None:
                await previous  # the stream's releases go out in the schedule's order
            outcomes = await self.publisher.publish_node(job)
            self.guard.out(out)
            await preparing  # its fits are over (a fit past the deadline was stopped there)
            if "lost" in outcomes:
                # Another worker owns the stream's partition now and releases this window; if the
                # partition comes back here, the recovery on assignment schedules it again.
                state.scheduled.discard(window_id)
            elif "failed" not in outcomes:  # a failed product keeps the window for a retry after restart
                await self._offload(close, ",".join(outcomes))
        finally:
            self.guard.forget(out)
            preparing.cancel()
            mine.set_result(None)

    # --- status ---------------------------------------------------------------------------------
    def stream_status(self, stream_id: str) -> dict[str, Any]:
        state = self._streams[stream_id]
        return {"releases_this_run": state.releases, "exhausted": state.exhausted}
