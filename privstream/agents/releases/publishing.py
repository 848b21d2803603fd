"""Publishing: at a release's deadline, the bytes ready then are stored in its reservation (the first
bytes win), published with the deadline as the record's timestamp and marked published; after a
crash, the ledger's outbox (charged, not confirmed published) is published again, byte for byte."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from privstream.agents.interfaces import LeaseLostError, ReleaseMetrics
from privstream.agents.ledger_port import PrivacyLedger, public_entry_id
from privstream.agents.releases.certificate import milliseconds
from privstream.agents.releases.policy import ReleasePolicy, topic_of_key
from privstream.agents.releases.state import NodeJob, Ready, StreamState
from privstream.agents.timing import sleep_until
from privstream.learning.errors import InvariantError

log = logging.getLogger(__name__)


class Publisher(Protocol):
    """Sends a release's bytes to a public topic (``topic``: its logical name) and waits until Kafka
    has them; ``timestamp_ms`` is the record's timestamp (the release's deadline; ``None``: the send
    time)."""

    async def __call__(
        self, topic: str, stream_id: str, release: bytes, *, timestamp_ms: int | None = None
    ) -> None: ...


#: A release published this much after its deadline is counted as a missed deadline (the publisher
#: wakes at the deadline, then writes the ledger and sends: milliseconds when the worker is healthy).
DEADLINE_TOLERANCE_SECONDS = 0.25


class DeadlinePublisher:
    """Publishes a worker's releases: each at its deadline, and the outbox after a crash."""

    def __init__(
        self,
        ledger: PrivacyLedger,
        publish: Publisher,
        metrics: ReleaseMetrics,
        clock: Callable[[], float],
        offload: Callable[..., Awaitable[Any]],
    ):
        self.ledger = ledger
        self.publish = publish
        self.metrics = metrics
        self.clock = clock
        self._offload = offload
        self._publishing: set[int] = set()  # ledger entries being published now (not the outbox's)

    async def publish_node(self, job: NodeJob) -> list[str]:
        """At the deadline, publish each product's release of the node (:meth:`publish_ready`), in
        order; the outcomes, "lost" for a release the stream's new owner publishes from the
        ledger's outbox, "failed" for one retried from the outbox."""
        outcomes: list[str] = []
        for ready in job.readies:
            try:
                outcomes.append(
                    await self.publish_ready(job.policy, job.state, job.window_id, ready, job.level)
                )
            except LeaseLostError as exc:  # the new owner publishes it from the ledger's outbox
                log.warning(
                    "%s of window %s of stream %s not published here: %s",
                    ready.product.key,
                    job.window_id,
                    job.stream_id,
                    exc,
                    extra=job.log_extra,
                )
                outcomes.append("lost")
            except Exception:
                log.exception(
                    "publishing %s of window %s of stream %s failed (retried from the outbox)",
                    ready.product.key,
                    job.window_id,
                    job.stream_id,
                    extra=job.log_extra,
                )
                self.metrics.learner_failed(job.stream_id)
                outcomes.append("failed")
        return outcomes

    async def publish_ready(
        self, policy: ReleasePolicy, state: StreamState, window_id: str, ready: Ready, level: int
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
        if reservation is None:
            raise InvariantError("invariant broken: reservation is not None")
        if body is None:
            raise InvariantError("invariant broken: body is not None")
        self._publishing.add(reservation.entry_id)
        try:
            charge = await self._offload(self.ledger.complete, reservation.entry_id, body)
            await self.publish(
                ready.product.topic, stream_id, charge.release, timestamp_ms=milliseconds(ready.deadline)
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

    async def replay_outbox(self, policies: dict[str, ReleasePolicy], stream_id: str | None = None) -> int:
        """Publish charged releases not confirmed published (after a crash), with their scheduled
        time as the record's timestamp; returns how many."""
        pending = await self._offload(self.ledger.unpublished, stream_id)
        count = 0
        lost: set[str] = set()
        for charge in pending:
            if (
                charge.stream_id not in policies
                or charge.entry_id in self._publishing
                or charge.stream_id in lost
            ):
                continue
            topic = topic_of_key(charge.mechanism)
            if topic is None:  # a quality estimate: its bytes are in the release that carries it
                await self._offload(self.ledger.mark_published, charge.entry_id)
                continue
            try:
                await self.publish(
                    topic,
                    charge.stream_id,
                    charge.release,
                    timestamp_ms=milliseconds(charge.scheduled_at),
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
