"""The release agent: windows of examples -> a private learner -> the ledger -> the public topic.

For each stream with a release configuration, every valid example is appended to the durable
state store; when a window closes, a background task

1. returns early if the ledger already holds this window's release (a replay: it re-publishes the
   stored bytes if they were not confirmed published; nothing is recomputed with fresh noise);
2. refuses, records the refusal in the ledger and stops releasing when the budget is spent;
3. runs the learner off the event loop (an executor: the service's is a child process, off the
   GIL too), so ingestion and the SOA keep flowing;
4. charges the ledger and stores the release bytes in one transaction (write-ahead), then
   publishes exactly those bytes and marks them published.

A worker that lost the stream's partition to another worker (the ledger or the publisher raises
:class:`~privstream.agents.interfaces.LeaseLostError`: the service fences both by partition
leases) leaves the window, unclosed, to the new owner.

Nothing computed from raw examples without a charged mechanism leaves this module.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

import numpy as np

from privstream.agents.interfaces import LeaseLostError, ReleaseMetrics, StateStore, WindowData
from privstream.agents.ledger_port import BudgetExhaustedError, ChargeReceipt, PrivacyLedger
from privstream.agents.windows import (
    bound_contributions,
    count_window_id,
    count_window_index,
    time_window_id,
    time_window_index,
    user_level_parameters,
)
from privstream.learning.hypothesis_classes import HypothesisClass
from privstream.learning.private_learners import LearnerResult
from privstream.learning.private_learners.vector_base import VectorLearnerResult
from privstream.learning.sanitizers import SanitizerResult
from privstream.schemas import Certificate, HypothesisRelease, SanitizedRelease, WindowInfo

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
    privacy_unit: str = "example"
    user_contribution_bound: int | None = None
    expected_size: int | None = None  # where n is private: the size the algorithms use instead of n

    @property
    def neighbouring_relation(self) -> str:
        # Count windows have a public size: neighbours replace one example. A time window's size
        # depends on the data, so neighbours add or remove one (DESIGN.md §3).
        return "replace-one" if self.window_kind == "count" else "add-remove-one"


@dataclass
class _StreamState:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    recovered: bool = False
    exhausted: bool = False
    watermark: float = float("-inf")  # highest event time seen (time windows)
    last_closed_time_window: int | None = None
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
                    index = count_window_index(seq, size)
                    self._schedule(state, count_window_id(self.store.generation, index, size),
                                   self._release_count(policy, index))
            return
        assert policy.window_seconds is not None
        rows = []
        for o, x, y, u, t, stamp in zip(offsets, xs, ys, users, event_times, stamps_ms, strict=True):
            moment = t.timestamp() if t is not None else (stamp / 1000 if stamp is not None else time.time())
            index = time_window_index(moment, policy.window_seconds)
            if state.last_closed_time_window is not None and index <= state.last_closed_time_window:
                self.metrics.late_example(stream_id)  # its window was released already
                continue
            state.watermark = max(state.watermark, moment)
            rows.append((o, x, y, u, index))
        self.store.append_many(stream_id, partition, rows)
        self._close_time_windows(policy, state)

    def _close_time_windows(self, policy: ReleasePolicy, state: _StreamState) -> None:
        assert policy.window_seconds is not None
        for index in self.store.pending_time_windows(policy.stream_id):
            end = (index + 1) * policy.window_seconds
            if end + policy.allowed_lateness_seconds > state.watermark:
                break
            last = state.last_closed_time_window
            state.last_closed_time_window = index if last is None else max(last, index)
            self._schedule(state, time_window_id(index, policy.window_seconds),
                           self._release_time(policy, index))

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
        for stream_id, policy in self.policies.items():
            state = self._streams[stream_id]
            state.recovered = False  # a rebalance may have moved the stream here or back
            if self.store.partitions(stream_id) & partitions:
                state.recovered = True
                self._spawn(self._recover(policy))

    async def _recover(self, policy: ReleasePolicy) -> None:
        """On first sight of a stream: publish its outbox, release windows that closed before a crash."""
        await self.replay_outbox(policy.stream_id)
        if policy.window_kind != "count":
            return
        size = policy.window_size
        closed = set(self.store.closed_windows(policy.stream_id))
        complete = self.store.next_seq(policy.stream_id) // size
        for index in range(complete):
            if count_window_id(self.store.generation, index, size) in closed:
                continue
            window = self.store.count_window(policy.stream_id, index * size, (index + 1) * size)
            if len(window.seqs) == size:
                state = self._streams[policy.stream_id]
                self._schedule(state, count_window_id(self.store.generation, index, size),
                               self._release_count(policy, index))

    async def replay_outbox(self, stream_id: str | None = None) -> int:
        """Publish charged releases not confirmed published (after a crash); returns how many."""
        pending = await asyncio.to_thread(self.ledger.unpublished, stream_id)
        count = 0
        lost: set[str] = set()
        for charge in pending:
            if charge.stream_id not in self.policies or charge.stream_id in lost:
                continue
            try:
                await self._publish(topic_of_key(charge.mechanism), charge.stream_id, charge.release)
            except LeaseLostError:  # the stream's partition is another worker's now: its outbox too
                lost.add(charge.stream_id)
                continue
            await asyncio.to_thread(self.ledger.mark_published, charge.entry_id)
            log.info("re-published release %s of stream %s from the ledger's outbox",
                     charge.entry_id, charge.stream_id, extra={
                         "stream_id": charge.stream_id, "window_id": charge.window_id,
                         "ledger_entry_id": str(charge.entry_id)})
            count += 1
        return count

    # --- releasing ----------------------------------------------------------------------------
    async def _release_count(self, policy: ReleasePolicy, index: int) -> None:
        size = policy.window_size
        window_id = count_window_id(self.store.generation, index, size)
        info = WindowInfo(window_id=window_id, kind="count", start=index * size, end=(index + 1) * size)
        await self._release(
            policy, window_id, info,
            load=lambda: self.store.count_window(policy.stream_id, index * size, (index + 1) * size),
            close=lambda outcome: self.store.mark_closed(
                policy.stream_id, window_id, outcome, seqs=(index * size, (index + 1) * size)),
        )

    async def _release_time(self, policy: ReleasePolicy, index: int) -> None:
        assert policy.window_seconds is not None
        window_id = time_window_id(index, policy.window_seconds)
        start = datetime.fromtimestamp(index * policy.window_seconds, UTC)
        end = datetime.fromtimestamp((index + 1) * policy.window_seconds, UTC)
        await self._release(
            policy, window_id, WindowInfo(window_id=window_id, kind="time", start=start, end=end),
            load=lambda: self.store.time_window(policy.stream_id, index),
            close=lambda outcome: self.store.mark_closed(
                policy.stream_id, window_id, outcome, time_window=index),
        )

    async def _release(
        self,
        policy: ReleasePolicy,
        window_id: str,
        info: WindowInfo,
        load: Callable[[], WindowData],
        close: Callable[[str], None],
    ) -> None:
        stream_id = policy.stream_id
        state = self._streams[stream_id]
        async with state.lock:  # one window at a time per stream, in window order
            loaded: list[WindowData] = []  # the window is read from the store once, if at all

            async def window() -> WindowData:
                if not loaded:
                    data = await asyncio.to_thread(load)
                    if policy.privacy_unit == "user":
                        assert policy.user_contribution_bound is not None
                        data = bound_contributions(data, policy.user_contribution_bound)
                    loaded.append(data)
                return loaded[0]

            outcomes = []
            for product in policy.products:
                try:
                    outcome = await self._release_product(policy, product, state, window_id, info, window)
                    outcomes.append(outcome)
                except LeaseLostError as exc:
                    # Another worker owns the stream's partition now and releases this window; if
                    # the partition comes back here, the recovery on assignment schedules it again.
                    log.warning("%s of window %s of stream %s not released here: %s", product.key,
                                window_id, stream_id, exc, extra={
                                    "stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None})
                    state.scheduled.discard(window_id)
                    return
                except Exception:
                    # A learner or publication failure must not kill the worker: log, count, surface.
                    log.exception("%s of window %s of stream %s failed", product.key, window_id, stream_id,
                                  extra={"stream_id": stream_id, "window_id": window_id,
                                         "ledger_entry_id": None})
                    self.metrics.learner_failed(stream_id)
                    outcomes.append("failed")
            if "failed" not in outcomes:  # a failed product keeps the window for a retry after restart
                await asyncio.to_thread(close, ",".join(outcomes))

    async def _release_product(
        self,
        policy: ReleasePolicy,
        product: Product,
        state: _StreamState,
        window_id: str,
        info: WindowInfo,
        window: Callable[[], Awaitable[WindowData]],
    ) -> str:
        """Release one product of a window; returns "released" or "refused"."""
        stream_id, key = policy.stream_id, product.key
        existing = await asyncio.to_thread(self.ledger.lookup, stream_id, window_id, key)
        if existing is not None:  # released before a crash or by the partition's previous owner
            if not existing.published:
                await self._publish(product.topic, stream_id, existing.release)
                await asyncio.to_thread(self.ledger.mark_published, existing.entry_id)
            return "released"
        remaining = await asyncio.to_thread(self.ledger.remaining, stream_id)
        if remaining.epsilon < product.epsilon or remaining.delta < product.delta:
            await self._refuse(policy, product, state, window_id)
            return "refused"

        data = await window()
        if policy.privacy_unit == "user":
            assert policy.user_contribution_bound is not None
            epsilon, delta = user_level_parameters(product.epsilon, product.delta,
                                                   policy.user_contribution_bound)
        else:
            epsilon, delta = product.epsilon, product.delta
        rng = self._rng_factory(f"{window_id}/{key}") if self._rng_factory else None
        # n private: the algorithms derive everything they publish from the operator's expected size
        size = {} if policy.expected_size is None else {"expected_size": policy.expected_size}
        if product.vector:
            run = partial(product.algorithm.fit, data.xs, data.ys, epsilon=epsilon, delta=delta,
                          bounds=policy.feature_bounds, rng=rng, **size)
        elif product.topic == "hypotheses":
            run = partial(product.algorithm.fit, policy.hypothesis_class, data.xs, data.ys,
                          epsilon=epsilon, delta=delta, alpha=policy.alpha, beta=policy.beta, rng=rng, **size)
        else:
            run = partial(product.algorithm.fit, policy.hypothesis_class, data.xs,
                          data.ys if product.labelled else None, epsilon=epsilon, delta=delta, rng=rng,
                          **size)
        started = time.perf_counter()
        result = await asyncio.get_running_loop().run_in_executor(self.executor, run)
        self.metrics.learner_ran(product.name, time.perf_counter() - started, len(data.xs))

        def release_bytes(receipt: ChargeReceipt) -> bytes:
            return self._release_json(policy, product, result, info, receipt, "seeded" if rng else "secure")

        try:
            charge = await asyncio.to_thread(
                self.ledger.charge, stream_id, window_id, key, product.epsilon, product.delta, release_bytes
            )
        except BudgetExhaustedError:  # spent concurrently by another worker since the check
            await self._refuse(policy, product, state, window_id, recorded=True)
            return "refused"
        await self._publish(product.topic, stream_id, charge.release)
        await asyncio.to_thread(self.ledger.mark_published, charge.entry_id)
        state.releases += 1
        spent = await asyncio.to_thread(self.ledger.spent, stream_id)
        left = await asyncio.to_thread(self.ledger.remaining, stream_id)
        self.metrics.released(stream_id, spent.epsilon, left.epsilon)
        log.info("released %s for window %s of stream %s (ledger entry %s, epsilon left %g)",
                 key, window_id, stream_id, charge.entry_id, left.epsilon, extra={
                     "stream_id": stream_id, "window_id": window_id, "ledger_entry_id": str(charge.entry_id)})
        return "released"

    async def _refuse(self, policy: ReleasePolicy, product: Product, state: _StreamState, window_id: str,
                      recorded: bool = False) -> None:
        stream_id = policy.stream_id
        if not recorded:
            try:  # the ledger records the refusal itself, durably, and raises
                await asyncio.to_thread(self.ledger.charge, stream_id, window_id, product.key,
                                        product.epsilon, product.delta, b"")
            except BudgetExhaustedError:
                pass
            else:  # pragma: no cover - the check above saw too little budget; it cannot grow
                raise RuntimeError("the ledger accepted a charge beyond the stream's budget")
        if not state.exhausted:
            state.exhausted = True
            log.warning("stream %s: privacy budget exhausted; no more releases (the online SOA keeps "
                        "serving)", stream_id,
                        extra={"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None})
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
    ) -> bytes:
        # n is public only for count windows of examples: at the user level, how many examples
        # survive the per-user bound depends on how much each user sent (uncharged, private).
        n_public = policy.window_kind == "count" and policy.privacy_unit == "example"
        is_learner = product.topic == "hypotheses"
        certificate = Certificate(
            mechanism=result.mechanism,
            epsilon=product.epsilon,
            delta=product.delta,
            neighbouring_relation=policy.neighbouring_relation,
            privacy_unit=policy.privacy_unit,
            privacy=result.privacy,
            user_contribution_bound=policy.user_contribution_bound,
            window=info,
            sample_size=result.sample_size if n_public else None,
            ledger_entry_id=str(receipt.entry_id),
            epsilon_budget_remaining=receipt.remaining.epsilon,
            delta_budget_remaining=receipt.remaining.delta,
            parameters={**result.parameters, "learner" if is_learner else "sanitizer": product.name,
                        "algorithm_epsilon": result.epsilon, "algorithm_delta": result.delta},
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
                **common, hypothesis=model.to_dict())
        else:
            release = SanitizedRelease(**common, distribution=result.distribution.to_dict(),
                                       labelled=product.labelled)
        return release.model_dump_json().encode()

    # --- status ---------------------------------------------------------------------------------
    def stream_status(self, stream_id: str) -> dict[str, Any]:
        state = self._streams[stream_id]
        return {"releases_this_run": state.releases, "exhausted": state.exhausted}
