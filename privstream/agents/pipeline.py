"""The ingest pipeline: a batch of raw messages -> validation -> the online learners -> windows.

Pure with respect to Kafka: the service's consumer hands in what it polled and sends what comes
back (predictions and dead letters), then commits the offsets: at-least-once, with every output
of a message acknowledged before its offset is committed.

Examples are grouped per (stream, source partition), keeping their order, so each stream's SOA
learns a whole group with its vectorised ``learn_many`` and one columnar ``PredictionBatch`` per
group replaces one message per example: this is what keeps the service near the Kafka client's
own rate (``benchmarks/bench_ingest.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple, Protocol

from privstream.agents.interfaces import IngestMetrics
from privstream.agents.online import OnlineLearners
from privstream.agents.progress import Progress
from privstream.agents.releases import ReleaseAgent
from privstream.agents.validation import MAX_MESSAGE_BYTES, ExampleValidator, Invalid, ValidExample
from privstream.schemas import ExampleBatch


class ConsumedRecord(Protocol):
    """What the pipeline reads of a consumed message (aiokafka's ``ConsumerRecord`` has it all,
    so the consumer hands its records over as they are: no copy per message on the hot path)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def timestamp(self) -> int | None: ...  # milliseconds


class RawRecord(NamedTuple):
    """A consumed message built by hand (tests, replays)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int | None = None


#: Examples per ``PredictionBatch`` message: ~60 bytes each in JSON at most (2^63-sized points,
#: offsets and ids aside), so a message stays far below Kafka's default 1 MB request size.
MAX_PREDICTIONS_PER_MESSAGE = 5_000


class DeadLetter(NamedTuple):
    """A rejected message as it goes to the dead-letter topic (a tuple: cheap to build)."""

    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]


@dataclass
class BatchOutput:
    """What a batch produces: messages for the predictions and dead-letter topics."""

    predictions: list[tuple[bytes, bytes]] = field(default_factory=list)  # (key, value)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    examples: int = 0


def dead_letter_headers(invalid: Invalid, record: ConsumedRecord) -> list[tuple[str, bytes]]:
    """Kafka headers that say why a message was dead-lettered and where it came from."""
    return [
        ("error.reason", invalid.reason.encode()),
        ("error.detail", invalid.detail[:1000].encode()),
        ("source.topic", record.topic.encode()),
        ("source.partition", str(record.partition).encode()),
        ("source.offset", str(record.offset).encode()),
    ]


@dataclass
class _Group:
    """The valid examples of one stream from one partition, in order, as columns.

    Single examples (the hot path) are appended as they come, one ``ValidExample`` and its record,
    and turned into columns in bulk when an ``ExampleBatch`` follows or the batch ends."""

    offsets: list[int] = field(default_factory=list)
    items: list[int] = field(default_factory=list)
    xs: list[int] = field(default_factory=list)
    ys: list[int] = field(default_factory=list)
    users: list[str | None] = field(default_factory=list)
    times: list[datetime | None] = field(default_factory=list)  # event times, if given
    stamps: list[int | None] = field(default_factory=list)  # the messages' Kafka timestamps (ms)
    ids: list[str | None] = field(default_factory=list)
    singles: list[ValidExample] = field(default_factory=list)  # not yet in the columns
    single_records: list[ConsumedRecord] = field(default_factory=list)

    def add_batch(self, record: ConsumedRecord, batch: ExampleBatch) -> None:
        self.columns()  # the single examples before it first: the order is the stream's
        n = len(batch.xs)
        self.offsets += [record.offset] * n
        self.items += range(n)
        self.xs += batch.xs
        self.ys += batch.ys
        self.users += batch.user_ids or [None] * n
        self.times += batch.event_times or [None] * n
        self.stamps += [record.timestamp] * n
        self.ids += batch.ids or [None] * n

    def columns(self) -> _Group:
        """The group with every example in its columns."""
        if self.singles:
            _, xs, ys, users, times, ids = zip(*self.singles, strict=True)
            self.offsets += [r.offset for r in self.single_records]
            self.stamps += [r.timestamp for r in self.single_records]
            self.items += [0] * len(self.singles)
            self.xs += xs
            self.ys += ys
            self.users += users
            self.times += times
            self.ids += ids
            self.singles, self.single_records = [], []
        return self


class IngestPipeline:
    """Validates, learns and buffers a batch of consumed messages; returns what to publish."""

    def __init__(
        self,
        validator: ExampleValidator,
        learners: OnlineLearners,
        metrics: IngestMetrics,
        progress: Progress,
        releases: ReleaseAgent | None = None,
    ):
        self.validator = validator
        self.learners = learners
        self.metrics = metrics
        self.progress = progress
        self.releases = releases

    def process(self, records: Iterable[ConsumedRecord]) -> BatchOutput:
        out = BatchOutput()
        groups: dict[tuple[str, int], _Group] = {}
        invalid: dict[str, int] = {}  # reason -> messages, reported once per batch
        validate = self.validator.validate
        count = 0
        for record in records:
            count += 1
            result = validate(record.value)
            if type(result) is ValidExample:
                group = groups.get((result.stream_id, record.partition))
                if group is None:
                    group = groups[(result.stream_id, record.partition)] = _Group()
                group.singles.append(result)
                group.single_records.append(record)
            elif type(result) is Invalid:
                invalid[result.reason] = invalid.get(result.reason, 0) + 1
                # Cut to the size limit: an oversized message must still fit a Kafka request (1 MB
                # by default), or sending its dead letter would fail and stop the consumer.
                out.dead_letters.append(
                    DeadLetter(
                        record.key,
                        (record.value or b"")[:MAX_MESSAGE_BYTES],
                        dead_letter_headers(result, record),
                    )
                )
            else:  # an ExampleBatch: one message, many examples
                group = groups.get((result.stream_id, record.partition))
                if group is None:
                    group = groups[(result.stream_id, record.partition)] = _Group()
                group.add_batch(record, result)
        for reason, n in invalid.items():
            self.metrics.invalid(reason, n)
        for (stream_id, partition), group in groups.items():
            group.columns()
            if self.learners.has(stream_id):
                # Chunks keep each PredictionBatch message well under Kafka's 1 MB request limit
                # (one poll of ExampleBatch messages can hold millions of examples).
                for i in range(0, len(group.xs), MAX_PREDICTIONS_PER_MESSAGE):
                    part = slice(i, i + MAX_PREDICTIONS_PER_MESSAGE)
                    batch = self.learners.learn_batch(
                        stream_id,
                        partition,
                        group.offsets[part],
                        group.items[part],
                        group.xs[part],  # integer points or feature vectors: the learner reads them
                        group.ys[part],
                        group.ids[part],
                    )
                    if batch.predictions:  # none when a replay brought only learned examples
                        out.predictions.append((stream_id.encode(), batch.model_dump_json().encode()))
            if self.releases is not None:
                self.releases.observe_batch(
                    stream_id,
                    partition,
                    group.offsets,
                    group.xs,
                    group.ys,
                    group.users,
                    group.times,
                    group.stamps,
                )
            out.examples += len(group.xs)
        self.metrics.received(count)
        if out.dead_letters:
            self.metrics.dead_lettered(len(out.dead_letters))
        self.progress.tick(count)
        return out
