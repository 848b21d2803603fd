"""A partition's log replaced under a running worker, with no rejoin of the group (a topic deleted
and re-created between two metadata refreshes): aiokafka resets the fetch position out of the new
log to its start by itself (``auto_offset_reset="earliest"``), and the new log's examples come in
below the positions stored. The ingest loop sees its offsets go back without a seek of its own and
judges the partition as at an assignment: rebased (every new example learned once, after the old
ones), refused (the worker stops), or, the same log still there, read on as replays.

Stand-ins: a consumer over an in-memory log that resets a position past its end as aiokafka does,
a state store of positions, and a pipeline that records the positions it is given.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiokafka import TopicPartition

from privstream.agents.pipeline import BatchOutput
from privstream.stream_app.kafka.ingest import IngestService
from privstream.stream_app.kafka.log_marks import LogMarks, fingerprint
from privstream.stream_app.settings import Settings

TP = TopicPartition("examples", 0)


@dataclass(frozen=True)
class Rec:
    """A consumed record as the loop, the marks and the pipeline read it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


def a_log(day: int, n: int) -> list[Rec]:
    """``n`` records written on ``day`` (their timestamps, hence fingerprints, differ by day)."""
    return [Rec("examples", 0, o, b"k", b'{"x": %d}' % o, day * 86_400_000 + o) for o in range(n)]


class Consumer:
    """One partition's log, read from ``position``; a position past the log's end is reset to its
    start, silently, as aiokafka does with ``auto_offset_reset="earliest"``."""

    def __init__(self, records: list[Rec]) -> None:
        self.log = records
        self.position = 0
        self.seeks: list[int] = []
        self.paused: set[TopicPartition] = set()

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[Rec]]:
        await asyncio.sleep(0.001)
        if TP in self.paused:
            return {}
        if self.position > len(self.log):  # OffsetOutOfRange: aiokafka's own reset
            self.position = 0
        records = self.log[self.position : self.position + 3]
        self.position += len(records)
        return {TP: records} if records else {}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append(offset)
        self.position = offset

    def pause(self, *partitions: TopicPartition) -> None:
        self.paused.update(partitions)

    async def beginning_offsets(self, parts: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(parts, 0)

    async def end_offsets(self, parts: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(parts, len(self.log))

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        pass

    def assignment(self) -> set[TopicPartition]:
        return {TP}

    def highwater(self, tp: TopicPartition) -> int | None:
        return None


class Producer:
    async def send(self, topic: str, value: bytes, key: bytes | None = None, headers: Any = None) -> Any:
        future = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


class Store:
    """The state store's positions and log marks; ``keep`` stores what the pipeline learns."""

    def __init__(self) -> None:
        self.position = -1
        self.marks: dict[int, str] = {}

    def positions(self, stream_id: str) -> dict[int, int]:
        return {} if self.position < 0 else {0: self.position}

    def log_marks(self) -> dict[int, str]:
        return dict(self.marks)

    def put_log_mark(self, partition: int, mark: str) -> None:
        self.marks[partition] = mark


class Pipeline:
    """Stores the positions above the stored one (the state store drops the rest as replays)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.learned: list[int] = []

    def process_parts(self, records: Any, examples: int | None = None) -> Any:
        for record in records:
            if record.offset >= self.store.position:
                self.learned.append(record.offset)
                self.store.position = record.offset + 1
        yield BatchOutput()


def running(day1: list[Rec], *, rebase: bool) -> tuple[IngestService, Consumer, Pipeline, LogMarks]:
    settings = Settings(kafka_bootstrap="127.0.0.1:9", _env_file=None)  # type: ignore[call-arg]
    store = Store()
    marks = LogMarks(store, ["s"], rebase=rebase)
    pipeline = Pipeline(store)
    ingest = IngestService(settings, pipeline, on_assigned=lambda parts: None, marks=marks)  # type: ignore[arg-type]
    consumer = Consumer(day1)
    ingest.consumer, ingest.producer = consumer, Producer()  # type: ignore[assignment]

    async def fingerprints_at(wanted: dict[TopicPartition, int]) -> dict[TopicPartition, str]:
        return {tp: fingerprint(consumer.log[o]) for tp, o in wanted.items() if o < len(consumer.log)}

    ingest._fingerprints_at = fingerprints_at  # type: ignore[method-assign]
    return ingest, consumer, pipeline, marks


async def until(condition: Any) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.002)
    raise AssertionError("condition never held")


async def test_a_log_replaced_under_the_running_worker_is_rebased_and_its_examples_learned():
    ingest, consumer, pipeline, marks = running(a_log(1, 6), rebase=True)
    loop = asyncio.ensure_future(IngestService._consume(ingest))
    try:
        await until(lambda: pipeline.learned == [0, 1, 2, 3, 4, 5])
        consumer.log = a_log(2, 4)  # re-created: 4 new examples at offsets 0..3, below 6
        # Each new example is learned once, counted after the old ones (not dropped as a replay).
        await until(lambda: pipeline.learned == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
        assert marks.marks[0].base == 6 and marks.marks[0].replaced == 1
        assert consumer.seeks == [0] and ingest.refused is None
        consumer.log += a_log(2, 6)[4:]  # the new log goes on: read on, no second rebase
        await until(lambda: pipeline.learned[-1] == 11)
        assert marks.marks[0].replaced == 1 and consumer.seeks == [0]
    finally:
        loop.cancel()


async def test_a_log_replaced_under_the_running_worker_is_refused_where_no_rebase_is_allowed():
    ingest, consumer, pipeline, marks = running(a_log(1, 6), rebase=False)
    stopped = asyncio.Event()
    ingest.stop_worker = stopped.set
    loop = asyncio.ensure_future(IngestService._consume(ingest))
    try:
        await until(lambda: pipeline.learned == [0, 1, 2, 3, 4, 5])
        consumer.log = a_log(2, 4)
        await asyncio.wait_for(stopped.wait(), 2)  # the worker stops, in one line
        assert ingest.refused is not None and "partition 0 was replaced" in str(ingest.refused)
        assert pipeline.learned == [0, 1, 2, 3, 4, 5] and TP in consumer.paused
        assert marks.marks[0].replaced == 0
    finally:
        loop.cancel()


async def test_offsets_that_go_back_on_the_same_log_are_read_on_as_replays():
    """Our own seek back (a state store restored) is not judged; a reset on the same log (its anchor
    still there) is judged and read on: its records below the position are replays."""
    ingest, consumer, pipeline, marks = running(a_log(1, 6), rebase=True)
    loop = asyncio.ensure_future(IngestService._consume(ingest))
    try:
        await until(lambda: pipeline.learned == [0, 1, 2, 3, 4, 5])
        consumer.position = 99  # out of range on the same log: reset to its start
        await until(lambda: consumer.position == 6)
        consumer.log += a_log(1, 8)[6:]
        await until(lambda: pipeline.learned == [0, 1, 2, 3, 4, 5, 6, 7])
        assert marks.marks[0].replaced == 0 and consumer.seeks == []
    finally:
        loop.cancel()
