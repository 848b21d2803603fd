"""The release agent: windows of examples -> a private learner -> the ledger -> the public topic.

**The public schedule.** Which releases exist, their ids, their ledger entries, their certificates
and when they appear are a function of the configuration and the clock only, never of which
windows hold data or how long a learner ran on them:

* count windows (example level) close when their N-th example is taken in (n is public);
* time windows close on the worker's clock (an injected ``clock``; production: the wall clock):
  window ``w`` closes when ``clock() >= (w+1)*seconds + allowed_lateness_seconds``. Every window
  from the stream's first one (the one holding its schedule start) on is closed, charged and
  released, empty ones included (the learner's release on zero examples, same certificate shape);
  after downtime the missed windows are caught up in order. A timer (:meth:`ReleaseAgent.tick`)
  closes them: no example is needed. An example whose window is closed already is late (an
  operator metric) and feeds the SOA only; one dated further from the clock than the public
  maximum skew never gets here (validation dead-letters it, ``event_time_out_of_range``);
* every release has a **deadline** (:mod:`privstream.agents.timing`): the end of its publication
  slot, ``publish_delay_seconds`` after its node closed or after the stream's previous slot. At
  the deadline the release is published with the deadline as its record's timestamp: the
  learner's output if its fit finished, otherwise a **default release**: the learner's fit on a
  public stand-in input (:func:`stand_in`) with the same parameters and randomness, the same
  certificate, charged the same. The default is computed before the fit, so it is ready at the
  deadline whether the fit is unfinished (its process is stopped then), raised, or its process
  died. A release published after its deadline (the worker overloaded) is counted and logged for
  operators, never shown to the public;
* each learner reads at most ``max_node_examples`` examples (the input cap, stated in the
  certificate), so its run time has a public bound and the deadline can sit above it.

**The release tree.** With ``levels = L``, the window that completes an aligned node of level j
(2^j windows, ids ``{family}-L{j}-{m}``) also schedules that node's release, at the level's ε;
each example is in one node per level, so the ledger's lifetime cost per example is the sum over
the levels (parallel composition within a level).

A node's examples live in the state store in compact form: a window that closes becomes node
(0, w) (its raw rows dropped in the same transaction), a node (j, m) is merged from its two
children when its release runs, and a node's data is dropped once its parent is built and the
node released. The learner gets the node's data expanded exactly (a histogram's (x, y) rows
repeated by their counts, then put in a uniformly random order drawn from the release's seed: a
release is a function of the node's multiset of examples and the seed, and any learner DP on
sequences stays DP, see :func:`privstream.agents.fits.prepared_input`).

For each node (a window is a node of level 0), a background task, in the schedule's order

1. returns early if the ledger already holds this node's release (a replay: it re-publishes the
   stored bytes if they were not confirmed published; nothing is recomputed with fresh noise);
2. reserves the release in the ledger (the charge, write-ahead, with a secret seed and the
   deadline), before the data is loaded or the learner runs, so budgets do not depend on either;
   a refusal (a lowered budget: a valid configuration never runs out) is recorded by the ledger.
   At the user level the reservation is the individual filter's: the users present are charged
   unless their lifetime budget would be passed, and the excluded ones' examples never reach the
   learner;
3. runs the default and then the learner in the stream's own learner process (one stream's fit
   never holds up another's), with randomness derived from the seed, so a recomputation after a
   crash is bit-identical;
4. at the deadline completes the reservation with the bytes ready then, publishes exactly those
   bytes and marks them published. A reservation whose deadline passed while no worker ran it
   (a crash) is completed with its default: its fate is a function of time only.

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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal, Protocol

import numpy as np

from privstream.agents.fits import LearnerCall, NodeFit
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
    ChargeReceipt,
    NodeRange,
    PrivacyCost,
    PrivacyLedger,
    Reservation,
    public_entry_id,
)
from privstream.agents.timing import (
    ExecutorFits,
    FitProcessDied,
    FitRunner,
    FitTimedOut,
    Slots,
    sleep_until,
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
    time_family,
    time_window_index,
    user_level_parameters,
)
from privstream.learning.hypothesis_classes import HypothesisClass
from privstream.learning.planning import runtime_inputs
from privstream.learning.private_learners import LearnerResult
from privstream.learning.private_learners.vector_base import VectorLearnerResult
from privstream.learning.randomness import RandomSource, derived, seeded
from privstream.learning.sanitizers import SanitizerResult
from privstream.schemas import (
    Certificate,
    HypothesisRelease,
    LifetimeBound,
    Publication,
    SanitizedRelease,
    WindowInfo,
)

log = logging.getLogger(__name__)


class Publisher(Protocol):
    """Sends a release's bytes to a public topic (``topic``: its logical name) and waits until Kafka
    has them; ``timestamp_ms`` is the record's timestamp (the release's deadline; ``None``: the send
    time)."""

    async def __call__(
        self, topic: str, stream_id: str, release: bytes, *, timestamp_ms: int | None = None
    ) -> None: ...


#: What is published at a release's deadline, as its certificate states it.
DEADLINE_RULE = (
    "at scheduled_at the release is published with scheduled_at as its record's timestamp: the learner's "
    "output if its fit finished by then, otherwise a data-independent default (the learner's fit on a "
    "public stand-in input, same parameters and randomness, charged the same), prepared before the fit; "
    "public pages show it from scheduled_at on"
)

#: A release published this much after its deadline is counted as a missed deadline (the publisher
#: wakes at the deadline, then writes the ledger and sends: milliseconds when the worker is healthy).
DEADLINE_TOLERANCE_SECONDS = 0.25


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
    # One publication slot (agents.timing). None: no deadline, each release is published when it is
    # computed (offline use and tests only: then the publication time shows the learner's run time).
    publish_delay_seconds: float | None = None
    level_slots: tuple[float, ...] = ()  # a slot per level 0..L (derived); () means publish_delay_seconds
    schedule_start: float | None = None  # Unix seconds: the stream's first time window holds it
    privacy_unit: str = "example"
    user_contribution_bound: int | None = None
    expected_size: int | None = None  # where n is private: the size the algorithms use instead of n
    levels: int = 0  # the release tree's top level L
    lifetime: LifetimeBound | None = None  # the certificate's lifetime bound (None: sequential total)
    user_budget: PrivacyCost | None = None  # user level: each user's lifetime budget (all streams)
    max_node_examples: int | None = None  # the input cap: the examples a learner reads (None: all)

    @property
    def family(self) -> str:
        """Time windows' family; count windows' also needs the store's generation (the agent's)."""
        assert self.window_seconds is not None
        return time_family(self.window_seconds)

    def slot(self, level: int) -> float | None:
        """The publication slot of a node of ``level`` (None: no deadlines)."""
        return self.level_slots[level] if self.level_slots else self.publish_delay_seconds

    @property
    def neighbouring_relation(self) -> str:
        # Count windows have a public size: neighbours replace one example. A time window's size
        # depends on the data, so neighbours add or remove one.
        return "replace-one" if self.window_kind == "count" else "add-remove-one"


def capped(policy: ReleasePolicy) -> bool:
    """Whether the policy's learners read at most ``max_node_examples`` examples of a node."""
    return policy.max_node_examples is not None


def cap_halves_epsilon(policy: ReleasePolicy) -> bool:
    """Whether the learner of a capped node runs at half the level's ε.

    A capped node's learner reads ``max_node_examples`` of its examples: a uniformly random subset
    of a histogram node (drawn from the release's seed), the first ones by arrival of user rows and
    feature vectors. Count windows (replace-one): replacing an example replaces one kept example or
    none, so the level's ε holds. Where n is private (add/remove-one), adding an example can push
    another out of the kept set: inside it an addition becomes a replacement, two add/remove steps,
    so the learner runs at ε/2 (group privacy). Whether the cap binds depends on the private n, so
    the rule is data-independent: always, for every level (``max_node_examples: null`` keeps every
    example and the whole ε, and gives the learner's run time no public bound).

    >>> time = ReleasePolicy("s", None, (), expected_size=10, max_node_examples=100, window_kind="time")
    >>> count = ReleasePolicy("s", None, (), max_node_examples=100)
    >>> cap_halves_epsilon(time), cap_halves_epsilon(count)
    (True, False)
    """
    return capped(policy) and policy.expected_size is not None


def cap_parameters(policy: ReleasePolicy) -> dict[str, Any]:
    """The certificate's statement of the input cap and its accounting rule."""
    if not capped(policy):
        return {"max_node_examples": None, "cap_rule": "uncapped: the learner reads all of a node's examples"}
    included = " of the users the filter includes" if policy.privacy_unit == "user" else ""
    kept = (
        "a uniformly random subset of max_node_examples examples (drawn from the release's seed)"
        if _shuffles(policy)
        else f"its first max_node_examples examples by arrival{included}"
    )
    rule = f"the learner reads {kept}; " + (
        "n is private (add/remove-one), so an addition can become a replacement inside the kept "
        "set (two add/remove steps): the learner runs at half the level's epsilon (group privacy)"
        if cap_halves_epsilon(policy)
        else "n is public (replace-one): a replacement changes at most one kept example, the learner "
        "runs at the level's epsilon"
    )
    return {"max_node_examples": policy.max_node_examples, "cap_rule": rule}


def _shuffles(policy: ReleasePolicy) -> bool:
    """Whether a node's rows are put in a random order before the learner reads them: a histogram
    node (an integer class at the example level) is expanded in sorted order, not arrival order."""
    return policy.feature_bounds is None and policy.privacy_unit == "example"


def node_expected_size(policy: ReleasePolicy, level: int) -> int:
    """The size the algorithms of a node of ``level`` use where n is private: ``expected_size·2^j``,
    at most the cap of a capped node."""
    assert policy.expected_size is not None
    size = policy.expected_size << level
    cap = policy.max_node_examples  # capped(policy): a cap is set
    return min(size, cap) if cap is not None else size


def node_sample_size(policy: ReleasePolicy, level: int) -> int:
    """A count node's public n: ``size·2^j`` examples, at most the cap of a capped node."""
    size = policy.window_size << level
    cap = policy.max_node_examples  # capped(policy): a cap is set
    return min(size, cap) if cap is not None else size


def stand_in(policy: ReleasePolicy, data: WindowData, level: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The data-independent input of a default release.

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


def learner_call(
    policy: ReleasePolicy, product: Product, epsilon: float, delta: float, level: int, rng: Any
) -> LearnerCall:
    """The product's algorithm with every argument of a node's fit but the examples.

    Where n is private the algorithms derive everything they publish from the operator's
    expected size (a node of level j expects 2^j windows' worth), never from n.
    """
    size = {} if policy.expected_size is None else {"expected_size": node_expected_size(policy, level)}
    options: dict[str, Any] = {"epsilon": epsilon, "delta": delta, "rng": rng, **size}
    if product.vector:
        return LearnerCall(product.algorithm, "vectors", options={**options, "bounds": policy.feature_bounds})
    if product.topic == "hypotheses":
        options |= {"alpha": policy.alpha, "beta": policy.beta}
        return LearnerCall(product.algorithm, "hypotheses", policy.hypothesis_class, options=options)
    return LearnerCall(
        product.algorithm, "sanitized", policy.hypothesis_class, labelled=product.labelled, options=options
    )


def learner_privacy(policy: ReleasePolicy, epsilon: float, delta: float) -> tuple[float, float]:
    """The (ε, δ) a learner runs at for a release charged (``epsilon``, ``delta``): group privacy
    where one unit changes several of its examples (a user up to k; an addition inside a capped node
    whose n is private a replacement, two changes, see :func:`cap_halves_epsilon`).

    >>> user = ReleasePolicy("s", None, (), privacy_unit="user", user_contribution_bound=2, expected_size=5)
    >>> learner_privacy(user, 1.0, 0.0)
    (0.5, 0.0)
    """
    group = policy.user_contribution_bound if policy.privacy_unit == "user" else 1
    assert group is not None
    group *= 2 if cap_halves_epsilon(policy) else 1
    return (epsilon, delta) if group == 1 else user_level_parameters(epsilon, delta, group)


def largest_input(policy: ReleasePolicy, level: int | None = None) -> int:
    """The most examples a learner of a node of ``level`` (default: the top level) can read: a count
    node's public n, else the input cap (a ``ValueError`` where n is private and nothing caps it)."""
    if policy.expected_size is None:
        return node_sample_size(policy, policy.levels if level is None else level)
    if policy.max_node_examples is None:
        raise ValueError(
            f"stream {policy.stream_id}: no input cap bounds the learner's run time (max_node_examples is "
            "null and n is private); set publish_delay_seconds"
        )
    return policy.max_node_examples


def slot_workload(
    policy: ReleasePolicy, level: int | None = None, seed: int = 0
) -> list[tuple[NodeFit, list[NodeFit]]]:
    """What the slot of a node of ``level`` (default: the top level) may have to run at worst,
    product by product: the default (the learner on its stand-in input) and the fit on each public
    runtime input of the largest input of such a node (:func:`largest_input`,
    :func:`privstream.learning.planning.runtime_inputs`), at the level's parameters. The service
    times it at start-up (:func:`privstream.agents.fits.slot_seconds`) to derive the slots.
    """
    level = policy.levels if level is None else level
    n = largest_input(policy, level)
    space = policy.hypothesis_class if policy.feature_bounds is None else policy.feature_bounds
    assert space is not None
    inputs = runtime_inputs(space, n, seed)
    sample = WindowData(inputs[0][1][:0], inputs[0][2][:0], np.zeros(0, object), np.zeros(0, np.int64))
    work = []
    for product in policy.products:
        epsilon, delta = learner_privacy(policy, *product.cost(level))

        def call(product: Product = product, epsilon: float = epsilon, delta: float = delta) -> LearnerCall:
            return learner_call(policy, product, epsilon, delta, level, seeded(seed))

        default = NodeFit(call(), *stand_in(policy, sample, level))
        fits = [NodeFit(call(), xs, ys, cap=policy.max_node_examples) for _, xs, ys in inputs]
        work.append((default, fits))
    return work


def _theorem_fields(result: Any) -> dict[str, Any]:
    """A vector learner's theorem and guarantee, as the offline CLI states them
    (``VectorLearnerResult.certificate_fields``); nothing for the other results."""
    if isinstance(result, VectorLearnerResult):
        return {"theorem": result.theorem, "guarantee": result.guarantee}
    return {}


@dataclass
class _StreamState:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one node's fits at a time, in order
    recovered: bool = False
    exhausted: bool = False
    next_time_window: int | None = None  # time windows: the first one not closed yet (the schedule)
    releases: int = 0
    scheduled: set[str] = field(default_factory=set)
    slots: Slots | None = None  # the publication slots (None: no deadlines)
    published: asyncio.Future[None] | None = None  # the last scheduled node's publication


@dataclass
class _Ready:
    """A product's release of a node: what is ready for its deadline (filled in while the publisher
    waits for the deadline; ``available`` once there is something to publish, or an outcome)."""

    product: Product
    available: asyncio.Event = field(default_factory=asyncio.Event)
    outcome: str = "pending"  # "ready", then "released"; or "refused", "failed", "lost"
    reservation: Reservation | None = None
    deadline: float | None = None
    body: bytes | None = None  # the bytes to publish: the default, replaced by the fit's in time
    completed: bool = False  # already stored by the ledger (a replay, or another worker's)
    published: bool = False

    def settle(self, outcome: str, body: bytes | None = None) -> None:
        self.outcome = outcome
        if body is not None:
            self.body = body
        self.available.set()


@dataclass
class _Fit:
    """What the learner's fit of a product needs once its default is ready (the second phase)."""

    ready: _Ready
    data: WindowData
    epsilon: float
    delta: float


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
        self._publish = publish
        self.metrics = metrics
        self.library_version = library_version
        # The public clock of the schedule and the deadlines (tests inject one and move it).
        self.clock = clock
        # Where learners run: the service's runner gives each stream its own process and stops a
        # fit at its deadline; by default the event loop's threads (tests, offline).
        self.runner: FitRunner = runner if runner is not None else ExecutorFits(clock)
        # Blocking calls of the ledger and the store (threads; tests may run them inline).
        self._offload = offload
        # Tests inject seeded generators; production passes None: the learner's secure default.
        self._rng_factory = rng_factory
        self._streams = {
            sid: _StreamState(slots=None if p.slot(0) is None else Slots()) for sid, p in policies.items()
        }
        self._tasks: set[asyncio.Task[None]] = set()
        started = clock()
        self._start = {
            sid: p.schedule_start if p.schedule_start is not None else started for sid, p in policies.items()
        }
        # Ownership: a stream is served by the owner of its key's partition of the examples topic;
        # None: this agent owns every stream (one worker, tests).
        self._partition_of = partition_of
        self._owned: set[int] = set()  # the examples topic's partitions assigned to this worker
        self._publishing: set[int] = set()  # ledger entries being published now (not the outbox's)

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
        if not state.recovered:
            state.recovered = True
            self._spawn(self._recover(policy))
        if policy.window_kind == "count":
            rows: list[tuple[int, Any, Any, str | None, int | None]] = [
                (o, x, y, u, None) for o, x, y, u in zip(offsets, xs, ys, users, strict=True)
            ]
            size = policy.window_size
            seqs = self.store.append_many(stream_id, partition, rows)
            # A count window closes when its last example is taken in: under replace-one that
            # moment does not depend on any example's content.
            taken_in = self.clock()
            for seq in seqs:
                if (seq + 1) % size == 0:
                    self._schedule_window(policy, state, count_window_index(seq, size), taken_in)
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
        # A capped vector node keeps its window's first rows: the rest are never stored, so a
        # window's private size costs nothing at its close.
        keep_first = self._bounds(policy).max_node_examples
        self.store.append_many(stream_id, partition, rows, keep_first=keep_first)
        if self._owns(stream_id):
            self._close_due_time_windows(policy, state, now)

    # --- the public schedule ----------------------------------------------------------------------
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
            self._schedule_window(policy, state, index, self.close_time(policy, index))
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
        self, policy: ReleasePolicy, state: _StreamState, level: int, closed_at: float
    ) -> float | None:
        """The deadline of a node of ``level`` that closed at ``closed_at``: the end of its
        publication slot (:class:`~privstream.agents.timing.Slots`). A time window caught up after
        downtime keeps its scheduled close, so its deadline may have passed: then its default goes
        out at once, stamped with the deadline (its fate a function of time only)."""
        length = policy.slot(level)
        return None if state.slots is None or length is None else state.slots.next(closed_at, length)

    def _schedule_window(
        self, policy: ReleasePolicy, state: _StreamState, index: int, closed_at: float
    ) -> None:
        """Schedule window ``index``'s release and those of the tree's nodes it completes, in that
        order, now: the order of releases and their deadlines are fixed when the window closes,
        never by how long a learner runs."""
        for level, node in [(0, index), *completed_nodes(index, policy.levels)]:
            self._schedule_node(policy, state, level, node, closed_at)

    def _schedule_node(
        self, policy: ReleasePolicy, state: _StreamState, level: int, index: int, closed_at: float
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
        """On first sight of a stream: publish its outbox, release windows that closed before a crash
        (their slots start now; a node reserved before the crash keeps its reservation's deadline)."""
        await self.replay_outbox(policy.stream_id)
        closed = set(self.store.closed_windows(policy.stream_id))
        now = self.clock()
        # Nodes of the tree whose last window was closed but which were not (a crash between the
        # two): release them now (their children's data is kept until they are built; a node
        # reserved before the crash is recomputed from its reservation's seed).
        family, state = self._family(policy), self._streams[policy.stream_id]
        prefix = f"{family}-L0-"
        for window in sorted(int(w[len(prefix) :]) for w in closed if w.startswith(prefix)):
            for level, index in completed_nodes(window, policy.levels):
                if node_id(family, level, index) not in closed:
                    self._schedule_node(policy, state, level, index, now)
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
                self._schedule_window(policy, state, index, now)

    async def replay_outbox(self, stream_id: str | None = None) -> int:
        """Publish charged releases not confirmed published (after a crash), with their scheduled
        time as the record's timestamp; returns how many."""
        pending = await self._offload(self.ledger.unpublished, stream_id)
        count = 0
        lost: set[str] = set()
        for charge in pending:
            if (
                charge.stream_id not in self.policies
                or charge.entry_id in self._publishing
                or charge.stream_id in lost
            ):
                continue
            try:
                await self._publish(
                    topic_of_key(charge.mechanism),
                    charge.stream_id,
                    charge.release,
                    timestamp_ms=_milliseconds(charge.scheduled_at),
                )
            except LeaseLostError:  # the stream's partition is another worker's now: its outbox too
                lost.add(charge.stream_id)
                continue
            await self._offload(self.ledger.mark_published, charge.entry_id)
            log.info(
                "re-published release %s of stream %s from the ledger's outbox",
                charge.public_id,
                charge.stream_id,
                extra={
                    "stream_id": charge.stream_id,
                    "window_id": charge.window_id,
                    "ledger_entry_id": charge.public_id,
                },
            )
            count += 1
        return count

    # --- releasing ----------------------------------------------------------------------------
    def _bounds(self, policy: ReleasePolicy) -> NodeBounds:
        """The public bounds a node's stored data is kept within (stated in the certificate)."""
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
        """Node ``(level, index)``'s compact data, built once and stored: a window's rows become
        node (0, w) and are dropped (one transaction); a higher node is merged from its two
        children, which are dropped once they were released (recorded closed). Idempotent: a
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

    async def _release_node(
        self, policy: ReleasePolicy, level: int, index: int, deadline: float | None
    ) -> None:
        """Release node ``(level, index)``: a window (level 0) or 2^level consecutive ones.

        The learner's input is the node's compact data in the state store (:meth:`_build_node`),
        kept until the node's parent is built and the node released.
        """
        window_id = node_id(self._family(policy), level, index)
        windows = node_windows(level, index)
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

        def load() -> WindowData:
            return node_examples(self._build_node(policy, level, index))

        await self._release(
            policy,
            window_id,
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
        extra = {"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None}
        readies = [_Ready(product) for product in policy.products]
        loaded: list[WindowData] = []  # the window is read from the store once, if at all

        async def window() -> WindowData:
            if not loaded:
                loaded.append(await self._offload(load))
            return loaded[0]

        preparing = asyncio.ensure_future(
            self._prepare(policy, state, window_id, info, window, deadline, level, readies)
        )
        try:
            if previous is not None:
                await previous  # the stream's releases go out in the schedule's order
            outcomes: list[str] = []
            for ready in readies:
                try:
                    outcomes.append(await self._publish_ready(policy, state, window_id, ready, level))
                except LeaseLostError as exc:  # the new owner publishes it from the ledger's outbox
                    log.warning(
                        "%s of window %s of stream %s not published here: %s",
                        ready.product.key,
                        window_id,
                        stream_id,
                        exc,
                        extra=extra,
                    )
                    outcomes.append("lost")
                except Exception:
                    log.exception(
                        "publishing %s of window %s of stream %s failed (retried from the outbox)",
                        ready.product.key,
                        window_id,
                        stream_id,
                        extra=extra,
                    )
                    self.metrics.learner_failed(stream_id)
                    outcomes.append("failed")
            await preparing  # its fits are over (a fit past the deadline was stopped there)
            if "lost" in outcomes:
                # Another worker owns the stream's partition now and releases this window; if the
                # partition comes back here, the recovery on assignment schedules it again.
                state.scheduled.discard(window_id)
            elif "failed" not in outcomes:  # a failed product keeps the window for a retry after restart
                await self._offload(close, ",".join(outcomes))
        finally:
            preparing.cancel()
            mine.set_result(None)

    async def _prepare(
        self,
        policy: ReleasePolicy,
        state: _StreamState,
        window_id: str,
        info: WindowInfo,
        window: Callable[[], Awaitable[WindowData]],
        deadline: float | None,
        level: int,
        readies: list[_Ready],
    ) -> None:
        """Under the stream's lock: reserve every product and compute every default first (so all
        are ready at the deadline), then run the learners' fits until the deadline."""
        try:
            await self._prepare_under_lock(policy, state, window_id, info, window, deadline, level, readies)
        finally:  # whatever happened, the publisher waits for nothing that will not come
            for ready in readies:
                if not ready.available.is_set():
                    ready.settle("failed")

    async def _prepare_under_lock(
        self,
        policy: ReleasePolicy,
        state: _StreamState,
        window_id: str,
        info: WindowInfo,
        window: Callable[[], Awaitable[WindowData]],
        deadline: float | None,
        level: int,
        readies: list[_Ready],
    ) -> None:
        stream_id = policy.stream_id
        extra = {"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None}
        async with state.lock:
            fits: list[_Fit] = []
            for ready in readies:
                try:
                    fit = await self._reserve(policy, state, window_id, info, window, deadline, level, ready)
                except LeaseLostError as exc:
                    log.warning(
                        "%s of window %s of stream %s not released here: %s",
                        ready.product.key,
                        window_id,
                        stream_id,
                        exc,
                        extra=extra,
                    )
                    for other in readies:
                        if not other.available.is_set():
                            other.settle("lost")
                    return
                except Exception:
                    # Not the data's (the default covers the learner): the ledger, the store.
                    # Log, count, keep the window for a retry after a restart.
                    log.exception(
                        "%s of window %s of stream %s failed",
                        ready.product.key,
                        window_id,
                        stream_id,
                        extra=extra,
                    )
                    self.metrics.learner_failed(stream_id)
                    ready.settle("failed")
                    continue
                if fit is not None:
                    fits.append(fit)
            for fit in fits:
                try:
                    await self._fit(policy, window_id, info, level, fit)
                except Exception:
                    log.exception(
                        "%s of window %s of stream %s failed",
                        fit.ready.product.key,
                        window_id,
                        stream_id,
                        extra=extra,
                    )
                    self.metrics.learner_failed(stream_id)
                    if not fit.ready.available.is_set():  # else its default stands
                        fit.ready.settle("failed")

    async def _reserve(
        self,
        policy: ReleasePolicy,
        state: _StreamState,
        window_id: str,
        info: WindowInfo,
        window: Callable[[], Awaitable[WindowData]],
        deadline: float | None,
        level: int,
        ready: _Ready,
    ) -> _Fit | None:
        """Reserve one product's release of the node (the charge, write-ahead, with the secret seed
        and the deadline) and, with a deadline, compute its default; the fit still to run, if any."""
        product = ready.product
        stream_id, key = policy.stream_id, product.key
        cost_epsilon, cost_delta = product.cost(level)
        assert info.first_window is not None and info.last_window is not None
        node = NodeRange(level, info.first_window, info.last_window)
        users: list[str] | None = None
        data: WindowData | None = None
        reservation = await self._offload(self.ledger.reservation, stream_id, window_id, key)
        if reservation is None or not reservation.completed:
            if policy.privacy_unit == "user":
                # The individual filter: the users present in the node are charged unless their
                # lifetime budget would be passed; who is charged is decided before the learner.
                data = await window()
                users = sorted({str(u) for u in data.users.tolist()})
            try:
                reservation = await self._offload(
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
                        scheduled_at=deadline,
                    )
                )
            except BudgetExhaustedError:  # the ledger recorded the refusal (a lowered budget, an old ledger)
                await self._refuse(policy, product, state, window_id, level=level)
                ready.settle("refused")
                return None
        ready.reservation = reservation
        ready.deadline = deadline
        if reservation.scheduled_at is not None and state.slots is not None:
            # a reservation made before a restart keeps its deadline; later slots follow it
            ready.deadline = reservation.scheduled_at
            state.slots.taken(reservation.scheduled_at)
        if reservation.completed:  # a replay, or completed concurrently by another worker
            ready.completed, ready.published = True, reservation.published
            ready.settle("ready", reservation.release)
            return None
        data = data if data is not None else await window()
        if reservation.included_users is not None:
            included = reservation.included_users
            excluded = len(users or ()) - len(included)
            if excluded:
                self.metrics.users_excluded(stream_id, excluded)  # private: operators only

            def keep_included(data: WindowData) -> WindowData:
                # The filter first, then each user's first k rows, then the cap (the learner's
                # input, NodeFit): an excluded user displaces no one.
                keep = np.array([str(u) in included for u in data.users.tolist()], bool)
                assert policy.user_contribution_bound is not None
                return bound_contributions(
                    WindowData(*(column[keep] for column in data)), policy.user_contribution_bound
                )

            data = await self._offload(keep_included, data)
        fit = _Fit(ready, data, *learner_privacy(policy, cost_epsilon, cost_delta))
        if ready.deadline is not None:  # prepared early: ready at the deadline whatever the fit does
            ready.settle("ready", await self._default(policy, window_id, info, level, fit))
        return fit

    def _source(self, window_id: str, key: str, seed: bytes, purpose: str = "") -> RandomSource:
        """The release's randomness, the same on every attempt: derived from the reservation's
        secret seed (tests inject seeded sources instead). ``purpose`` "order": the node's row order."""
        if self._rng_factory:
            return self._rng_factory(f"{window_id}/{key}" + (f"/{purpose}" if purpose else ""))
        if purpose:
            return derived(hashlib.sha256(f"privstream node {purpose}/".encode() + seed).digest())
        return derived(seed)

    async def _default(
        self, policy: ReleasePolicy, window_id: str, info: WindowInfo, level: int, fit: _Fit
    ) -> bytes:
        """The default release's bytes: the learner on :func:`stand_in` with the same parameters and
        randomness (data-independent, the same certificate, charged the same)."""
        product, reservation = fit.ready.product, fit.ready.reservation
        assert reservation is not None
        xs, ys = stand_in(policy, fit.data, level)
        source = self._source(window_id, product.key, reservation.seed)
        call = learner_call(policy, product, fit.epsilon, fit.delta, level, source)
        result = await self.runner.run(policy.stream_id, NodeFit(call, xs, ys), None)
        return self._body(policy, product, result, info, reservation, level, fit.ready.deadline)

    async def _fit(
        self, policy: ReleasePolicy, window_id: str, info: WindowInfo, level: int, fit: _Fit
    ) -> None:
        """Run the learner on the node until the deadline; its release replaces the default if it
        finished in time. Without a deadline the default is computed only when the fit raised or
        its process died."""
        ready, product = fit.ready, fit.ready.product
        reservation, deadline = ready.reservation, ready.deadline
        assert reservation is not None
        stream_id, key, seed = policy.stream_id, product.key, reservation.seed
        extra = {"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None}
        if deadline is not None and self.clock() >= deadline:  # the defaults took the slot (or a restart)
            self.metrics.default_released(stream_id, "unfinished")
            return
        call = NodeFit(
            learner_call(policy, product, fit.epsilon, fit.delta, level, self._source(window_id, key, seed)),
            fit.data.xs,
            fit.data.ys,
            order=self._source(window_id, key, seed, "order") if _shuffles(policy) else None,
            cap=policy.max_node_examples if capped(policy) else None,
        )
        started = time.perf_counter()
        try:
            result = await self.runner.run(stream_id, call, deadline)
        except FitTimedOut:
            reason = "unfinished"
            log.warning(
                "%s of window %s of stream %s had not finished at its deadline: its default goes out",
                key,
                window_id,
                stream_id,
                extra=extra,
            )
        except FitProcessDied:
            reason = "died"
            log.warning(
                "the learner process of stream %s died during %s of window %s: its default goes out",
                stream_id,
                key,
                window_id,
                extra=extra,
            )
        except Exception:
            reason = "failed"
            log.exception(
                "%s failed on window %s of stream %s: its default goes out (charged the same)",
                key,
                window_id,
                stream_id,
                extra=extra,
            )
            self.metrics.learner_failed(stream_id)
        else:
            self.metrics.learner_ran(product.name, time.perf_counter() - started, len(fit.data.xs))
            if deadline is None or self.clock() < deadline:  # in time: the learner's release goes out
                ready.settle("ready", self._body(policy, product, result, info, reservation, level, deadline))
                return
            reason = "unfinished"
        self.metrics.default_released(stream_id, reason)
        if not ready.available.is_set():  # no deadline: the default only now
            ready.settle("ready", await self._default(policy, window_id, info, level, fit))

    def _body(
        self,
        policy: ReleasePolicy,
        product: Product,
        result: Any,
        info: WindowInfo,
        reservation: Reservation,
        level: int,
        deadline: float | None,
    ) -> bytes:
        return self._release_json(
            policy,
            product,
            result,
            info,
            reservation.receipt,
            "seeded" if self._rng_factory else "secure",
            level,
            public_entry_id(policy.stream_id, reservation.window_id, product.key),
            deadline,
        )

    async def _publish_ready(
        self, policy: ReleasePolicy, state: _StreamState, window_id: str, ready: _Ready, level: int
    ) -> str:
        """At the deadline: store the bytes ready then in the reservation (the first bytes win),
        publish exactly the stored bytes with the deadline as the record's timestamp, mark them
        published."""
        stream_id, key = policy.stream_id, ready.product.key
        public_id = public_entry_id(stream_id, window_id, key)
        extra = {"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": public_id}
        await ready.available.wait()  # reserved (its deadline known), a default ready, or an outcome
        if ready.deadline is not None:
            await sleep_until(self.clock, ready.deadline)
        if ready.outcome != "ready":
            return ready.outcome
        if ready.deadline is not None:
            late = self.clock() - ready.deadline
            if late > DEADLINE_TOLERANCE_SECONDS:  # operators only: the public sees the deadline
                self.metrics.deadline_missed(stream_id, late)
                log.warning(
                    "release %s of window %s of stream %s missed its deadline by %.3g s",
                    key,
                    window_id,
                    stream_id,
                    late,
                    extra=extra,
                )
        if ready.published:
            return "released"
        reservation, body = ready.reservation, ready.body
        assert reservation is not None and body is not None
        self._publishing.add(reservation.entry_id)
        try:
            charge = await self._offload(self.ledger.complete, reservation.entry_id, body)
            await self._publish(
                ready.product.topic, stream_id, charge.release, timestamp_ms=_milliseconds(ready.deadline)
            )
            await self._offload(self.ledger.mark_published, charge.entry_id)
        finally:
            self._publishing.discard(reservation.entry_id)
        if ready.completed:  # published before (a replay): nothing new was released
            return "released"
        state.releases += 1
        spent = await self._offload(self.ledger.spent, stream_id)
        left = await self._offload(self.ledger.remaining, stream_id)
        self.metrics.released(stream_id, spent.epsilon, left.epsilon)
        self.metrics.released_level(stream_id, level)
        log.info(
            "released %s for window %s of stream %s (ledger entry %s, lifetime epsilon per example spent %g)",
            key,
            window_id,
            stream_id,
            public_id,
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
        spent = await self._offload(self.ledger.spent, stream_id)
        left = await self._offload(self.ledger.remaining, stream_id)
        self.metrics.refused(stream_id, spent.epsilon, left.epsilon)

    def _release_json(
        self,
        policy: ReleasePolicy,
        product: Product,
        result: LearnerResult | SanitizerResult | VectorLearnerResult,
        info: WindowInfo,
        receipt: ChargeReceipt,
        randomness: str,
        level: int,
        public_id: str,
        deadline: float | None,
    ) -> bytes:
        # n is public only for count windows of examples: at the user level, how many examples
        # survive the per-user bound depends on how much each user sent (uncharged, private).
        n_public = policy.window_kind == "count" and policy.privacy_unit == "example"
        is_learner = product.topic == "hypotheses"
        epsilon, delta = product.cost(level)
        publication = None
        if deadline is not None:
            slot = policy.slot(level)
            assert slot is not None
            publication = Publication(
                scheduled_at=datetime.fromtimestamp(deadline, UTC),
                publish_delay_seconds=slot,
                max_node_examples=policy.max_node_examples,
                rule=DEADLINE_RULE,
            )
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
            ledger_entry_id=public_id,
            ledger_id=receipt.ledger_id,
            ledger_epoch=receipt.ledger_epoch,
            epsilon_budget_remaining=receipt.remaining.epsilon,
            delta_budget_remaining=receipt.remaining.delta,
            publication=publication,
            parameters={
                **result.parameters,
                **_theorem_fields(result),
                "learner" if is_learner else "sanitizer": product.name,
                "algorithm_epsilon": result.epsilon,
                "algorithm_delta": result.delta,
                **cap_parameters(policy),
            },
            proper=result.proper if isinstance(result, LearnerResult | VectorLearnerResult) else False,
            dp_outputs=result.dp_outputs,
            accuracy_guarantee_holds=result.accuracy_guarantee_holds if n_public else None,
            theorem_sample_size=result.theorem_sample_size,
            randomness=randomness,
            library_version=self.library_version,
        )
        spec = result.hypothesis_class if product.vector else policy.hypothesis_class.spec  # type: ignore[union-attr]
        common = {"stream_id": policy.stream_id, "hypothesis_class": spec, "certificate": certificate}
        release: HypothesisRelease | SanitizedRelease
        if isinstance(result, VectorLearnerResult):
            release = HypothesisRelease(**common, hypothesis=result.model.to_dict())
        elif isinstance(result, LearnerResult):
            release = HypothesisRelease(**common, hypothesis=result.hypothesis.to_dict())
        else:
            release = SanitizedRelease(
                **common, distribution=result.distribution.to_dict(), labelled=product.labelled
            )
        return release.model_dump_json().encode()

    # --- status ---------------------------------------------------------------------------------
    def stream_status(self, stream_id: str) -> dict[str, Any]:
        state = self._streams[stream_id]
        return {"releases_this_run": state.releases, "exhausted": state.exhausted}


def _milliseconds(moment: float | datetime | None) -> int | None:
    """A Kafka record timestamp (Unix milliseconds) of a moment, or None (the send time).

    >>> _milliseconds(1767225600.25), _milliseconds(None)
    (1767225600250, None)
    """
    if moment is None:
        return None
    seconds = moment.timestamp() if isinstance(moment, datetime) else moment
    return round(seconds * 1000)
