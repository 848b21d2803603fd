"""The ingest pipeline: a batch of raw messages -> validation -> the online learners -> windows.

Pure with respect to Kafka: the service's consumer hands in what it polled and sends what comes
back (predictions and dead letters), then commits the offsets: at-least-once, with every output
of a message acknowledged before its offset is committed.

Examples are grouped per (stream, source partition), keeping their order, so each stream's SOA
learns a whole group with its vectorised ``learn_many`` and one columnar ``PredictionBatch`` per
group replaces one message per example: this is what keeps the service near the Kafka client's
own rate (``benchmarks/bench_ingest.py``).

Each example meets its fate alone: an invalid message, or an invalid row of an ``ExampleBatch``, is
one dead letter (a row's letter says which row), and the rest of the batch goes on. A repeat of an
example ``id`` within the stream's horizon is dropped before the SOA and the windows
(:mod:`~privstream.agents.dedup`). Every record the pipeline asks to publish is at most
:data:`MAX_RECORD_BYTES`, whatever the input: predictions are split by size, dead letters carry at
most that much of what they reject (and the size it had).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

import msgspec

from privstream.agents.dedup import Deduplicator
from privstream.agents.interfaces import IngestMetrics
from privstream.agents.online import OnlineLearners
from privstream.agents.progress import Progress
from privstream.agents.releases import ReleaseAgent
from privstream.agents.validation import ExampleValidator, Invalid, PlainExample, ValidExample, ValidRows
from privstream.learning.errors import InvariantError
from privstream.schemas import PredictionBatch, VectorPredictionBatch


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


#: The most bytes of a record the worker produces (key, value and headers): under Kafka's default
#: limit on a message (``message.max.bytes``, 1,048,588) with room for the record's framing. The
#: ingest producer's ``max_request_size`` is set from it.
MAX_RECORD_BYTES = 1_000_000

#: Examples per ``PredictionBatch`` message at most (fewer when their ids are long: see
#: :func:`prediction_slices`).
MAX_PREDICTIONS_PER_MESSAGE = 5_000
#: Bytes of a ``PredictionBatch``'s JSON outside its columns: field names, counts, and the stream id
#: (200 characters at most, each written in at most 6 bytes), with the key (the stream id again).
_PREDICTION_ENVELOPE_BYTES = 4_096
#: Bytes of one entry of the columns, its point and its id aside: an offset (at most 19 digits), a
#: row index (at most 7 digits: rows of an 8 MiB message), a label, a prediction, ``null`` for a
#: missing id, and the commas.
_PREDICTION_ENTRY_BYTES = 45

#: A dead letter's key is the rejected message's key, cut to this length (it only picks a partition).
MAX_DEAD_LETTER_KEY_BYTES = 256
#: Its value is the rejected message (or the row, as a single example), cut to this length; its
#: headers (the reason, a detail of at most 500 characters, the source) take at most 4 KiB.
MAX_DEAD_LETTER_VALUE_BYTES = MAX_RECORD_BYTES - MAX_DEAD_LETTER_KEY_BYTES - 8_192


def prediction_slices(ids: list[str | None], point_digits: int = 19) -> list[slice]:
    """Consecutive slices of a group's examples, one ``PredictionBatch`` message each: at most
    :data:`MAX_PREDICTIONS_PER_MESSAGE` entries, and at most :data:`MAX_RECORD_BYTES` once written,
    for points of at most ``point_digits`` digits (each id counted at 6 bytes a character, the most
    JSON takes: ``\\u0001``).

    >>> prediction_slices([None] * 12_000)
    [slice(0, 5000, None), slice(5000, 10000, None), slice(10000, 12000, None)]
    >>> [s.stop - s.start for s in prediction_slices(["x" * 200] * 5_000)]
    [787, 787, 787, 787, 787, 787, 278]
    >>> [s.stop - s.start for s in prediction_slices([None] * 5_000, point_digits=309)]  # 2^1024
    [2813, 2187]
    """
    n = len(ids)
    room = MAX_RECORD_BYTES - _PREDICTION_ENVELOPE_BYTES
    entry = _PREDICTION_ENTRY_BYTES + point_digits
    if ids.count(None) == n:  # no ids: entries of one size
        step = min(MAX_PREDICTIONS_PER_MESSAGE, room // entry)
        return [slice(i, min(i + step, n)) for i in range(0, n, step)]
    slices, start, size = [], 0, 0
    for i, example_id in enumerate(ids):
        this = entry if example_id is None else entry + 6 * len(example_id)
        if i > start and (size + this > room or i - start == MAX_PREDICTIONS_PER_MESSAGE):
            slices.append(slice(start, i))
            start, size = i, 0
        size += this
    slices.append(slice(start, n))
    return slices


_ENCODER = msgspec.json.Encoder()


def encode_predictions(batch: PredictionBatch | VectorPredictionBatch) -> bytes:
    """The JSON of a predictions message, as ``batch.model_dump_json()`` writes it, by msgspec: a
    fifth of the time on columns of 5,000 entries (the fields are plain ints, strings and lists).

    >>> batch = PredictionBatch(stream_id="s", source_partition=0, source_offsets=[7], source_items=[0],
    ...     xs=[3], ys=[1], predictions=[0], mistakes_before=0, mistakes=1, mistake_bound=2, realizable=True)
    >>> encode_predictions(batch) == batch.model_dump_json().encode()
    True
    """
    return _ENCODER.encode(batch.__dict__)


class DeadLetter(NamedTuple):
    """A rejected message (or row) as it goes to the dead-letter topic (a tuple: cheap to build)."""

    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]


@dataclass
class BatchOutput:
    """What a batch produces: messages for the predictions and dead-letter topics."""

    predictions: list[tuple[bytes, bytes]] = field(default_factory=list)  # (key, value)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    examples: int = 0


def dead_letter(invalid: Invalid, record: ConsumedRecord, value: bytes, row: int | None = None) -> DeadLetter:
    """The dead letter of a rejected message (``value``: the message) or of row ``row`` of a batch
    (``value``: the row as a single example). Headers say why and where it came from:
    ``error.reason``, ``error.detail``, ``source.topic``, ``source.partition``, ``source.offset``,
    ``source.row`` for a row, and ``source.bytes`` when the value had to be cut (its full size)."""
    headers = [
        ("error.reason", invalid.reason.encode()),
        ("error.detail", invalid.detail[:500].encode()),
        ("source.topic", record.topic.encode()),
        ("source.partition", str(record.partition).encode()),
        ("source.offset", str(record.offset).encode()),
    ]
    if row is not None:
        headers.append(("source.row", str(row).encode()))
    if len(value) > MAX_DEAD_LETTER_VALUE_BYTES:
        headers.append(("source.bytes", str(len(value)).encode()))
        value = value[:MAX_DEAD_LETTER_VALUE_BYTES]
    key = record.key
    if key is not None and len(key) > MAX_DEAD_LETTER_KEY_BYTES:
        key = key[:MAX_DEAD_LETTER_KEY_BYTES]
    return DeadLetter(key, value, headers)


@dataclass
class _Group:
    """The valid examples of one stream from one partition, in order, as columns.

    Single examples (the hot path) are appended as they come, one ``ValidExample`` and its record,
    and turned into columns in bulk when an ``ExampleBatch`` follows or the batch ends."""

    offsets: list[int] = field(default_factory=list)
    items: list[int] = field(default_factory=list)
    xs: list[int | list[float]] = field(default_factory=list)  # points, or feature vectors
    ys: list[int] = field(default_factory=list)
    users: list[str | None] = field(default_factory=list)
    times: list[datetime | None] = field(default_factory=list)  # event times, if given
    stamps: list[int | None] = field(default_factory=list)  # the messages' Kafka timestamps (ms)
    ids: list[str | None] = field(default_factory=list)
    singles: list[PlainExample | ValidExample] = field(default_factory=list)  # not yet in the columns
    single_records: list[ConsumedRecord] = field(default_factory=list)

    def add_batch(self, record: ConsumedRecord, batch: ValidRows) -> None:
        self.columns()  # the single examples before it first: the order is the stream's
        n = len(batch.rows)
        self.offsets += [record.offset] * n
        self.items += batch.rows
        self.xs += batch.xs
        self.ys += batch.ys
        self.users += batch.user_ids or [None] * n
        self.times += batch.event_times or [None] * n
        self.stamps += [record.timestamp] * n
        self.ids += batch.ids or [None] * n

    def columns(self) -> _Group:
        """The group with every example in its columns."""
        singles, records = self.singles, self.single_records
        if singles:  # a column at a time (the examples are msgspec structs or tuples: by name)
            self.offsets += [r.offset for r in records]
            self.stamps += [r.timestamp for r in records]
            self.items += [0] * len(singles)
            self.xs += [e.x for e in singles]
            self.ys += [e.y for e in singles]
            self.users += [e.user_id for e in singles]
            self.times += [e.event_time for e in singles]
            self.ids += [e.id for e in singles]
            self.singles, self.single_records = [], []
        return self


class IngestPipeline:
    """Validates, learns and buffers a batch of consumed messages; returns what to publish.

    ``dedup`` drops repeats of an example ``id`` (None: no de-duplication)."""

    def __init__(
        self,
        validator: ExampleValidator,
        learners: OnlineLearners,
        metrics: IngestMetrics,
        progress: Progress,
        releases: ReleaseAgent | None = None,
        dedup: Deduplicator | None = None,
    ):
        self.validator = validator
        self.learners = learners
        self.metrics = metrics
        self.progress = progress
        self.releases = releases
        self.dedup = dedup

    def process(self, records: Iterable[ConsumedRecord]) -> BatchOutput:
        """The batch's output, processed at once (:meth:`process_parts` in one part a group)."""
        out = BatchOutput()
        for part in self.process_parts(records):
            out.predictions += part.predictions
            out.dead_letters += part.dead_letters
            out.examples += part.examples
        return out

    def process_parts(
        self, records: Iterable[ConsumedRecord], examples: int | None = None
    ) -> Iterator[BatchOutput]:
        """The batch's output in parts, lazily, so that a caller can let the event loop run between
        two parts (:func:`process_in_chunks`). With ``examples``, a part reads and checks at most
        that many rows (a large ``ExampleBatch`` is checked a slice of rows at a time:
        :meth:`~privstream.agents.validation.ExampleValidator.read_parts`), and learns online and
        hands the release agent at most that many examples, in order; each part carries the dead
        letters found since the one before. ``examples`` None: everything read first, then one
        part per (stream, partition)."""
        out = BatchOutput()
        groups: dict[tuple[str, int], _Group] = {}
        invalid: dict[str, int] = {}  # reason -> messages or rows, reported once per batch
        repeats: dict[str, int] = {}  # stream -> repeats dropped, reported once per batch
        read = self.validator.read
        is_repeat = self.dedup.is_repeat if self.dedup is not None else None
        count = pending = 0
        for record in records:
            count += 1
            results = (
                (read(record.value),)
                if examples is None
                else self.validator.read_parts(record.value, examples)
            )
            for result in results:
                if type(result) is PlainExample or type(result) is ValidExample:
                    stream_id = result.stream_id
                    if (
                        result.id is not None
                        and is_repeat is not None
                        and is_repeat(stream_id, result.id, record.partition, record.offset, 0)
                    ):
                        repeats[stream_id] = repeats.get(stream_id, 0) + 1
                        continue
                    group = groups.get((stream_id, record.partition))
                    if group is None:
                        group = groups[(stream_id, record.partition)] = _Group()
                    group.singles.append(result)
                    group.single_records.append(record)
                    pending += 1
                elif type(result) is Invalid:
                    invalid[result.reason] = invalid.get(result.reason, 0) + 1
                    out.dead_letters.append(dead_letter(result, record, record.value or b""))
                    pending += 1
                else:  # the rows of an ExampleBatch: each valid one kept, each invalid one dead-lettered
                    for row, why, value in result.rejected:
                        invalid[why.reason] = invalid.get(why.reason, 0) + 1
                        out.dead_letters.append(dead_letter(why, record, value, row))
                    pending += len(result.rows) + len(result.rejected)
                    if result.ids is not None and is_repeat is not None:
                        result = _without_repeats(result, record, is_repeat, repeats)
                    if result.rows:
                        group = groups.get((result.stream_id, record.partition))
                        if group is None:
                            group = groups[(result.stream_id, record.partition)] = _Group()
                        group.add_batch(record, result)
                if examples is not None and pending >= examples:  # a part's worth read: take it in
                    yield from self._take_in_groups(groups, out, examples)
                    groups, out, pending = {}, BatchOutput(), 0
        for reason, n in invalid.items():
            self.metrics.invalid(reason, n)
        for stream_id, n in repeats.items():
            self.metrics.repeated(stream_id, n)
        if self.dedup is not None:
            for stream_id, n in self.dedup.take_forgotten().items():
                self.metrics.ids_forgotten(stream_id, n)
        self.metrics.received(count)
        self.progress.tick(count)
        yield from self._take_in_groups(groups, out, examples)

    def _take_in_groups(
        self, groups: dict[tuple[str, int], _Group], out: BatchOutput, examples: int | None
    ) -> Iterator[BatchOutput]:
        """The groups' examples learned and handed to the release agent, at most ``examples`` a
        part (None: a group a part); ``out`` (its dead letters) goes with the first part."""
        for (stream_id, partition), group in groups.items():
            group.columns()
            n = len(group.xs)
            step = max(1, n if examples is None else examples)
            for lo in range(0, n, step):
                out.examples += self._take_in(stream_id, partition, group, slice(lo, min(n, lo + step)), out)
                self._dead_lettered(out)
                yield out
                out = BatchOutput()
        if out.dead_letters:  # nothing to take in: the dead letters alone
            self._dead_lettered(out)
            yield out

    def _dead_lettered(self, out: BatchOutput) -> None:
        if out.dead_letters:
            self.metrics.dead_lettered(len(out.dead_letters))

    def _take_in(self, stream_id: str, partition: int, group: _Group, rows: slice, out: BatchOutput) -> int:
        """Learn ``rows`` of a group online (their predictions into ``out``) and hand them to the
        release agent; how many examples that was."""
        if self.learners.has(stream_id):
            # One poll can hold millions of examples: several messages, each under the size limit.
            digits = self.learners.prediction_point_digits(stream_id)
            offsets, items, xs, ys = group.offsets[rows], group.items[rows], group.xs[rows], group.ys[rows]
            ids = group.ids[rows]
            for part in prediction_slices(ids, digits):
                batch = self.learners.learn_batch(
                    stream_id,
                    partition,
                    offsets[part],
                    items[part],
                    xs[part],  # integer points or feature vectors: the learner reads them
                    ys[part],
                    ids[part],
                )
                if batch.predictions:  # none when a replay brought only learned examples
                    out.predictions.append((stream_id.encode(), encode_predictions(batch)))
        if self.releases is not None:
            self.releases.observe_batch(
                stream_id,
                partition,
                group.offsets[rows],
                group.xs[rows],
                group.ys[rows],
                group.users[rows],
                group.times[rows],
                group.stamps[rows],
            )
        return len(group.xs[rows])


def _without_repeats(
    rows: ValidRows,
    record: ConsumedRecord,
    is_repeat: Callable[[str, str, int, int, int], bool],
    repeats: dict[str, int],
) -> ValidRows:
    """The batch's valid rows but the repeats of an ``id`` (counted in ``repeats``)."""
    if rows.ids is None:
        raise InvariantError("invariant broken: rows.ids is not None")
    sid, partition, offset = rows.stream_id, record.partition, record.offset
    keep = [
        k
        for k, (row, example_id) in enumerate(zip(rows.rows, rows.ids, strict=True))
        if example_id is None or not is_repeat(sid, example_id, partition, offset, row)
    ]
    if len(keep) == len(rows.rows):
        return rows
    repeats[sid] = repeats.get(sid, 0) + len(rows.rows) - len(keep)

    def pick(column: list[Any] | None) -> list[Any] | None:
        return None if column is None else [column[k] for k in keep]

    return rows._replace(
        rows=[rows.rows[k] for k in keep],
        xs=[rows.xs[k] for k in keep],
        ys=[rows.ys[k] for k in keep],
        user_ids=pick(rows.user_ids),
        event_times=pick(rows.event_times),
        ids=pick(rows.ids),
    )


#: A poll is processed in chunks of at most this many records, or of records of at most
#: :data:`CHUNK_BYTES` together (a chunk holds one record at least, whatever its size), and a
#: chunk's examples are learned and stored :data:`CHUNK_EXAMPLES` at a time (an ``ExampleBatch``
#: can hold a million rows): between two chunks, and two parts of one, the event loop serves the
#: timers, the learners' results and the publisher, and ingest waits while a release's deadline is
#: near (``ReleaseAgent.clear_of_deadlines``). What one part costs is then bounded by these sizes,
#: except for reading one message: its JSON and its rows' checks grow with its size (up to
#: ``MAX_MESSAGE_BYTES``).
CHUNK_RECORDS = 500
CHUNK_BYTES = 256 << 10
CHUNK_EXAMPLES = 500


def chunks(records: Iterable[ConsumedRecord]) -> Iterable[list[ConsumedRecord]]:
    """The records in order, in chunks of at most :data:`CHUNK_RECORDS` records and
    :data:`CHUNK_BYTES` bytes of values (one record at least).

    >>> records = [RawRecord("examples", 0, o, None, b"x" * 100_000) for o in range(5)]
    >>> [[r.offset for r in chunk] for chunk in chunks(records)]
    [[0, 1], [2, 3], [4]]
    >>> [len(chunk) for chunk in chunks(RawRecord("examples", 0, o, None, b"{}") for o in range(1200))]
    [500, 500, 200]
    """
    chunk: list[ConsumedRecord] = []
    size = 0
    for record in records:
        value = len(record.value or b"")
        if chunk and (len(chunk) == CHUNK_RECORDS or size + value > CHUNK_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(record)
        size += value
    if chunk:
        yield chunk


async def process_in_chunks(
    process: Callable[[list[ConsumedRecord]], BatchOutput | Iterable[BatchOutput]],
    records: Iterable[ConsumedRecord],
    pause: Callable[[], Awaitable[None]] | None = None,
) -> BatchOutput:
    """A poll's output, processed chunk by chunk (:func:`chunks`) in order by ``process``; before
    each chunk, and before each part of one (``process`` may give a chunk's output in parts,
    lazily: :meth:`IngestPipeline.process_parts` with :data:`CHUNK_EXAMPLES`), the event loop runs
    what is ready and ``pause()`` is awaited (the release agent's ``clear_of_deadlines``). The
    outputs are those of the whole poll, in order: its offsets are committed once they are all
    acknowledged, as for a poll processed at once."""
    out = BatchOutput()
    for chunk in chunks(records):
        await asyncio.sleep(0)
        if pause is not None:
            await pause()
        result = process(chunk)
        parts = iter((result,) if isinstance(result, BatchOutput) else result)
        while (part := next(parts, None)) is not None:
            out.predictions += part.predictions
            out.dead_letters += part.dead_letters
            out.examples += part.examples
            await asyncio.sleep(0)
            if pause is not None:
                await pause()
    return out


def chunked(pipeline: IngestPipeline) -> Callable[[list[ConsumedRecord]], Iterator[BatchOutput]]:
    """What ingest hands :func:`process_in_chunks`: the pipeline's parts of at most
    :data:`CHUNK_EXAMPLES` examples."""
    return lambda records: pipeline.process_parts(records, CHUNK_EXAMPLES)
