"""The release agent: windows of examples -> a private learner -> the ledger -> the public topic.

The public schedule (issue 16; E-DESIGN.md §4). Which releases exist, their ids, their ledger
entries, their certificates and when they are published are a function of the configuration and
the clock only, never of which windows hold data:

* count windows (example level) close when their N-th example arrives (n is public);
* time windows close on the worker's clock (an injected ``clock``; production: ``time.time``):
  window ``w`` closes when ``clock() >= (w+1)*seconds + allowed_lateness_seconds``. Every window
  from the stream's first one (the one holding its schedule start) on is closed, charged and
  released, empty ones included (the learner's release on zero examples, same certificate shape);
  after downtime the missed windows are caught up in order. A timer (:meth:`ReleaseAgent.tick`)
  closes them: no example is needed. An example whose window is closed already is late (an
  operator metric) and feeds the SOA only; one dated further from the clock than the public
  maximum skew never gets here (validation dead-letters it, ``event_time_out_of_range``);
* a learner that raises on a window's data (any exception) releases its fit on zero examples with
  the same parameters and randomness (data-independent, same certificate shape, charged the same);
  a failure that is not the data's (the learner's child process died) is retried with the same
  randomness source;
* a time window's release is published at ``close time + publish_delay_seconds``; one whose learner
  needs longer is published when done and counted late (operators only: that timing depends on
  the data).

The release tree (issue 17): with ``levels = L``, the window that completes an aligned node of
level j (2^j windows, ids ``{family}-L{j}-{m}``) also schedules that node's release, at the level's
ε; each example is in one node per level, so the ledger's lifetime cost per example is the sum
over the levels (parallel composition within a level).

A node's examples live in the state store in compact form (E-DESIGN §3.3, issue 17.2): a window
that closes becomes node (0, w) (its raw rows dropped in the same transaction), a node (j, m) is
merged from its two children when its release runs, and a node's data is dropped once its parent
is built and the node released. The learner gets the node's data expanded exactly (a histogram's
(x, y) rows repeated by their counts, then put in a uniformly random order drawn from the
release's seed: a release is a function of the node's multiset of examples and the seed, and any
learner DP on sequences stays DP, see :meth:`ReleaseAgent._fit`).

For each node (a window is a node of level 0), a background task, in the schedule's order

1. returns early if the ledger already holds this node's release (a replay: it re-publishes the
   stored bytes if they were not confirmed published; nothing is recomputed with fresh noise);
2. reserves the release in the ledger (the charge, write-ahead, with a secret seed), before the
   data is loaded or the learner runs, so entry ids and budgets do not depend on either; a refusal
   (a lowered budget: a valid configuration never runs out) is recorded by the ledger. At the user
   level the reservation is the individual filter's: the users present are charged unless their
   lifetime budget would be passed, and the excluded ones' examples never reach the learner;
3. runs the learner off the event loop (an executor: the service's is a child process, off the
   GIL too) with randomness derived from the seed, so a retry after a crash is bit-identical;
4. completes the reservation with the release bytes, then publishes exactly those bytes (at the
   scheduled time) and marks them published.

A worker that lost the stream's partition to another worker (the ledger or the publisher raises
:class:`~privstream.agents.interfaces.LeaseLostError`: the service fences both by partition
leases) leaves the window, unclosed, to the new owner.

Nothing computed from raw examples without a charged mechanism leaves this module.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import Executor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

import numpy as np

from privstream.agents.interfaces import (
    LeaseLostError,
    NodeBounds,
    NodeData,
    ReleaseMetrics,
    StateStore,
    WindowData,
)
from privstream.agents.ledger_port import (
    BudgetExhaustedError,
    Charge,
    ChargeReceipt,
    NodeRange,
    PrivacyCost,
    PrivacyLedger,
)
from privstream.agents.windows import (
    bound_contributions,
    completed_nodes,
    count_family,
    count_window_id,
    count_window_index,
    node_examples,
    node_id,
    node_windows,
    shuffled,
    time_family,
    time_window_index,
    user_level_parameters,
)
from privstream.learning.hypothesis_classes import HypothesisClass
from privstream.learning.private_learners import LearnerResult
from privstream.learning.private_learners.vector_base import VectorLearnerResult
from privstream.learning.randomness import derived
from privstream.learning.sanitizers import SanitizerResult
from privstream.schemas import Certificate, HypothesisRelease, LifetimeBound, SanitizedRelease, WindowInfo

log = logging.getLogger(__name__)

#: ``publish(topic, stream_id, release_bytes)``; ``topic`` is the logical public topic name.
Publisher = Callable[[str, str, bytes], Awaitable[None]]


@dataclass(frozen=True)
class Product:
    """One private output of every window: a learner's hypothesis or a sanitizer's distribution.

    Each product of a window is charged separately (its own ledger key, its own ε and δ) and
    published on its own public topic.
    """

    topic: Literal["hypotheses", "sanitized"]
    algorithm: Any  # a PrivateLearner (topic "hypotheses") or a Sanitizer (topic "sanitized")
    epsilon: float
    delta: float = 0.0
    labelled: bool = False  # sanitizers: answer Pr[h(x) = y] over (x, y) instead of Pr[h(x) = 1]
    vector: bool = False  # a VectorLearner on feature vectors (learning.private_learners.vector_base)
    level_epsilon: tuple[float, ...] = ()  # ε per level 0..L of the release tree; () means epsilon
    level_delta: tuple[float, ...] = ()

    def cost(self, level: int) -> tuple[float, float]:
        """(ε, δ) of this product's release of a node of ``level``."""
        epsilon = self.level_epsilon[level] if self.level_epsilon else self.epsilon
        delta = self.level_delta[level] if self.level_delta else self.delta
        return epsilon, delta

    @property
    def name(self) -> str:
        return str(self.algorithm.name)

    @property
    def key(self) -> str:
        """The ledger's mechanism key: one charge per (stream, window, product)."""
        return f"{'learner' if self.topic == 'hypotheses' else 'sanitizer'}:{self.name}"


def topic_of_key(key: str) -> str:
    """The public topic of a ledger mechanism key (for re-publishing from the outbox)."""
    return "sanitized" if key.startswith("sanitizer:") else "hypotheses"


@dataclass(frozen=True)
class ReleasePolicy:
    """Everything the agent needs to release one stream privately."""

    stream_id: str
    hypothesis_class: HypothesisClass | None  # None for a stream of feature vectors
    products: tuple[Product, ...]
    feature_bounds: np.ndarray | None = None  # public (d, 2) bounds of a vector stream
    alpha: float = 0.25
    beta: float = 0.25
    window_kind: str = "count"
    window_size: int = 2000
    window_seconds: float | None = None
    allowed_lateness_seconds: float = 0.0
    publish_delay_seconds: float = 0.0
    schedule_start: float | None = None  # Unix seconds: the stream's first time window holds it
    privacy_unit: str = "example"
    user_contribution_bound: int | None = None
    expected_size: int | None = None  # where n is private: the size the algorithms use instead of n
    levels: int = 0  # the release tree's top level L
    lifetime: LifetimeBound | None = None  # the certificate's lifetime bound (None: sequential total)
    user_budget: PrivacyCost | None = None  # user level: each user's lifetime budget (all streams)
    max_node_examples: int | None = None  # feature vectors: the rows a node keeps (None: all)

    @property
    def family(self) -> str:
        """Time windows' family; count windows' also needs the store's generation (the agent's)."""
        assert self.window_seconds is not None
        return time_family(self.window_seconds)

    @property
    def neighbouring_relation(self) -> str:
        # Count windows have a public size: neighbours replace one example. A time window's size
        # depends on the data, so neighbours add or remove one (DESIGN.md §3).
        return "replace-one" if self.window_kind == "count" else "add-remove-one"


def capped(policy: ReleasePolicy) -> bool:
    """Whether the policy's nodes keep at most ``max_node_examples`` rows (feature vectors only:
    an integer class's node is an exact histogram)."""
    return policy.feature_bounds is not None and policy.max_node_examples is not None


def cap_halves_epsilon(policy: ReleasePolicy) -> bool:
    """Whether the learner of a capped node runs at half the level's ε (E-DESIGN §3.4).

    A node keeps its first ``max_node_examples`` rows by arrival. Count windows (replace-one):
    replacing an example replaces one kept row or none, so the level's ε holds. Where n is private
    (add/remove-one), adding an example among the first B pushes the B-th out: inside the kept set
    an addition becomes a replacement, two add/remove steps, so the learner runs at ε/2 (group
    privacy). Whether the cap binds depends on the private n, so the rule is data-independent:
    always, for every level (``max_node_examples: null`` keeps every row and the whole ε).

    >>> bounds = np.zeros((2, 2))
    >>> time = ReleasePolicy("s", None, (), feature_bounds=bounds, expected_size=10, max_node_examples=100,
    ...                      window_kind="time")
    >>> count = ReleasePolicy("s", None, (), feature_bounds=bounds, max_node_examples=100)
    >>> cap_halves_epsilon(time), cap_halves_epsilon(count)
    (True, False)
    """
    return capped(policy) and policy.expected_size is not None


def cap_parameters(policy: ReleasePolicy) -> dict[str, Any]:
    """The certificate's statement of a vector node's cap and its accounting rule."""
    if policy.feature_bounds is None:
        return {}
    if not capped(policy):
        return {"max_node_examples": None, "cap_rule": "uncapped: a node keeps all its examples"}
    included = " of the users the filter includes" if policy.privacy_unit == "user" else ""
    rule = f"a node keeps its first max_node_examples examples by arrival{included}; " + (
        "n is private (add/remove-one), so an addition can become a replacement inside the kept "
        "set (two add/remove steps): the learner runs at half the level's epsilon (group privacy)"
        if cap_halves_epsilon(policy)
        else "n is public (replace-one): a replacement changes at most one kept example, the learner "
        "runs at the level's epsilon"
    )
    return {"max_node_examples": policy.max_node_examples, "cap_rule": rule}


def node_expected_size(policy: ReleasePolicy, level: int) -> int:
    """The size the algorithms of a node of ``level`` use where n is private: ``expected_size·2^j``,
    at most the cap of a capped node."""
    assert policy.expected_size is not None
    size = policy.expected_size << level
    return min(size, policy.max_node_examples) if capped(policy) else size  # type: ignore[type-var]


def node_sample_size(policy: ReleasePolicy, level: int) -> int:
    """A count node's public n: ``size·2^j`` examples, at most the cap of a capped node."""
    size = policy.window_size << level
    return min(size, policy.max_node_examples) if capped(policy) else size  # type: ignore[type-var]


def stand_in(policy: ReleasePolicy, data: WindowData, level: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The data-independent input of a fallback release (issue 16.3).

    Where n is private (``expected_size`` set): zero examples. Where n is public (count windows at
    the example level): n copies of one public example (the domain's first point, or the feature
    bounds' lower corner, labelled 0), so the learner derives the same parameters from the same
    public n, and the certificate has the same shape as any other window's.

    >>> p = ReleasePolicy("s", None, (), window_size=3)
    >>> data = WindowData(np.arange(5), np.ones(5, np.uint8), np.array([None] * 5), np.arange(5))
    >>> stand_in(p, data)
    (array([0, 0, 0]), array([0, 0, 0], dtype=uint8))
    """
    if policy.expected_size is not None:
        return data.xs[:0], data.ys[:0]
    n = node_sample_size(policy, level)
    if data.xs.ndim == 2:
        assert policy.feature_bounds is not None
        xs = np.repeat(policy.feature_bounds[:, 0][None, :], n, axis=0).astype(data.xs.dtype)
    else:
        xs = np.zeros(n, dtype=data.xs.dtype)
    return xs, np.zeros(n, dtype=data.ys.dtype)


def _theorem_fields(result: Any) -> dict[str, Any]:
    """A vector learner's theorem and guarantee, as the offline CLI states them
    (``VectorLearnerResult.certificate_fields``); nothing for the other results."""
    if isinstance(result, VectorLearnerResult):
        return {"theorem": result.theorem, "guarantee": result.guarantee}
    return {}


@dataclass
class _StreamState:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    recovered: bool = False
    exhausted: bool = False
    next_time_window: int | None = None  # time windows: the first one not closed yet (the schedule)
    releases: int = 0
    scheduled: set[str] = field(default_factory=set)


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
        executor: Executor | None = None,
        rng_factory: Callable[[str], Any] | None = None,
        clock: Callable[[], float] = time.time,
        partition_of: Callable[[str], int] | None = None,
    ):
        self.policies = policies
        self.store = store
        self.ledger = ledger
        self._publish = publish
        self.metrics = metrics
        self.library_version = library_version
        self.executor = executor
        # Tests inject seeded generators; production passes None: the learner's secure default.
        self._rng_factory = rng_factory
        self._streams = {sid: _StreamState() for sid in policies}
        self._tasks: set[asyncio.Task[None]] = set()
        # The public clock of the time windows' schedule (tests inject one and move it).
        self.clock = clock
        started = clock()
        self._start = {
            sid: p.schedule_start if p.schedule_start is not None else started for sid, p in policies.items()
        }
        # Ownership (E-DESIGN §4): a stream is served by the owner of its key's partition of the
        # examples topic; None: this agent owns every stream (one worker, tests).
        self._partition_of = partition_of
        self._owned: set[int] = set()  # the examples topic's partitions assigned to this worker
        # Charged releases waiting for their public publication time: (time, order, topic, charge)
        self._parked: list[tuple[float, int, str, Charge]] = []
        self._parked_order = 0

    #: At most this many windows are closed per tick (a catch-up after long downtime goes on the next).
    MAX_WINDOWS_PER_TICK = 1000

    # --- intake -----------------------------------------------------------------------------
    def observe_batch(
        self,
        stream_id: str,
        partition: int,
        offsets: Sequence[int],
        xs: Sequence[int],
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
        if not state.recovered:
            state.recovered = True
            self._spawn(self._recover(policy))
        if policy.window_kind == "count":
            rows = [(o, x, y, u, None) for o, x, y, u in zip(offsets, xs, ys, users, strict=True)]
            size = policy.window_size
            for seq in self.store.append_many(stream_id, partition, rows):
                if (seq + 1) % size == 0:
                    self._schedule_window(policy, state, count_window_index(seq, size))
            return
        assert policy.window_seconds is not None
        first_open = self._next_time_window(policy, state)
        rows = []
        now = self.clock()
        for o, x, y, u, t in zip(offsets, xs, ys, users, event_times, strict=True):
            # No event time: the arrival on the worker's clock (a Kafka timestamp is the
            # producer's to choose, like an event time, so it is not trusted either).
            moment = t.timestamp() if t is not None else now
            index = time_window_index(moment, policy.window_seconds)
            if index < first_open:
                self.metrics.late_example(stream_id)  # its window was closed already
                continue
            rows.append((o, x, y, u, index))
        self.store.append_many(stream_id, partition, rows)
        if self._owns(stream_id):
            self._close_due_time_windows(policy, state, now)

    # --- the public schedule of time windows -------------------------------------------------------
    def _owns(self, stream_id: str) -> bool:
        if self._partition_of is None:
            return True
        return self._partition_of(stream_id) in self._owned

    def _next_time_window(self, policy: ReleasePolicy, state: _StreamState) -> int:
        """The first time window not closed yet: after the last one the store saw closed, else the
        stream's first window (the one holding its schedule start)."""
        if state.next_time_window is None:
            assert policy.window_seconds is not None
            first = time_window_index(self._start[policy.stream_id], policy.window_seconds)
            prefix = f"{policy.family}-L0-"  # level-0 windows; nodes record their own closing
            closed = [
                int(w[len(prefix) :])
                for w in self.store.closed_windows(policy.stream_id)
                if w.startswith(prefix)
            ]
            pending = self.store.pending_time_windows(policy.stream_id)
            # Catch up after a restart: windows whose rows were buffered but not released yet.
            state.next_time_window = max(closed) + 1 if closed else min([first, *pending])
        return state.next_time_window

    def close_time(self, policy: ReleasePolicy, index: int) -> float:
        """When time window ``index`` closes on the worker's clock (public)."""
        assert policy.window_seconds is not None
        return (index + 1) * policy.window_seconds + policy.allowed_lateness_seconds

    def _close_due_time_windows(self, policy: ReleasePolicy, state: _StreamState, now: float) -> None:
        """Schedule every window whose close time has come, in order, empty ones included."""
        index = self._next_time_window(policy, state)
        for _ in range(self.MAX_WINDOWS_PER_TICK):
            if self.close_time(policy, index) > now:
                break
            self._schedule_window(policy, state, index)
            index += 1
        state.next_time_window = index

    async def tick(self) -> None:
        """The timer: close the time windows due on the clock; publish parked releases now due.

        The service calls it every second; tests call it after moving their clock."""
        now = self.clock()
        for stream_id, policy in self.policies.items():
            if policy.window_kind == "time" and self._owns(stream_id):
                state = self._streams[stream_id]
                if not state.recovered:
                    state.recovered = True
                    self._spawn(self._recover(policy))
                self._close_due_time_windows(policy, state, now)
        await self._publish_due(now)

    async def _publish_due(self, now: float) -> None:
        self._parked.sort(key=lambda item: item[:2])
        while self._parked and self._parked[0][0] <= now:
            _, _, topic, charge = self._parked.pop(0)
            try:
                await self._publish(topic, charge.stream_id, charge.release)
            except LeaseLostError:  # the new owner of the stream's partition publishes it (outbox)
                continue
            await asyncio.to_thread(self.ledger.mark_published, charge.entry_id)

    def _family(self, policy: ReleasePolicy) -> str:
        if policy.window_kind == "count":
            return count_family(self.store.generation, policy.window_size)
        return policy.family

    def _schedule_window(self, policy: ReleasePolicy, state: _StreamState, index: int) -> None:
        """Schedule window ``index``'s release and those of the tree's nodes it completes, in that
        order, now: the order of releases (and so of ledger entries) is fixed when the window
        closes, never by how long a learner runs."""
        family = self._family(policy)
        for level, node in [(0, index), *completed_nodes(index, policy.levels)]:
            self._schedule(state, node_id(family, level, node), self._release_node(policy, level, node))

    def _schedule(self, state: _StreamState, window_id: str, coro: Coroutine[Any, Any, None]) -> None:
        """Release a window once per run (recovery and the live trigger may both ask)."""
        if window_id in state.scheduled:
            coro.close()
            return
        state.scheduled.add(window_id)
        self._spawn(coro)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the release tasks in flight (tests; graceful shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

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
            if self.store.partitions(stream_id) & partitions or (
                policy.window_kind == "time" and self._owns(stream_id)
            ):
                state.recovered = True
                self._spawn(self._recover(policy))

    async def _recover(self, policy: ReleasePolicy) -> None:
        """On first sight of a stream: publish its outbox, release windows that closed before a crash."""
        await self.replay_outbox(policy.stream_id)
        closed = set(self.store.closed_windows(policy.stream_id))
        # Nodes of the tree whose last window was closed but which were not (a crash between the
        # two): release them now (their children's data is kept until they are built; a node
        # reserved before the crash is recomputed from its reservation's seed).
        family, state = self._family(policy), self._streams[policy.stream_id]
        prefix = f"{family}-L0-"
        for window in sorted(int(w[len(prefix) :]) for w in closed if w.startswith(prefix)):
            for level, index in completed_nodes(window, policy.levels):
                if node_id(family, level, index) not in closed:
                    self._schedule(
                        state, node_id(family, level, index), self._release_node(policy, level, index)
                    )
        if policy.window_kind != "count":
            return
        size = policy.window_size
        complete = self.store.next_seq(policy.stream_id) // size
        stored = {i for level, i in self.store.nodes(policy.stream_id, family) if level == 0}
        for index in range(complete):
            if count_window_id(self.store.generation, index, size) in closed:
                continue
            # closed into node (0, index) before the crash (its rows are gone), or still rows
            if (
                index in stored
                or len(self.store.count_window(policy.stream_id, index * size, (index + 1) * size).seqs)
                == size
            ):
                self._schedule_window(policy, self._streams[policy.stream_id], index)

    async def replay_outbox(self, stream_id: str | None = None) -> int:
        """Publish charged releases not confirmed published (after a crash); returns how many."""
        pending = await asyncio.to_thread(self.ledger.unpublished, stream_id)
        count = 0
        lost: set[str] = set()
        parked = {c.entry_id for _, _, _, c in self._parked}
        for charge in pending:
            if charge.stream_id not in self.policies or charge.entry_id in parked or charge.stream_id in lost:
                continue
            try:
                await self._publish(topic_of_key(charge.mechanism), charge.stream_id, charge.release)
            except LeaseLostError:  # the stream's partition is another worker's now: its outbox too
                lost.add(charge.stream_id)
                continue
            await asyncio.to_thread(self.ledger.mark_published, charge.entry_id)
            log.info(
                "re-published release %s of stream %s from the ledger's outbox",
                charge.entry_id,
                charge.stream_id,
                extra={
                    "stream_id": charge.stream_id,
                    "window_id": charge.window_id,
                    "ledger_entry_id": str(charge.entry_id),
                },
            )
            count += 1
        return count

    # --- releasing ----------------------------------------------------------------------------
    def _bounds(self, policy: ReleasePolicy) -> NodeBounds:
        """The public bounds a node's data is kept within (stated in the certificate)."""
        user_level = policy.privacy_unit == "user"
        return NodeBounds(
            user_contribution_bound=policy.user_contribution_bound if user_level else None,
            # At the user level the cap applies at release, after the individual filter: a stored
            # node keeps every user's rows (each user's first k), so an excluded user takes no slot.
            max_node_examples=policy.max_node_examples
            if policy.feature_bounds is not None and not user_level
            else None,
        )

    def _build_node(self, policy: ReleasePolicy, level: int, index: int) -> NodeData:
        """Node ``(level, index)``'s compact data, built once and stored (E-DESIGN §3.3): a window's
        rows become node (0, w) and are dropped (one transaction); a higher node is merged from its
        two children, which are dropped once they were released (recorded closed). Idempotent: a
        restart finds the stored node. Never re-reads Kafka."""
        stream_id, family, bounds = policy.stream_id, self._family(policy), self._bounds(policy)
        if level > 0:
            data = self.store.merge_node(stream_id, family, level, index, bounds)
            children = {child: node_id(family, level - 1, child) for child in (2 * index, 2 * index + 1)}
            closed = self.store.closed_windows(stream_id, among=children.values())
            for child, child_id in children.items():  # the parent is built: released children go
                if child_id in closed:
                    self.store.drop_node(stream_id, family, level - 1, child)
            return data
        vectors = None if policy.feature_bounds is None else int(policy.feature_bounds.shape[0])
        user_level = policy.privacy_unit == "user"
        if policy.window_kind == "count":
            size = policy.window_size
            return self.store.close_window(
                stream_id,
                family,
                index,
                bounds,
                seqs=(index * size, (index + 1) * size),
                vectors=vectors,
                user_level=user_level,
            )
        return self.store.close_window(
            stream_id, family, index, bounds, time_window=index, vectors=vectors, user_level=user_level
        )

    def _node_released(self, policy: ReleasePolicy, level: int, index: int, outcome: str) -> None:
        """Record node ``(level, index)`` released (or refused) and drop its data if nothing needs it
        any more: a top-level node, or one whose parent is built already (a retry after a restart)."""
        stream_id, family = policy.stream_id, self._family(policy)
        self.store.mark_closed(stream_id, node_id(family, level, index), outcome)
        parent_built = self.store.load_node(stream_id, family, level + 1, index // 2) is not None
        if level == policy.levels or parent_built:
            self.store.drop_node(stream_id, family, level, index)

    async def _release_node(self, policy: ReleasePolicy, level: int, index: int) -> None:
        """Release node ``(level, index)``: a window (level 0) or 2^level consecutive ones.

        The learner's input is the node's compact data in the state store (:meth:`_build_node`),
        kept until the node's parent is built and the node released.
        """
        window_id = node_id(self._family(policy), level, index)
        windows = node_windows(level, index)
        publish_at: float | None = None
        if policy.window_kind == "count":
            size = policy.window_size
            info = WindowInfo(
                window_id=window_id,
                kind="count",
                start=windows.start * size,
                end=windows.stop * size,
                first_window=windows.start,
                last_window=windows.stop - 1,
            )
        else:
            assert policy.window_seconds is not None
            seconds = policy.window_seconds
            info = WindowInfo(
                window_id=window_id,
                kind="time",
                start=datetime.fromtimestamp(windows.start * seconds, UTC),
                end=datetime.fromtimestamp(windows.stop * seconds, UTC),
                first_window=windows.start,
                last_window=windows.stop - 1,
            )
            publish_at = self.close_time(policy, windows.stop - 1) + policy.publish_delay_seconds

        def load() -> WindowData:
            return node_examples(self._build_node(policy, level, index))

        await self._release(
            policy,
            window_id,
            info,
            load=load,
            close=partial(self._node_released, policy, level, index),
            publish_at=publish_at,
            level=level,
        )

    async def _release(
        self,
        policy: ReleasePolicy,
        window_id: str,
        info: WindowInfo,
        load: Callable[[], WindowData],
        close: Callable[[str], None],
        publish_at: float | None = None,
        level: int = 0,
    ) -> None:
        stream_id = policy.stream_id
        state = self._streams[stream_id]
        async with state.lock:  # one window at a time per stream, in window order
            loaded: list[WindowData] = []  # the window is read from the store once, if at all

            async def window() -> WindowData:
                if not loaded:
                    loaded.append(await asyncio.to_thread(load))
                return loaded[0]

            outcomes = []
            for product in policy.products:
                try:
                    outcome = await self._release_product(
                        policy, product, state, window_id, info, window, publish_at, level
                    )
                    outcomes.append(outcome)
                except LeaseLostError as exc:
                    # Another worker owns the stream's partition now and releases this window; if
                    # the partition comes back here, the recovery on assignment schedules it again.
                    log.warning(
                        "%s of window %s of stream %s not released here: %s",
                        product.key,
                        window_id,
                        stream_id,
                        exc,
                        extra={"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None},
                    )
                    state.scheduled.discard(window_id)
                    return
                except Exception:
                    # Not the data's (the fallback covers the learner): the ledger, the broker.
                    # Log, count, keep the window for a retry after a restart.
                    log.exception(
                        "%s of window %s of stream %s failed",
                        product.key,
                        window_id,
                        stream_id,
                        extra={"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None},
                    )
                    self.metrics.learner_failed(stream_id)
                    outcomes.append("failed")
            if "failed" not in outcomes:  # a failed product keeps the window for a retry after restart
                await asyncio.to_thread(close, ",".join(outcomes))

    #: Runs of a learner whose child process died, before the release fails (kept for a restart).
    CRASH_RETRIES = 2

    async def _fit(
        self,
        policy: ReleasePolicy,
        product: Product,
        data: WindowData,
        window_id: str,
        epsilon: float,
        delta: float,
        level: int = 0,
        seed: bytes | None = None,
    ) -> tuple[Any, Any, bool]:
        """Run the learner: (result, its randomness source, whether the fallback was released).

        A learner that raises on the data (any exception) is run again on zero examples with the
        same parameters, ``expected_size`` and randomness: a data-independent release, the same
        certificate shape, charged the same (issue 16.3). A child process that died (not the data's
        doing) is retried with the same randomness source, never fresh noise for the same window.
        """
        stream_id, key = policy.stream_id, product.key

        def source() -> Any:
            """The same randomness on every attempt: derived from the reservation's secret seed
            (tests inject seeded sources instead)."""
            if self._rng_factory:
                return self._rng_factory(f"{window_id}/{key}")
            return derived(seed) if seed is not None else None

        # n private: the algorithms derive everything they publish from the operator's expected size
        # (a node of level j expects 2^j windows' worth)
        size = {} if policy.expected_size is None else {"expected_size": node_expected_size(policy, level)}

        def call(xs: np.ndarray, ys: np.ndarray, rng: Any) -> Callable[[], Any]:
            if product.vector:
                return partial(
                    product.algorithm.fit,
                    xs,
                    ys,
                    epsilon=epsilon,
                    delta=delta,
                    bounds=policy.feature_bounds,
                    rng=rng,
                    **size,
                )
            if product.topic == "hypotheses":
                return partial(
                    product.algorithm.fit,
                    policy.hypothesis_class,
                    xs,
                    ys,
                    epsilon=epsilon,
                    delta=delta,
                    alpha=policy.alpha,
                    beta=policy.beta,
                    rng=rng,
                    **size,
                )
            return partial(
                product.algorithm.fit,
                policy.hypothesis_class,
                xs,
                ys if product.labelled else None,
                epsilon=epsilon,
                delta=delta,
                rng=rng,
                **size,
            )

        if policy.feature_bounds is None and policy.privacy_unit == "example":
            # A histogram node, expanded in sorted order: put it in a random order (windows.shuffled
            # says why) drawn from its own randomness, derived from the same seed
            if self._rng_factory:
                order = self._rng_factory(f"{window_id}/{key}/order")
            else:
                assert seed is not None
                order = derived(hashlib.sha256(b"privstream node order/" + seed).digest())
            data = shuffled(data, order)

        loop = asyncio.get_running_loop()
        extra = {"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None}
        for attempt in range(self.CRASH_RETRIES + 1):
            rng = source()
            started = time.perf_counter()
            try:
                result = await loop.run_in_executor(self.executor, call(data.xs, data.ys, rng))
            except BrokenProcessPool:
                if attempt == self.CRASH_RETRIES:
                    raise
                log.warning(
                    "the learner's process died during %s of window %s of stream %s; running it "
                    "again with the same randomness",
                    key,
                    window_id,
                    stream_id,
                    extra=extra,
                )
                continue
            except Exception:
                log.exception(
                    "%s failed on window %s of stream %s: releasing its fit on zero examples "
                    "(data-independent, charged the same)",
                    key,
                    window_id,
                    stream_id,
                    extra=extra,
                )
                self.metrics.learner_failed(stream_id)
                rng = source()
                xs, ys = stand_in(policy, data, level)
                return await loop.run_in_executor(self.executor, call(xs, ys, rng)), rng, True
            self.metrics.learner_ran(product.name, time.perf_counter() - started, len(data.xs))
            return result, rng, False
        raise AssertionError("unreachable")  # pragma: no cover

    async def _release_product(
        self,
        policy: ReleasePolicy,
        product: Product,
        state: _StreamState,
        window_id: str,
        info: WindowInfo,
        window: Callable[[], Awaitable[WindowData]],
        publish_at: float | None = None,
        level: int = 0,
    ) -> str:
        """Release one product of a node: reserve (the charge, write-ahead, with the secret seed),
        compute from the seed, complete (the bytes), publish; returns "released" or "refused"."""
        stream_id, key = policy.stream_id, product.key
        existing = await asyncio.to_thread(self.ledger.lookup, stream_id, window_id, key)
        if existing is not None:  # released before a crash or by the partition's previous owner
            if not existing.published:
                await self._publish(product.topic, stream_id, existing.release)
                await asyncio.to_thread(self.ledger.mark_published, existing.entry_id)
            return "released"
        cost_epsilon, cost_delta = product.cost(level)
        assert info.first_window is not None and info.last_window is not None
        node = NodeRange(level, info.first_window, info.last_window)
        users: list[str] | None = None
        data: WindowData | None = None
        if policy.privacy_unit == "user":
            # The individual filter (E-DESIGN §5): the users present in the node are charged unless
            # their lifetime budget would be passed; who is charged is decided before the learner.
            data = await window()
            users = sorted({str(u) for u in data.users.tolist()})
        try:
            reservation = await asyncio.to_thread(
                partial(
                    self.ledger.reserve,
                    stream_id,
                    window_id,
                    key,
                    cost_epsilon,
                    cost_delta,
                    node,
                    users=users,
                    user_budget=policy.user_budget,
                )
            )
        except BudgetExhaustedError:  # the ledger recorded the refusal (a lowered budget, an old ledger)
            await self._refuse(policy, product, state, window_id, level=level)
            return "refused"
        if reservation.completed:  # completed concurrently (another worker): its bytes, not ours
            charge = await asyncio.to_thread(self.ledger.complete, reservation.entry_id, b"")
        else:
            data = data if data is not None else await window()
            if reservation.included_users is not None:
                excluded = len(users or ()) - len(reservation.included_users)
                if excluded:
                    self.metrics.users_excluded(stream_id, excluded)  # private: operators only
                # The filter first, then each user's first k rows, then the cap: an excluded user
                # displaces no one.
                keep = np.array([str(u) in reservation.included_users for u in data.users.tolist()], bool)
                data = WindowData(*(column[keep] for column in data))
                assert policy.user_contribution_bound is not None
                data = bound_contributions(data, policy.user_contribution_bound)
                if capped(policy):
                    data = WindowData(*(column[: policy.max_node_examples] for column in data))
            # group privacy: a user changes up to k rows; a capped node of a time window turns one
            # addition into a replacement inside the kept set (twice the changes, see cap_rule)
            group = policy.user_contribution_bound if policy.privacy_unit == "user" else 1
            assert group is not None
            group *= 2 if cap_halves_epsilon(policy) else 1
            epsilon, delta = (
                (cost_epsilon, cost_delta)
                if group == 1
                else user_level_parameters(cost_epsilon, cost_delta, group)
            )
            result, _rng, _fallback = await self._fit(
                policy, product, data, window_id, epsilon, delta, level, seed=reservation.seed
            )
            receipt = reservation.receipt
            body = self._release_json(
                policy, product, result, info, receipt, "seeded" if self._rng_factory else "secure", level
            )
            charge = await asyncio.to_thread(self.ledger.complete, reservation.entry_id, body)
        extra = {"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": str(charge.entry_id)}
        now = self.clock()
        if publish_at is not None and now < publish_at:  # wait for the public publication time
            self._parked.append((publish_at, self._parked_order, product.topic, charge))
            self._parked_order += 1
        else:
            if publish_at is not None and policy.publish_delay_seconds > 0:
                # later than scheduled: the learner's run time (it depends on the data) shows
                self.metrics.release_late(stream_id)
                log.warning(
                    "release %s of window %s of stream %s is %.3g s late",
                    key,
                    window_id,
                    stream_id,
                    now - publish_at,
                    extra=extra,
                )
            await self._publish(product.topic, stream_id, charge.release)
            await asyncio.to_thread(self.ledger.mark_published, charge.entry_id)
        state.releases += 1
        spent = await asyncio.to_thread(self.ledger.spent, stream_id)
        left = await asyncio.to_thread(self.ledger.remaining, stream_id)
        self.metrics.released(stream_id, spent.epsilon, left.epsilon)
        self.metrics.released_level(stream_id, level)
        log.info(
            "released %s for window %s of stream %s (ledger entry %s, lifetime epsilon per example spent %g)",
            key,
            window_id,
            stream_id,
            charge.entry_id,
            spent.epsilon,
            extra=extra,
        )
        return "released"

    async def _refuse(
        self, policy: ReleasePolicy, product: Product, state: _StreamState, window_id: str, level: int = 0
    ) -> None:
        """The ledger refused a reservation and recorded it (a safety net: a valid configuration
        never runs out; a lowered budget or a ledger shared with an older configuration can)."""
        stream_id = policy.stream_id
        if not state.exhausted:
            state.exhausted = True
            log.warning(
                "stream %s: privacy budget exhausted; no more releases (the online SOA keeps serving)",
                stream_id,
                extra={"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None},
            )
        spent = await asyncio.to_thread(self.ledger.spent, stream_id)
        left = await asyncio.to_thread(self.ledger.remaining, stream_id)
        self.metrics.refused(stream_id, spent.epsilon, left.epsilon)

    def _release_json(
        self,
        policy: ReleasePolicy,
        product: Product,
        result: LearnerResult | SanitizerResult | VectorLearnerResult,
        info: WindowInfo,
        receipt: ChargeReceipt,
        randomness: str,
        level: int = 0,
    ) -> bytes:
        # n is public only for count windows of examples: at the user level, how many examples
        # survive the per-user bound depends on how much each user sent (uncharged, private).
        n_public = policy.window_kind == "count" and policy.privacy_unit == "example"
        is_learner = product.topic == "hypotheses"
        epsilon, delta = product.cost(level)
        certificate = Certificate(
            mechanism=result.mechanism,
            epsilon=epsilon,
            delta=delta,
            level=level,
            lifetime=policy.lifetime,
            composition=(
                "sequential"
                if policy.lifetime is None
                else "individual-filter"
                if policy.privacy_unit == "user"
                else "tree"
            ),
            neighbouring_relation=policy.neighbouring_relation,
            privacy_unit=policy.privacy_unit,
            privacy=result.privacy,
            user_contribution_bound=policy.user_contribution_bound,
            window=info,
            sample_size=node_sample_size(policy, level) if n_public else None,  # a count node's n: public
            ledger_entry_id=str(receipt.entry_id),
            ledger_id=receipt.ledger_id,
            ledger_epoch=receipt.ledger_epoch,
            epsilon_budget_remaining=receipt.remaining.epsilon,
            delta_budget_remaining=receipt.remaining.delta,
            parameters={
                **result.parameters,
                **_theorem_fields(result),
                "learner" if is_learner else "sanitizer": product.name,
                "algorithm_epsilon": result.epsilon,
                "algorithm_delta": result.delta,
                **cap_parameters(policy),
            },
            proper=result.proper if is_learner else False,
            dp_outputs=result.dp_outputs,
            accuracy_guarantee_holds=result.accuracy_guarantee_holds if n_public else None,
            theorem_sample_size=result.theorem_sample_size,
            randomness=randomness,
            library_version=self.library_version,
        )
        spec = result.hypothesis_class if product.vector else policy.hypothesis_class.spec  # type: ignore[union-attr]
        common = {"stream_id": policy.stream_id, "hypothesis_class": spec, "certificate": certificate}
        if is_learner:
            model = result.model if product.vector else result.hypothesis
            release: HypothesisRelease | SanitizedRelease = HypothesisRelease(
                **common, hypothesis=model.to_dict()
            )
        else:
            release = SanitizedRelease(
                **common, distribution=result.distribution.to_dict(), labelled=product.labelled
            )
        return release.model_dump_json().encode()

    # --- status ---------------------------------------------------------------------------------
    def stream_status(self, stream_id: str) -> dict[str, Any]:
        state = self._streams[stream_id]
        return {"releases_this_run": state.releases, "exhausted": state.exhausted}
