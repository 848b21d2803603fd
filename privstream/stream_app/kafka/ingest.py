"""The hot path: a batch consumer of the ``examples`` topic, run as a service of the faust app.

Measured (``benchmarks/bench_ingest.py``): a faust agent that iterates one event at a time tops out
near 4,000 events/s, while aiokafka's ``getmany`` reads ~100,000 small messages/s; the per-event
hand-off, not the learning, is the limit. So the examples topic is consumed here in batches, and
faust keeps what it does well: the web server, timers and the worker's lifecycle.

At-least-once, with offsets committed after processing: a batch is validated, learned and
buffered (``IngestPipeline``), its predictions and dead letters are sent and acknowledged by the
broker, its state is durable (the SOA and windows save before returning), and only then are its
offsets committed. A crash anywhere before the commit replays the batch, which the SOA and the
state store absorb without double counting.

No input can stop the loop: every record the pipeline produces fits the producer's request limit
(``MAX_RECORD_BYTES``), and a record Kafka still refuses is handled on its own
(:func:`deliver`): one refused for its size is dead-lettered as a reference (its headers, no value),
any other failure is retried until it goes through, while ``/healthz`` reports the batch as stuck
after ``stall_seconds``. The batch's offsets are committed once every record is acknowledged.

Offsets that go backwards (a partition's log replaced: the embedded broker restarted, a topic
re-created) are checked at each assignment (a restarted broker makes the worker join its group
again), and whenever a poll's records start below the offset read next with no seek of ours
(aiokafka resets a position out of its log to the log's start by itself), against the partition's
log mark in the state store (:mod:`.log_marks`): the new log is read as new examples (rebased),
or the worker stops in one line, never drops it as a replay.

The consumer group is ``<app_id>.ingest``, the worker's only one: faust's own consumer is not
started (the app has no agents or tables), so a worker joins one group at start, not two in a row.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from itertools import chain
from typing import Any, NamedTuple

import mode
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import (
    CommitFailedError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.protocol.group import LeaveGroupRequest

from privstream.agents.pipeline import (
    MAX_RECORD_BYTES,
    BatchOutput,
    DeadLetter,
    IngestPipeline,
    chunked,
    process_in_chunks,
)
from privstream.agents.validation import MAX_MESSAGE_BYTES
from privstream.learning.errors import InvariantError
from privstream.stream_app.kafka.clients import client_options, start_client
from privstream.stream_app.kafka.log_marks import (
    ExamplesLogReplacedError,
    LogMark,
    LogMarks,
    fingerprint,
    replaced_because,
)
from privstream.stream_app.metrics import ServiceMetrics
from privstream.stream_app.settings import Settings
from privstream.stream_app.startup_stages import StartupStages

log = logging.getLogger(__name__)

MAX_RECORDS_PER_POLL = 5000
#: How long reading the records a partition's log mark names may take.
ANCHOR_READ_SECONDS = 10.0
#: How often the service asks Kafka for metadata to know that it still answers (see ``_probe_kafka``).
KAFKA_PROBE_SECONDS = 5.0


#: The producer's limit on a request, hence on one record: Kafka's own default (1 MiB), above every
#: record the pipeline produces (``MAX_RECORD_BYTES`` and the record's framing).
PRODUCER_MAX_REQUEST_BYTES = 1 << 20
if MAX_RECORD_BYTES + 4096 > PRODUCER_MAX_REQUEST_BYTES:
    raise InvariantError("invariant broken: every record the pipeline produces fits a producer request")
#: Errors that say a record is too large for Kafka (the client's own check, or the broker's).
SIZE_ERRORS = (MessageSizeTooLargeError, RecordListTooLargeError, RecordTooLargeError)
#: The longest wait between two attempts to send a record Kafka did not take.
MAX_RETRY_SECONDS = 5.0


def ingest_consumer_options(settings: Settings) -> dict[str, Any]:
    """The ingest consumer's aiokafka options: one group per app, manual commits after the outputs."""
    return {
        **client_options(settings),
        "group_id": f"{settings.app_id}.ingest",
        "enable_auto_commit": False,  # committed after each batch's outputs are acknowledged
        # A partition without a committed offset is read from its start; a new assignment is
        # paused until its logs are judged (a replaced log: kafka/log_marks.py).
        "auto_offset_reset": "earliest",
        "max_partition_fetch_bytes": MAX_MESSAGE_BYTES,  # the largest message the pipeline reads
        "fetch_max_bytes": 64 << 20,
        # Kafka answers a fetch as soon as data arrives; the embedded broker waits this long
        # whenever the partition is caught up, so it bounds the latency of a quiet stream.
        "fetch_max_wait_ms": settings.kafka_fetch_max_wait_ms,
        "session_timeout_ms": int(settings.kafka_session_timeout_seconds * 1000),
        "heartbeat_interval_ms": int(settings.kafka_heartbeat_interval_seconds * 1000),
    }


def ingest_producer_options(settings: Settings) -> dict[str, Any]:
    """The producer of predictions, dead letters and releases."""
    return {
        **client_options(settings),
        # No linger: a batch's outputs are all queued before its loop waits for their acknowledgement,
        # so lingering would only add its 5 ms to every batch (~1 µs per message at 5,000 a poll).
        "linger_ms": 0,
        "acks": "all",
        "max_batch_size": 1 << 20,  # a record batch within Kafka's default message.max.bytes
        "max_request_size": PRODUCER_MAX_REQUEST_BYTES,
    }


#: A record to produce: key, value, headers (a ``DeadLetter`` is one).
Record = tuple[bytes | None, bytes, list[tuple[str, bytes]]]


class Sent(NamedTuple):
    """Records sent to a topic, one or a batch, and the future of their acknowledgement."""

    topic: str
    records: list[Record]
    future: asyncio.Future[Any]


async def send_one(producer: AIOKafkaProducer, topic: str, record: Record) -> Sent:
    """``producer.send``, with an error it raises at once (a record over ``max_request_size``, a full
    buffer) handed back in the future like the broker's errors."""
    key, value, headers = record
    try:
        future = await producer.send(topic, value, key=key, headers=headers)
    except Exception as exc:  # every failure is handled per record by ``deliver``
        future = asyncio.get_running_loop().create_future()
        future.set_exception(exc)
    return Sent(topic, [record], future)


async def send_dead_letters(producer: AIOKafkaProducer, topic: str, letters: list[DeadLetter]) -> list[Sent]:
    """Send dead letters as one record batch per partition.

    Each lands in the partition its key hashes to, as ``producer.send`` would put it, in order;
    a flood of invalid messages costs a few µs per letter instead of ~10 µs for a send each."""
    partitions = sorted(await producer.partitions_for(topic))
    partition_of: dict[bytes | None, int] = {}  # a key's partition, hashed once per call
    batches: dict[int, tuple[Any, list[Record]]] = {}  # partition -> the BatchBuilder being filled
    sent = []
    for letter in letters:
        key, value, headers = letter
        partition = partition_of.get(key)
        if partition is None:
            partition = DefaultPartitioner()(key, partitions, partitions)
            if key is not None:
                partition_of[key] = partition
        batch = batches.get(partition)
        if batch is None:
            batch = batches[partition] = (producer.create_batch(), [])
        if batch[0].append(key=key, value=value, timestamp=None, headers=headers) is None:  # full
            sent.append(
                Sent(topic, batch[1], await producer.send_batch(batch[0], topic, partition=partition))
            )
            batch = batches[partition] = (producer.create_batch(), [])
            batch[0].append(key=key, value=value, timestamp=None, headers=headers)
        batch[1].append(letter)
    for partition, (builder, records) in batches.items():
        sent.append(Sent(topic, records, await producer.send_batch(builder, topic, partition=partition)))
    return sent


def refused_for_size(topic: str, record: Record, error: BaseException) -> Record:
    """What replaces a record Kafka refuses for its size, in the dead-letter topic: no value, the
    record's headers if it was a dead letter (else its topic), the error, and the size it had."""
    key, value, record_headers = record
    headers = dict(record_headers) or {"error.reason": b"output_refused", "output.topic": topic.encode()}
    headers["error.produce"] = f"{type(error).__name__}: {error}"[:500].encode()
    headers.setdefault("source.bytes", str(len(value)).encode())
    return (key[:256] if key is not None else None, b"", list(headers.items()))


async def deliver(
    producer: AIOKafkaProducer,
    sent: list[Sent],
    dlq_topic: str,
    stopping: Callable[[], bool] = lambda: False,
    on_refused: Callable[[str, Record, BaseException], None] = lambda topic, record, error: None,
) -> bool:
    """Wait until every record sent is acknowledged, handling each failure on its own: a record
    refused for its size is replaced by its reference in the dead-letter topic (``on_refused`` is
    told), and (then) once that is refused too, dropped; any other failure is sent again, after a
    wait that doubles up to :data:`MAX_RETRY_SECONDS`. True once all went through; False if
    ``stopping()`` came first (the batch is then not committed, and read again)."""
    wait = 0.1
    while sent:
        results = await asyncio.gather(*(s.future for s in sent), return_exceptions=True)
        again: list[tuple[str, Record]] = []
        retry = False
        for (topic, records, _), result in zip(sent, results, strict=True):
            if not isinstance(result, BaseException):
                continue
            if not isinstance(result, SIZE_ERRORS):
                log.warning(
                    "ingest: sending %d record(s) to %s failed (%s: %s); trying again in %.1f s",
                    len(records),
                    topic,
                    type(result).__name__,
                    result,
                    wait,
                )
                again += [(topic, record) for record in records]
                retry = True
            elif len(records) > 1:  # a batch of dead letters: each on its own, then
                again += [(topic, record) for record in records]
            elif records[0][1]:
                (record,) = records
                log.error(
                    "ingest: Kafka refused a record of %d bytes for %s (%s); its reference goes to %s",
                    len(record[1]),
                    topic,
                    result,
                    dlq_topic,
                )
                on_refused(topic, record, result)
                again.append((dlq_topic, refused_for_size(topic, record, result)))
            else:  # even its reference: nothing left to send
                log.error("ingest: Kafka refused a reference for %s (%s); dropped", topic, result)
        if not again:
            return True
        if retry:
            await asyncio.sleep(wait)
            wait = min(2 * wait, MAX_RETRY_SECONDS)
        if stopping():
            return False
        sent = [await send_one(producer, topic, record) for topic, record in again]
    return True


async def leave_group(consumer: AIOKafkaConsumer) -> None:
    """Leave the consumer group now, so that its partitions go to the other members (or to the next
    worker) at once rather than after the session timeout.

    aiokafka's ``stop()`` leaves only from generation 1 on, where Kafka numbers a group's first
    generation; the embedded broker numbers it 0, so a worker stopped in its group's first generation
    stayed a member until its session expired, and the next worker's join waited for that."""
    coordinator = getattr(consumer, "_coordinator", None)
    if coordinator is None or coordinator.generation != 0 or not coordinator.member_id:
        return  # not in a group, or aiokafka leaves it itself
    try:
        await coordinator._send_req(LeaveGroupRequest(coordinator.group_id, coordinator.member_id))
    except Exception as exc:  # a best effort, as aiokafka's own: the session timeout still ends it
        log.info("ingest: could not leave the group (%s: %s)", type(exc).__name__, exc)
    else:
        coordinator.reset_generation()  # stop() must not leave it again


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, service: IngestService):
        self.service = service

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        # Called by the consumer's coordinator task whenever the event loop is free, which may be
        # between two chunks of a poll: the poll in hand is processed and sent, then committed,
        # before its partitions go to another worker (which reads on from that commit: nothing
        # of the poll is lost, or handled twice).
        await self.service.between_batches()
        await self.service.settle()
        log.info("ingest: partitions revoked: %s", sorted(tp.partition for tp in revoked))
        for tp in revoked:  # another worker may handle it meanwhile: our offset would go stale
            self.service.handled_offsets.pop(tp, None)
            self.service.forget_position(tp)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        # Paused before the first await: aiokafka fetches a new assignment while this listener
        # runs, and the ingest loop would handle records that the checks below then seek back
        # to (a poll learned twice); nothing is read until the partitions are judged.
        consumer = self.service.consumer
        if consumer is not None:
            consumer.pause(*assigned)
        for tp in assigned:  # read on from the group's committed offset: judged below
            self.service.forget_position(tp)
        try:
            await self._judge(assigned)
        except ExamplesLogReplacedError as exc:  # aiokafka would only log it: the loop raises it
            self.service.refused = exc  # left paused: the loop stops the worker
        finally:
            if consumer is not None and self.service.refused is None:
                # those still assigned (another rebalance may have begun meanwhile)
                consumer.resume(*(tp for tp in assigned if tp in consumer.assignment()))

    async def _judge(self, assigned: list[TopicPartition]) -> None:
        log.info("ingest: partitions assigned: %s", sorted(tp.partition for tp in assigned))
        self.service.stages.reach("partitions_assigned")
        # Before the first fetch of the new assignment (the service takes the partitions' leases).
        result = self.service.on_assigned({tp.partition for tp in assigned})
        if inspect.isawaitable(result):
            await result
        await self.service.check_logs(assigned)
        await self.service.read_again(assigned)


class IngestService(mode.Service):
    """Consumes ``examples`` in batches, runs the pipeline, publishes, then commits."""

    def __init__(
        self,
        settings: Settings,
        pipeline: IngestPipeline,
        on_assigned: Any,
        metrics: ServiceMetrics | None = None,
        stages: StartupStages | None = None,
        replay: dict[int, int] | None = None,
        pause: Callable[[int], Awaitable[None]] | None = None,
        marks: LogMarks | None = None,
        learned_up_to: Callable[[int], int] | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.stages = stages or StartupStages()
        self.settings = settings
        self.pipeline = pipeline
        self.metrics = metrics
        self.on_assigned = on_assigned
        #: Awaited before each part of a poll with the bytes of a large message the part reads
        #: whole, else 0 (the release agent's ``clear_of_deadlines``: :func:`process_in_chunks`).
        self.pause = pause
        #: Per partition, an offset to read again from once, at its first assignment (a state
        #: store restored from a backup lacks the examples read after it: store/identity.py).
        self.replay: dict[int, int] = dict(replay or {})
        #: The examples topic's log marks (kafka/log_marks.py): each partition's base and anchor.
        self.marks = marks
        #: Per partition, the position after the last example the online learners learned.
        self.learned_up_to = learned_up_to or (lambda partition: -1)
        #: A replaced partition the worker may not rebase: the loop stops with it.
        self.refused: ExamplesLogReplacedError | None = None
        #: Stops the worker gracefully (``privstream worker`` sets it); None: the loop raises.
        self.stop_worker: Callable[[], None] | None = None
        self.consumer: AIOKafkaConsumer | None = None
        self.producer: AIOKafkaProducer | None = None
        self.batches = 0
        # When each batch in hand was polled (monotonic), the oldest first: processed, or being
        # acknowledged and committed (_finish).
        self._polled_at: collections.deque[float] = collections.deque()
        self._finishing: asyncio.Future[None] | None = None  # the last batch's _finish
        self.handled_offsets: dict[TopicPartition, int] = {}  # next offset to handle, per partition
        #: Per partition, the offset read next (after the last record polled, or our seek): a poll
        #: below it with no seek of ours is aiokafka's reset of a position out of its log.
        self._next_offsets: dict[TopicPartition, int] = {}
        self._seeks: dict[TopicPartition, int] = {}  # per partition, how often we sought it
        self._producer_ready = asyncio.Event()
        self._between_batches = asyncio.Event()  # clear while a polled batch is being handled
        self._between_batches.set()
        self.kafka_ok_at = time.monotonic()  # when Kafka last answered a metadata request
        self._kafka_lost_logged = False
        # Held by a probe's metadata request; the stop takes it before closing the clients, whose
        # closed connections would fail the request in flight (aiokafka logs that as an ERROR).
        self._probing = asyncio.Lock()

    async def read_again(self, assigned: list[TopicPartition]) -> None:
        """Seek the partitions of :attr:`replay` back to their offset where the group's committed
        one is past it (once each): their examples are handled again, which the state store and
        the ledger absorb (a window already released is never released again)."""
        consumer = self.consumer
        if consumer is None:
            return
        for tp in assigned:
            offset = self.replay.pop(tp.partition, None)
            if offset is None:
                continue
            if self.marks is not None:
                offset = max(0, offset - self.marks.base(tp.partition))
            committed = await consumer.committed(tp)
            if committed is not None and committed > offset:
                log.warning(
                    "ingest: reading partition %d again from offset %d (committed %d) for the state store",
                    tp.partition,
                    offset,
                    committed,
                )
                self._seek(tp, offset)

    async def check_logs(self, assigned: list[TopicPartition]) -> None:
        """Compare each newly assigned partition with its log mark, rebase those whose log was
        replaced (or raise :class:`ExamplesLogReplacedError`). A partition without a committed
        offset is read from its start (``auto_offset_reset``)."""
        consumer, marks = self.consumer, self.marks
        if consumer is None or marks is None or not assigned:
            return
        await asyncio.to_thread(marks.reload)
        firsts, ends = await consumer.beginning_offsets(assigned), await consumer.end_offsets(assigned)
        stored = {tp: await asyncio.to_thread(marks.stored, tp.partition) for tp in assigned}
        wanted = {}
        for tp in assigned:
            mark = marks.marks.get(tp.partition)
            if mark is None or mark.anchor_offset is None:
                continue
            if mark.anchor_offset < firsts[tp]:  # retention deleted it: the next read anchors anew
                await asyncio.to_thread(marks.drop_anchor, tp.partition)
            elif mark.anchor_offset < ends[tp] or stored[tp] - mark.base > ends[tp]:
                wanted[tp] = mark.anchor_offset  # an end below what was stored: is the anchor there?
        found = await self._fingerprints_at(wanted)
        for tp in assigned:
            mark = marks.marks.get(tp.partition, LogMark())
            why = replaced_because(mark, stored=stored[tp], end=ends[tp], found=found.get(tp))
            if why is not None:
                await self._replaced(tp, why, firsts[tp])

    async def _replaced(self, tp: TopicPartition, why: str, first: int) -> None:
        """Rebase ``tp`` and read it from its start (or raise: :meth:`LogMarks.replace`)."""
        if self.consumer is None or self.marks is None:
            return
        base = self.marks.base(tp.partition)
        handled = self.handled_offsets.pop(tp, None)
        also = max(self.learned_up_to(tp.partition), -1 if handled is None else base + handled)
        behind = tp.partition in self.replay  # to be read again, from the old log
        await asyncio.to_thread(self.marks.replace, tp.topic, tp.partition, why, also=also, behind=behind)
        self.replay.pop(tp.partition, None)  # positions of the old log
        self._seek(tp, first)
        if self.metrics is not None:
            self.metrics.examples_log_replaced.inc()

    async def _fingerprints_at(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, str]:
        """The fingerprints of the records at these offsets (one reader, outside the group)."""
        if not wanted:
            return {}
        reader = AIOKafkaConsumer(
            **client_options(self.settings),
            group_id=None,
            enable_auto_commit=False,
            max_partition_fetch_bytes=MAX_MESSAGE_BYTES,
        )
        await start_client(reader, self.settings)
        found: dict[TopicPartition, str] = {}
        try:
            reader.assign(list(wanted))
            for tp, offset in wanted.items():
                reader.seek(tp, offset)
            deadline = time.monotonic() + ANCHOR_READ_SECONDS
            while len(found) < len(wanted) and time.monotonic() < deadline:
                batch = await reader.getmany(timeout_ms=500, max_records=len(wanted))
                for tp, records in batch.items():
                    for record in records:
                        if record.offset == wanted[tp]:
                            found[tp] = fingerprint(record)
                    reader.pause(tp)
        finally:
            await reader.stop()
        return found

    def forget_position(self, tp: TopicPartition) -> None:
        """Where ``tp`` is read next is not ours to know (an assignment reads on from the group's
        committed offset, a revoked partition goes to another worker)."""
        self._next_offsets.pop(tp, None)

    def _seek(self, tp: TopicPartition, offset: int) -> None:
        """Move ``tp``'s position ourselves: the next records read of it start at ``offset``."""
        if self.consumer is None:
            return
        self.consumer.seek(tp, offset)
        self._next_offsets[tp] = offset
        self._seeks[tp] = self._seeks.get(tp, 0) + 1

    def _went_back(self, polled: dict[TopicPartition, list[Any]]) -> list[TopicPartition]:
        """The partitions whose polled records start below the offset read next, with no seek of
        ours: aiokafka reset a fetch position out of its log (``auto_offset_reset``), as when the
        log was replaced under the running worker without a rejoin of the group."""
        return [
            tp
            for tp, records in polled.items()
            if records and tp in self._next_offsets and records[0].offset < self._next_offsets[tp]
        ]

    async def _judge_again(self, back: list[TopicPartition], polled: dict[TopicPartition, list[Any]]) -> bool:
        """Judge partitions whose offsets went back as at an assignment (:meth:`check_logs`): a
        replaced log is rebased and read from its start (its polled records are dropped from
        ``polled``, read again), or refused (False: the loop stops the worker). A log that still
        holds its anchor is the same log: its records below the position are replays."""
        for tp in back:
            log.warning(
                "ingest: partition %d went back to offset %d below %d without a seek (its log "
                "replaced?): judging it again",
                tp.partition,
                polled[tp][0].offset,
                self._next_offsets[tp],
            )
        await self.settle()  # the batch in flight commits before its partition is judged
        for tp in [tp for tp in back if tp not in self.assignment()]:  # revoked meanwhile: not ours
            polled.pop(tp, None)
            back.remove(tp)
        seeks = dict(self._seeks)
        try:
            await self.check_logs(back)
        except ExamplesLogReplacedError as exc:
            self.refused = exc
            if self.consumer is not None:
                self.consumer.pause(*back)
            return False
        for tp in back:
            if self._seeks.get(tp) != seeks.get(tp):  # rebased: read from its start
                polled.pop(tp, None)
        return True

    async def on_start(self) -> None:
        self.stages.reach("listening")  # the listeners are started before this service
        self._probing = asyncio.Lock()  # a stop took the last one for good
        self.producer = AIOKafkaProducer(**ingest_producer_options(self.settings))
        await self.producer.start()
        self._producer_ready.set()
        if self.marks is not None and self.marks.rebase is None:  # examples_log_replaced = "auto"
            from privstream.stream_app.embedded.broker import runs_embedded_broker

            # the embedded broker keeps nothing across its restart: a new log holds new examples
            self.marks.rebase = await runs_embedded_broker(self.settings)
        self.consumer = AIOKafkaConsumer(**ingest_consumer_options(self.settings))
        self.consumer.subscribe([self.settings.topic("examples")], listener=_Rebalance(self))
        await self.consumer.start()
        self.kafka_ok_at = time.monotonic()  # it answered: the clients are connected

    async def on_stop(self) -> None:
        # Let the batch in hand finish (outputs acknowledged, offsets committed) before leaving
        # the group: a commit racing the LeaveGroup failed and crashed the stop (exit status 1).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._between_batches.wait(), self.settings.stall_seconds)
            await asyncio.wait_for(self.settle(), self.settings.stall_seconds)
        with contextlib.suppress(TimeoutError):  # a probe answers within KAFKA_PROBE_SECONDS
            await asyncio.wait_for(self._probing.acquire(), KAFKA_PROBE_SECONDS + 1.0)
        if self.consumer is not None:
            await leave_group(self.consumer)
            await self.consumer.stop()
        if self.producer is not None:
            await self.producer.stop()

    def health(self) -> tuple[bool, str]:
        """Alive while the consumer runs, Kafka answers, and no polled batch is stuck
        (``stall_seconds``): the operator listener's ``/healthz``."""
        if self.crashed:
            return False, f"the ingest consumer crashed: {self.crash_reason!r}"
        stall = self.settings.stall_seconds
        silent = time.monotonic() - self.kafka_ok_at
        if silent > stall:
            return False, f"Kafka has not answered for {silent:.0f} s"
        started = self.batch_started
        if started is not None and time.monotonic() - started > stall:
            return False, f"a batch polled {time.monotonic() - started:.0f} s ago is still not done"
        return True, "ok"

    @property
    def batch_started(self) -> float | None:
        """When the oldest batch in hand was polled (monotonic), or None."""
        return self._polled_at[0] if self._polled_at else None

    def readiness(self) -> tuple[bool, str]:
        """Ready once the clients are up and partitions of the examples topic are assigned."""
        if self.producer is None or self.consumer is None:
            return False, "starting"
        if not self.assignment():
            return False, "no partitions of the examples topic assigned yet"
        return True, "ok"

    def assignment(self) -> set[TopicPartition]:
        return set(self.consumer.assignment()) if self.consumer is not None else set()

    async def publish(
        self,
        topic: str,
        key: bytes,
        value: bytes,
        headers: list[tuple[str, bytes]],
        *,
        timestamp_ms: int | None = None,
    ) -> None:
        """Send one message and wait for the broker's acknowledgement (used for releases);
        ``timestamp_ms``: the record's timestamp (None: the send time)."""
        await self._producer_ready.wait()
        if self.producer is None:
            raise InvariantError("invariant broken: the producer is ready")
        await (await self.producer.send(topic, value, key=key, headers=headers, timestamp_ms=timestamp_ms))

    @mode.Service.timer(KAFKA_PROBE_SECONDS)
    async def _probe_kafka(self) -> None:
        await self.probe_kafka()

    async def probe_kafka(self) -> None:
        """Record when Kafka last answered. An idle consumer polls nothing whether or not the
        broker is there, and aiokafka retries forever: without this probe an outage (or a broker
        that lost everything) is invisible; with it, /healthz fails after ``stall_seconds``."""
        if self.consumer is None or self._probing.locked():  # stopping (or a probe still waits)
            return
        try:
            async with self._probing:
                await asyncio.wait_for(self.consumer.topics(), KAFKA_PROBE_SECONDS)
        except Exception as exc:  # any failure to get metadata means Kafka is not answering
            silent = time.monotonic() - self.kafka_ok_at
            if silent > self.settings.stall_seconds and not self._kafka_lost_logged:
                self._kafka_lost_logged = True
                log.error(
                    "ingest: Kafka at %s has not answered for %.0f s (%s: %s); /healthz fails until it does",
                    self.settings.kafka_bootstrap,
                    silent,
                    type(exc).__name__,
                    exc,
                )
            return
        if self._kafka_lost_logged:
            self._kafka_lost_logged = False
            log.warning("ingest: Kafka at %s answers again", self.settings.kafka_bootstrap)
        self.kafka_ok_at = time.monotonic()

    async def _send_outputs(self, output: BatchOutput, predictions_topic: str, dlq_topic: str) -> list[Sent]:
        """Send a batch's predictions and dead letters (queued in the producer: see :func:`deliver`)."""
        producer = self.producer
        if producer is None:
            raise InvariantError("invariant broken: outputs are sent once the producer started")
        sent = [
            await send_one(producer, predictions_topic, (key, value, [])) for key, value in output.predictions
        ]
        if output.dead_letters:
            sent += await send_dead_letters(producer, dlq_topic, output.dead_letters)
        return sent

    def _refused(self, topic: str, record: Record, error: BaseException) -> None:
        if self.metrics is not None:
            self.metrics.output_refused()

    def _report_lag(self) -> None:
        """Each assigned partition's lag: the high watermark of its last fetch minus the next
        offset to handle (known once this worker has handled a batch of the partition)."""
        if self.metrics is None or self.consumer is None:
            return
        lags = {}
        for tp in self.assignment():
            highwater, handled = self.consumer.highwater(tp), self.handled_offsets.get(tp)
            if highwater is not None and handled is not None:
                lags[tp.partition] = max(0, highwater - handled)
        self.metrics.lag(lags)

    @mode.Service.task
    async def _consume(self) -> None:
        """Poll, process, send; a batch's outputs are acknowledged and its offsets committed while the
        next batch is polled and processed (:meth:`_finish`), one batch behind at most, in order."""
        if self.consumer is None or self.producer is None:
            raise InvariantError("invariant broken: the consumer and the producer started")
        consumer = self.consumer
        predictions_topic = self.settings.topic("predictions")
        dlq_topic = self.settings.topic("examples.dlq")
        while not self.should_stop:
            if self.refused is not None:
                if self.stop_worker is None:
                    raise self.refused
                log.error("ingest: %s", self.refused)  # one line; the worker stops and exits 2
                self.stop_worker()
                return
            polled = await consumer.getmany(timeout_ms=200, max_records=MAX_RECORDS_PER_POLL)
            back = self._went_back(polled)  # no seek of ours can have come since the poll
            if back and not await self._judge_again(back, polled):
                continue  # refused: the loop stops the worker
            for tp, records in polled.items():
                if records:
                    self._next_offsets[tp] = records[-1].offset + 1
            finishing = self._finishing
            if finishing is not None and finishing.done():
                finishing.result()  # its error, if it failed, stops the service as the loop's would
            if not polled or self.should_stop:  # stopping: not committed, so it is read again
                if not self.should_stop and (finishing is None or finishing.done()):
                    self._report_lag()
                continue
            self._polled_at.append(time.monotonic())
            self._between_batches.clear()
            try:
                output = await process_in_chunks(
                    chunked(self.pipeline), chain.from_iterable(await self._positioned(polled)), self.pause
                )
                sent = await self._send_outputs(output, predictions_topic, dlq_topic)
                handled = {tp: messages[-1].offset + 1 for tp, messages in polled.items()}
                if finishing is not None:
                    await finishing  # the previous batch first: offsets are committed in order
                self._finishing = asyncio.ensure_future(
                    self._finish(sent, handled, bool(output.predictions), dlq_topic)
                )
            finally:
                self._between_batches.set()

    async def _positioned(self, polled: dict[TopicPartition, list[Any]]) -> list[list[Any]]:
        """The polled records with their offsets counted from their partition's base; the first
        record read of a partition's current log becomes its anchor."""
        marks = self.marks
        if marks is None:
            return list(polled.values())
        for tp, messages in polled.items():
            if messages and marks.needs_anchor(tp.partition):
                await asyncio.to_thread(marks.anchor, tp.partition, messages[0])
        return [marks.shifted(tp.partition, messages) for tp, messages in polled.items()]

    async def _finish(
        self, sent: list[Sent], handled: dict[TopicPartition, int], predicted: bool, dlq_topic: str
    ) -> None:
        """Wait until a batch's outputs are acknowledged, then commit its offsets."""
        if self.consumer is None or self.producer is None:
            raise InvariantError("invariant broken: the consumer and the producer started")
        try:
            if not await deliver(self.producer, sent, dlq_topic, lambda: self.should_stop, self._refused):
                return  # stopping: not committed, so it is read again
            if predicted:
                self.stages.reach("first_prediction")
            try:
                await self.consumer.commit(handled)
            except CommitFailedError:
                # The group rebalanced while the batch was handled (a worker joined or died, or a
                # slow store held the batch up): its partitions' new owners read it again from the
                # last commit, which the idempotent state store and ledger absorb. Not a reason to
                # stop: the next poll rejoins the group.
                log.warning(
                    "ingest: the group rebalanced during a batch, whose offsets were not "
                    "committed; its partitions are read again by their new owners"
                )
                return
            self.batches += 1
            self.handled_offsets.update(handled)
            if self.metrics is not None and self._polled_at:
                self.metrics.ingest_batch_handled(time.monotonic() - self._polled_at[0])
            self._report_lag()
        finally:
            if self._polled_at:
                self._polled_at.popleft()

    async def between_batches(self) -> None:
        """Wait until no polled batch is being processed or sent (its acknowledgement and commit
        may still be in flight: :meth:`settle`)."""
        await self._between_batches.wait()

    async def settle(self) -> None:
        """Wait until the batch in flight is acknowledged and committed (or given up)."""
        finishing = self._finishing
        if finishing is not None:
            with contextlib.suppress(Exception):  # its error stops the loop, not the caller
                await asyncio.shield(finishing)
